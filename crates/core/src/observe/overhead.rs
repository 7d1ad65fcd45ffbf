//! The client's own overhead, stated in every report: how late goodput handed requests to a
//! connection (dispatch lag `sent − dequeued`, p50/p99/max), how much CPU the goodput process
//! used over the run, and a verdict — when the client lagged or its CPU was saturated, it may
//! have been the bottleneck and the run's figures are not trustworthy.
//!
//! CPU time is read from `/proc/self/stat` (user + system time of every thread, 10 ms ticks) on
//! Linux; elsewhere it is not measured (`null`).

use std::io;
use std::time::{Duration, Instant};

use crate::metrics::LatencyHistogram;
use crate::metrics::aggregate::latency_stats;
use crate::record::{Phase, RequestRecord};
pub use crate::report::client::ClientReport;
use crate::report::{Report, Warning};
use crate::runner::RecordSink;

/// Dispatch lag p99 above which the client is judged the bottleneck, ms.
pub const LAG_BOTTLENECK_MS: f64 = 5.0;

/// Share of every core the process may use before it counts as saturated.
pub const CPU_SATURATED: f64 = 0.9;

/// `/proc` reports CPU time in ticks of this many per second (`USER_HZ`, fixed at 100 by the
/// Linux user-space ABI).
const TICKS_PER_SEC: u64 = 100;

/// Process CPU time so far (user + system, every thread), when the platform tells.
pub fn process_cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    parse_cpu_ticks(&stat).map(|ticks| Duration::from_millis(ticks * 1000 / TICKS_PER_SEC))
}

/// User + system ticks from the text of `/proc/<pid>/stat` (fields 14 and 15; the command
/// name in field 2 may hold spaces and parentheses, so fields are counted after the last `)`).
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace();
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// Collects the client's overhead while a run goes: a [`RecordSink`] for the dispatch lags and
/// a CPU meter started when it is created.
#[derive(Debug)]
pub struct ClientOverhead {
    lag: LatencyHistogram,
    /// Measured requests' `read_late_us`.
    read_late: LatencyHistogram,
    started: Option<(Instant, Option<Duration>)>,
    includes_simulator: bool,
    /// Response chunks received by every finished request (warm-up included, as the CPU is).
    chunks: u64,
}

impl ClientOverhead {
    /// Starts measuring now (create it right before the run).
    pub fn start(includes_simulator: bool) -> Self {
        ClientOverhead {
            lag: LatencyHistogram::new(),
            read_late: LatencyHistogram::new(),
            started: Some((Instant::now(), process_cpu_time())),
            includes_simulator,
            chunks: 0,
        }
    }

    /// Dispatch lags only, no CPU (e.g. a report rebuilt from the journal).
    pub fn from_records_only() -> Self {
        ClientOverhead {
            lag: LatencyHistogram::new(),
            read_late: LatencyHistogram::new(),
            started: None,
            includes_simulator: false,
            chunks: 0,
        }
    }

    /// Folds in one finished request (measured and sent ones count).
    pub fn add(&mut self, record: &RequestRecord) {
        self.chunks += record.chunks.len() as u64;
        if record.phase != Phase::Measure {
            return;
        }
        if let Some(sent) = record.sent_us {
            self.lag
                .record_micros_n(sent.saturating_sub(record.dequeued_us), 1);
        }
        if let Some(late) = record.read_late_us {
            self.read_late.record_micros_n(late, 1);
        }
    }

    /// The overhead so far, with its verdict.
    pub fn report(&self) -> ClientReport {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let (wall, cpu) = match self.started {
            Some((at, Some(cpu_at_start))) => {
                let cpu = process_cpu_time().map(|now| now.saturating_sub(cpu_at_start));
                (Some(at.elapsed()), cpu)
            }
            Some((at, None)) => (Some(at.elapsed()), None),
            None => (None, None),
        };
        let utilization = match (wall, cpu) {
            (Some(wall), Some(cpu)) if !wall.is_zero() => {
                Some(cpu.as_secs_f64() / (wall.as_secs_f64() * cores as f64))
            }
            _ => None,
        };
        let lag = latency_stats(&self.lag);
        let reason = verdict(lag.p99, utilization, self.includes_simulator);
        ClientReport {
            dispatch_lag_ms: lag,
            read_late_ms: (!self.read_late.is_empty()).then(|| latency_stats(&self.read_late)),
            chunks_received: self.chunks,
            cpu_ms_per_1000_chunks: cpu
                .filter(|_| self.chunks > 0)
                .map(|cpu| cpu.as_secs_f64() * 1e6 / self.chunks as f64),
            cpu_secs: cpu.map(|d| d.as_secs_f64()),
            wall_secs: wall.map(|d| d.as_secs_f64()),
            cores: u32::try_from(cores).unwrap_or(u32::MAX),
            cpu_utilization: utilization,
            includes_simulator: self.includes_simulator,
            lag_threshold_ms: LAG_BOTTLENECK_MS,
            cpu_threshold: CPU_SATURATED,
            bottleneck: reason.is_some(),
            trustworthy: reason.is_none(),
            reason,
        }
    }

    /// Puts the client section into `report`, with a warning when the client may have been
    /// the bottleneck.
    pub fn attach(&self, report: &mut Report) {
        let client = self.report();
        if let Some(reason) = &client.reason {
            report.warnings.push(Warning::new(
                "client_bottleneck",
                format!("the client may have been the bottleneck: {reason}; these figures are not trustworthy"),
                "lower the load, give goodput more CPU (run the server elsewhere), or split the load over several goodput processes",
            ));
        }
        report.client = Some(client);
    }
}

impl RecordSink for ClientOverhead {
    fn record(&mut self, record: &RequestRecord) -> io::Result<()> {
        self.add(record);
        Ok(())
    }
}

/// Why the client may have been the bottleneck, if it may.
fn verdict(lag_p99_ms: Option<f64>, utilization: Option<f64>, simulator: bool) -> Option<String> {
    let mut reasons = Vec::new();
    if let Some(lag) = lag_p99_ms.filter(|lag| *lag > LAG_BOTTLENECK_MS) {
        reasons.push(format!(
            "dispatch lag p99 {lag:.2} ms exceeds {LAG_BOTTLENECK_MS} ms"
        ));
    }
    if let Some(share) = utilization.filter(|share| *share >= CPU_SATURATED) {
        let with = if simulator {
            " (the embedded simulator included)"
        } else {
            ""
        };
        reasons.push(format!(
            "the goodput process used {:.0} % of all cores{with}",
            share * 100.0
        ));
    }
    (!reasons.is_empty()).then(|| reasons.join("; "))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn cpu_ticks_are_read_after_the_command_name() {
        let stat = "4242 (goodput (x) y) R 1 2 3 4 5 6 7 8 9 10 250 17 0 0 20 0 9 0";
        assert_eq!(parse_cpu_ticks(stat), Some(267));
        assert_eq!(parse_cpu_ticks("garbage"), None);
        assert_eq!(parse_cpu_ticks("1 (x) R 1 2"), None);
    }

    #[test]
    fn this_process_has_used_some_cpu_on_linux() {
        if cfg!(target_os = "linux") {
            let spin: u64 = (0..2_000_000u64).map(|i| i ^ (i >> 3)).sum();
            assert!(spin > 0);
            assert!(process_cpu_time().is_some());
        }
    }

    #[test]
    fn verdict_names_lag_and_saturation() {
        assert_eq!(verdict(Some(0.4), Some(0.3), false), None);
        assert_eq!(verdict(None, None, false), None);
        let lag = verdict(Some(7.5), Some(0.2), false).unwrap();
        assert!(lag.contains("7.50 ms"), "{lag}");
        let both = verdict(Some(9.0), Some(0.95), true).unwrap();
        assert!(
            both.contains("95 %") && both.contains("simulator"),
            "{both}"
        );
    }

    #[test]
    fn lag_counts_measured_sent_requests_from_their_dequeue() {
        let mut overhead = ClientOverhead::from_records_only();
        let record = |phase: Phase, dequeued_us: u64, sent_us: Option<u64>| {
            let json = serde_json::json!({
                "index": 0, "phase": phase, "scheduled_us": 0, "dequeued_us": dequeued_us,
                "sent_us": sent_us, "response_us": null, "first_token_us": null,
                "last_token_us": null, "end_us": 100_000, "streamed": true, "input_tokens": null,
                "input_tokens_source": "none", "output_tokens": 0, "output_tokens_source": "none",
                "chunks": [], "items": 1,
            });
            serde_json::from_value::<RequestRecord>(json).unwrap()
        };
        overhead.add(&record(Phase::Measure, 1_000, Some(1_300)));
        overhead.add(&record(Phase::Measure, 5_000, Some(5_100)));
        overhead.add(&record(Phase::Warmup, 0, Some(90_000)));
        overhead.add(&record(Phase::Measure, 0, None));
        let report = overhead.report();
        assert_eq!(report.dispatch_lag_ms.count, 2);
        assert_eq!(report.dispatch_lag_ms.max, Some(0.3));
        assert!(report.cpu_secs.is_none() && report.trustworthy && !report.bottleneck);
    }

    #[test]
    fn cpu_per_thousand_chunks_counts_every_finished_requests_chunks() {
        let record = |phase: &str, chunks: usize| {
            let chunks: Vec<[u64; 2]> = (0..chunks as u64).map(|i| [i * 1_000, 1]).collect();
            let json = serde_json::json!({
                "index": 0, "phase": phase, "scheduled_us": 0, "dequeued_us": 0,
                "sent_us": 0, "response_us": null, "first_token_us": null,
                "last_token_us": null, "end_us": 100_000, "streamed": true, "input_tokens": null,
                "input_tokens_source": "none", "output_tokens": 0, "output_tokens_source": "none",
                "chunks": chunks, "items": 1,
            });
            serde_json::from_value::<RequestRecord>(json).unwrap()
        };
        let mut rebuilt = ClientOverhead::from_records_only();
        rebuilt.add(&record("warmup", 30));
        rebuilt.add(&record("measure", 70));
        let report = rebuilt.report();
        assert_eq!(report.chunks_received, 100);
        assert_eq!(
            report.cpu_ms_per_1000_chunks, None,
            "no CPU figure, no ratio"
        );

        let mut live = ClientOverhead::start(false);
        let spin: u64 = (0..20_000_000u64).map(|i| i ^ (i >> 3)).sum();
        assert!(spin > 0);
        live.add(&record("measure", 2_000));
        let report = live.report();
        if let Some(cpu) = report.cpu_secs {
            let per = report.cpu_ms_per_1000_chunks.unwrap();
            assert!((per - cpu * 1e6 / 2_000.0).abs() < 1e-9, "{per} vs {cpu}");
        }
    }
}
