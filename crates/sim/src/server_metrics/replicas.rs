//! A fleet's metrics by replica (`goodput_sim:replica_*`, label `replica`): each replica's
//! running and waiting requests and KV usage, its preemptions and prefix-cache counters, and
//! the requests routed to it — what a client scraping a fleet behind one address reads to
//! tell its replicas apart. Disaggregated, the prefill replicas come first, then the decode.

use std::fmt::Write as _;

use crate::engine::{Engine, EngineStats};

/// Each replica's last published state and its routed-request count.
#[derive(Debug, Default)]
pub struct ReplicaView {
    stats: Vec<EngineStats>,
    routed: Vec<u64>,
}

impl ReplicaView {
    /// Takes the engine's per-replica state (kept only with more than one replica).
    pub fn update(&mut self, engine: &dyn Engine) {
        let stats = engine.replica_stats();
        if stats.len() > 1 {
            if self.routed.len() < stats.len() {
                self.routed.resize(stats.len(), 0);
            }
            self.stats = stats;
        }
    }

    /// Counts a request routed to `replica`.
    pub fn routed(&mut self, replica: usize) {
        if self.routed.len() <= replica {
            self.routed.resize(replica + 1, 0);
        }
        self.routed[replica] += 1;
    }

    /// Appends the per-replica series to a Prometheus exposition (`labels`: the server's).
    pub fn render(&self, out: &mut String, labels: &str) {
        if self.stats.is_empty() {
            return;
        }
        type Value = fn(&EngineStats) -> f64;
        let families: [(&str, &str, &str, Value); 6] = [
            (
                "goodput_sim:replica_requests_running",
                "Requests running on the replica.",
                "gauge",
                |s| s.running as f64,
            ),
            (
                "goodput_sim:replica_requests_waiting",
                "Requests waiting on the replica.",
                "gauge",
                |s| s.waiting as f64,
            ),
            (
                "goodput_sim:replica_kv_cache_usage_perc",
                "The replica's KV-cache usage (1 = full).",
                "gauge",
                |s| s.kv_usage,
            ),
            (
                "goodput_sim:replica_preemptions_total",
                "Preemptions on the replica.",
                "counter",
                |s| s.preemptions_total as f64,
            ),
            (
                "goodput_sim:replica_prefix_cache_queries_total",
                "Prompt tokens looked up in the replica's prefix cache.",
                "counter",
                |s| s.prefix_queries_tokens as f64,
            ),
            (
                "goodput_sim:replica_prefix_cache_hits_total",
                "Prompt tokens found in the replica's prefix cache.",
                "counter",
                |s| s.prefix_hits_tokens as f64,
            ),
        ];
        for (name, help, kind, value) in families {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for (i, stats) in self.stats.iter().enumerate() {
                let _ = writeln!(out, "{name}{{{labels},replica=\"{i}\"}} {}", value(stats));
            }
        }
        let name = "goodput_sim:replica_requests_routed_total";
        let _ = writeln!(
            out,
            "# HELP {name} Requests the router sent to the replica.\n# TYPE {name} counter"
        );
        for (i, count) in self.routed.iter().enumerate() {
            let _ = writeln!(out, "{name}{{{labels},replica=\"{i}\"}} {count}");
        }
    }
}
