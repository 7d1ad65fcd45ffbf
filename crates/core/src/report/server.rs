//! The `server` section of a step report: what the server's own metrics said during the step
//! (definitions in `docs/metrics.md`, "Server-side metrics").

use serde::{Deserialize, Serialize};

/// Server-side figures of one step, from its `/metrics`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerReport {
    /// The metrics URL scraped.
    pub metrics_url: String,
    /// The server family its metric names belong to (`vllm`, `sglang`, `tgi`, `llamacpp`,
    /// `goodput-sim`), when recognised.
    pub flavour: Option<String>,
    /// Time between scrapes, ms.
    pub interval_ms: f64,
    /// Scrapes that returned known metrics.
    pub scrapes: u64,
    /// Scrapes that returned nothing usable.
    pub failed_scrapes: u64,
    /// Counter resets seen (a counter went down: the server restarted).
    pub counter_resets: u64,
    /// Over the step's measurement interval.
    pub measurement: ServerInterval,
    /// From the first scrape (before the first request) to the last (after the drain).
    pub run_totals: ServerTotals,
    /// The server's token counters against the client's own counts, over the whole run.
    pub agreement: TokenAgreement,
    /// Per client window (same start and width as `windows`).
    pub series: Vec<ServerWindow>,
}

/// Server-side figures over the measurement interval.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ServerInterval {
    /// Start of the part of the interval the scrapes cover, seconds since the run start.
    pub start_secs: f64,
    /// Its end.
    pub end_secs: f64,
    /// Requests in the running batch.
    pub running: GaugeStats,
    /// Requests waiting in the server's queue.
    pub waiting: GaugeStats,
    /// KV cache usage, 0–1.
    pub kv_cache_usage: GaugeStats,
    /// Accelerator power, watts (summed over accelerators).
    pub power_watts: GaugeStats,
    /// Prompt tokens the server processed, per second.
    pub prompt_tokens_per_sec: Option<f64>,
    /// Tokens the server generated, per second.
    pub generation_tokens_per_sec: Option<f64>,
    /// Requests the server finished, per second.
    pub requests_finished_per_sec: Option<f64>,
    /// Preemptions (vLLM) or retractions (SGLang).
    pub preemptions: Option<f64>,
    /// Prefix-cache hits ÷ queries (tokens).
    pub prefix_cache_hit_rate: Option<f64>,
    /// Speculative-decoding counters.
    pub speculative: SpecCounters,
    /// Server-side latency histograms, differenced over the interval.
    pub latency_ms: ServerLatency,
    /// A disaggregated deployment's prefill and decode queues and KV transfers (absent where
    /// the server exposes none of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disaggregation: Option<Disaggregation>,
}

/// Prefill/decode disaggregation as the server's metrics state it: the queues on each side
/// (SGLang's) and the KV cache transfers between them (vLLM's NIXL connector, SGLang's).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Disaggregation {
    /// A prefill instance: requests waiting for KV room on their decode instance.
    pub prefill_prealloc_queue: GaugeStats,
    /// A prefill instance: requests prefilled whose KV is being transferred.
    pub prefill_inflight_queue: GaugeStats,
    /// A decode instance: requests waiting for KV room.
    pub decode_prealloc_queue: GaugeStats,
    /// A decode instance: requests waiting for their KV to arrive.
    pub decode_transfer_queue: GaugeStats,
    /// Each KV transfer's time, differenced over the interval (vLLM NIXL).
    pub kv_transfer_ms: HistogramStats,
    /// KV transfer latency as the server's gauge states it, ms (SGLang).
    pub kv_transfer_latency_ms: GaugeStats,
    /// KV transfers that failed over the interval.
    pub kv_transfer_failures: Option<f64>,
}

/// Summary of a gauge's samples.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct GaugeStats {
    /// Mean of the samples.
    pub mean: Option<f64>,
    /// 95th percentile (nearest rank).
    pub p95: Option<f64>,
    /// Maximum.
    pub max: Option<f64>,
    /// Samples.
    pub samples: u64,
}

/// Speculative-decoding counters (vLLM `spec_decode_*`, llama.cpp) or gauges (SGLang).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SpecCounters {
    /// Verification steps that carried drafts.
    pub drafts: Option<f64>,
    /// Draft tokens proposed.
    pub draft_tokens: Option<f64>,
    /// Draft tokens accepted.
    pub accepted_tokens: Option<f64>,
    /// Mean accepted length reported as a gauge (SGLang), mean over samples.
    pub accept_length_gauge: Option<f64>,
    /// Acceptance rate reported as a gauge (SGLang), mean over samples.
    pub accept_rate_gauge: Option<f64>,
}

/// Server-side latency histograms.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ServerLatency {
    /// Time to first token (from the server's arrival).
    pub ttft: HistogramStats,
    /// Inter-token latency.
    pub itl: HistogramStats,
    /// End to end.
    pub e2e: HistogramStats,
    /// Time in the server's queue.
    pub queue: HistogramStats,
}

/// A differenced histogram, milliseconds: the exact mean, and each percentile as the bucket
/// that holds it — never a value invented inside a bucket.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct HistogramStats {
    /// Observations.
    pub count: Option<f64>,
    /// Exact mean (`sum / count`).
    pub mean: Option<f64>,
    /// Median: the bucket holding it.
    pub p50: Option<QuantileBucket>,
    /// 90th percentile: the bucket holding it.
    pub p90: Option<QuantileBucket>,
    /// 99th percentile: the bucket holding it.
    pub p99: Option<QuantileBucket>,
}

/// Where a percentile lies, to the resolution of the server's buckets, milliseconds:
/// `above_ms < p ≤ at_most_ms` (`at_most_ms` null in the open `+Inf` bucket).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct QuantileBucket {
    /// The bucket's lower bound (0 for the first bucket).
    pub above_ms: f64,
    /// The bucket's upper bound; null when the percentile lies beyond the highest finite one.
    pub at_most_ms: Option<f64>,
}

impl std::fmt::Display for QuantileBucket {
    /// `≤ 300`, `300–500`, or `> 10000` (milliseconds, unit left to the caller).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let short = |v: f64| {
            if v >= 100.0 || v == v.trunc() {
                format!("{v:.0}")
            } else {
                format!("{v:.1}")
            }
        };
        match self.at_most_ms {
            None => write!(f, "> {}", short(self.above_ms)),
            Some(upper) if self.above_ms <= 0.0 => write!(f, "≤ {}", short(upper)),
            Some(upper) => write!(f, "{}–{}", short(self.above_ms), short(upper)),
        }
    }
}

/// Counter increases over the whole run.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ServerTotals {
    /// Prompt tokens.
    pub prompt_tokens: Option<f64>,
    /// Generated tokens.
    pub generation_tokens: Option<f64>,
    /// Requests finished.
    pub requests_finished: Option<f64>,
    /// Requests the server refused (the simulator's rejections).
    pub requests_rejected: Option<f64>,
    /// Preemptions.
    pub preemptions: Option<f64>,
}

/// The server's token counters against the client's.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TokenAgreement {
    /// Prompt tokens of the client's requests that received a first token.
    pub client_input_tokens: u64,
    /// The server's prompt-token counter increase.
    pub server_prompt_tokens: Option<f64>,
    /// server ÷ client.
    pub input_ratio: Option<f64>,
    /// Output tokens the client received (every request, warmup and failures included).
    pub client_output_tokens: u64,
    /// The server's generation-token counter increase.
    pub server_generation_tokens: Option<f64>,
    /// server ÷ client.
    pub output_ratio: Option<f64>,
}

/// One client window, server side.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ServerWindow {
    /// Window start, seconds since the run start.
    pub start_secs: f64,
    /// Mean running requests over the scrapes in the window.
    pub running: Option<f64>,
    /// Mean waiting requests.
    pub waiting: Option<f64>,
    /// Mean KV usage.
    pub kv_cache_usage: Option<f64>,
    /// Prompt tokens processed in the window.
    pub prompt_tokens: Option<f64>,
    /// Tokens generated in the window.
    pub generation_tokens: Option<f64>,
    /// Requests finished in the window.
    pub requests_finished: Option<f64>,
    /// Preemptions in the window (absent in reports written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemptions: Option<f64>,
}
