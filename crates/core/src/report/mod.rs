//! The report: one serde structure that is the only input of every exporter (terminal table,
//! `report.json`, later HTML/CSV/Markdown). Versioned by [`SCHEMA_VERSION`]; the committed JSON
//! Schema (`schema/report.v1.schema.json`) is checked against real output in tests. Numbers
//! carry their unit in their name (`*_ms`, `*_secs`, `*_per_sec`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use stability::Stability;
use windows::WindowReport;

pub mod analysis;
pub mod audio;
pub mod capacity;
pub mod channels;
pub mod client;
pub mod distributions;
pub mod phases;
pub mod repeats;
pub mod run;
pub mod server;
pub mod shards;
pub mod stability;
pub mod sweep;
pub mod tune;
pub mod windows;
mod workload;

pub use workload::{
    BucketReport, ClassReport, GenerationReport, ImageBucketReport, LabelReport, ReplicaServer,
    SliceMetrics, TurnReport, WorkloadStats,
};

/// Version of the report layout; bumped on any breaking change.
pub const SCHEMA_VERSION: u32 = 1;

/// A whole run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Layout version ([`SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// The tool that wrote the report.
    pub tool: ToolInfo,
    /// What was run, against what.
    pub run: RunInfo,
    /// One entry per load level; a plain run has one.
    pub steps: Vec<StepReport>,
    /// Problems with the run itself that undermine its numbers, each with the fix.
    pub warnings: Vec<Warning>,
    /// The sweep summary (load levels and knee), for `goodput sweep`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<sweep::SweepReport>,
    /// The capacity verdict, for `goodput capacity`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<capacity::CapacityReport>,
    /// The client's own overhead and whether it was the bottleneck (absent in reports written
    /// before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<client::ClientReport>,
    /// The shards of a sharded run merged by `goodput merge`: each one's end, lateness, clock
    /// offset, client overhead and losses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shards: Option<shards::ShardsReport>,
    /// Each headline figure across the runs of `goodput run --repeats N` (the runs are the
    /// steps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeats: Option<repeats::RepeatsReport>,
    /// `goodput tune`: each server configuration's figures under the SLO, the Pareto front
    /// and the best configuration (each configuration's own report is in its directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tune: Option<tune::TuneReport>,
}

fn one() -> f64 {
    1.0
}

fn items() -> String {
    "items".into()
}

impl Report {
    /// A report of `steps`, without sweep or capacity sections.
    pub fn new(
        tool: ToolInfo,
        run: RunInfo,
        steps: Vec<StepReport>,
        warnings: Vec<Warning>,
    ) -> Self {
        Report {
            schema_version: SCHEMA_VERSION,
            tool,
            run,
            steps,
            warnings,
            sweep: None,
            capacity: None,
            client: None,
            shards: None,
            repeats: None,
            tune: None,
        }
    }
}

/// The tool that wrote a report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolInfo {
    /// Always `goodput`.
    pub name: String,
    /// Crate version.
    pub version: String,
    /// Git commit the binary was built from, when known.
    pub git_sha: Option<String>,
}

/// What was run, against what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    /// Start time, RFC 3339 UTC.
    pub started_at: String,
    /// The command line (credentials redacted).
    pub command_line: Vec<String>,
    /// Seed of every random choice.
    pub seed: u64,
    /// Target URL (credentials redacted), or `embedded-simulator`.
    pub target: String,
    /// `chat`, `completions`, `responses`, `embeddings` or `rerank` (`virtual` for virtual-time
    /// capacity).
    pub api: String,
    /// Model name sent.
    pub model: String,
    /// Whether responses were streamed.
    pub stream: bool,
    /// Workload description.
    pub workload: BTreeMap<String, serde_json::Value>,
    /// The SLO applied, in flag syntax.
    pub slo: Option<String>,
    /// Width of the time-series windows, seconds.
    pub window_secs: f64,
    /// How many times faster than real time the target's clock ran; every figure is in the
    /// target's time.
    #[serde(default = "one")]
    pub time_scale: f64,
    /// What one item of `throughput.items_per_sec` is: `inputs` (embeddings), `documents`
    /// (rerank), `prompts` (completions), `items` otherwise.
    #[serde(default = "items")]
    pub item_unit: String,
    /// Why the run ended: `completed`, `interrupted`, `no_progress`.
    pub end_reason: String,
    /// User tags (`--tag key=value`).
    pub tags: BTreeMap<String, String>,
    /// The machine goodput ran on (CPU, cores, memory, OS).
    #[serde(default)]
    pub client_host: Option<run::HostInfo>,
    /// What the target says about itself (`/v1/models`, identifying response headers).
    #[serde(default)]
    pub server_info: Option<run::ServerInfo>,
    /// SLO classes (`--class`): each class's share of the requests and its own SLO (absent
    /// without classes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<run::ClassInfo>,
}

/// Load level of a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadReport {
    /// `closed` (fixed concurrency) or `open` (fixed arrival rate).
    pub mode: String,
    /// Concurrency, closed loop.
    pub concurrency: Option<u32>,
    /// Target arrival rate, open loop.
    pub rate_per_sec: Option<f64>,
    /// `poisson`, `constant` or `gamma`, open loop.
    pub arrival: Option<String>,
    /// Gamma shape, when `arrival` is `gamma`.
    pub burstiness: Option<f64>,
    /// Client-side concurrency cap in open loop.
    pub max_concurrency: Option<u32>,
    /// Rate phases of a phase profile, in order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<Vec<phases::RatePhase>>,
}

/// Request counts of a step (measured requests; warmup counted apart).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RequestCounts {
    /// Scheduled in the measurement.
    pub scheduled: u64,
    /// Actually sent.
    pub sent: u64,
    /// Completed successfully.
    pub completed: u64,
    /// Failed, any kind (cancelled included).
    pub failed: u64,
    /// Failures by kind (`http`, `timeout`, `transport`, `protocol`, `stream_error`,
    /// `cancelled`, `invalid`, `error`).
    pub failed_by_kind: BTreeMap<String, u64>,
    /// HTTP failures by status code.
    pub failed_by_status: BTreeMap<String, u64>,
    /// Warmup requests (excluded from every metric).
    pub warmup: u64,
    /// Re-sends of requests that provably never reached the server.
    pub retries: u64,
    /// Why requests failed: per failure kind, the message of the failed measured request with
    /// the lowest index (so it does not depend on completion order).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failure_examples: BTreeMap<String, String>,
}

/// Throughput of a step: completed work per second of the measurement window.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Throughput {
    /// Realised arrival rate of the schedule (offered load; not throughput).
    pub offered_requests_per_sec: Option<f64>,
    /// Completed requests per second.
    pub requests_per_sec: f64,
    /// Prompt tokens of completed requests per second.
    pub input_tokens_per_sec: f64,
    /// Generated tokens of completed requests per second.
    pub output_tokens_per_sec: f64,
    /// Input plus output tokens per second.
    pub total_tokens_per_sec: f64,
    /// Completed items (choices; prompts of batched requests) per second.
    pub items_per_sec: f64,
}

/// How the work inside the throughput interval was counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThroughputMethod {
    /// Each completed request by the fraction of its life (scheduled send to end) inside the
    /// interval: unbiased whatever the phase of synchronized waves.
    #[default]
    LifeFraction,
    /// Requests that completed inside the interval (unstable runs, whose backlog at the end is
    /// not work done, and runs whose every request was sent before the first completed).
    Completions,
}

/// The throughput interval (`steps[].interval`): where every per-second figure was measured,
/// and what was left out on either side.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct IntervalReport {
    /// How the work inside the interval was counted.
    pub method: ThroughputMethod,
    /// First measured scheduled send, seconds since the run start.
    pub first_arrival_secs: f64,
    /// Last measured scheduled send (the interval's end in every ordinary run).
    pub last_arrival_secs: f64,
    /// Start-up left out: first measured scheduled send to the first completion, seconds.
    pub startup_secs: f64,
    /// Drain left out: the interval's end to the last measured end, seconds.
    pub drain_secs: f64,
    /// Requests that completed after the interval's end (the drain).
    pub completed_after: u64,
    /// Last end of a measured request, seconds since the run start: how long the step took.
    pub last_end_secs: f64,
}

/// Summary statistics of one latency, milliseconds. All `None` when nothing was measured.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LatencyStats {
    /// Exact mean.
    pub mean: Option<f64>,
    /// Exact minimum.
    #[serde(default)]
    pub min: Option<f64>,
    /// Median.
    pub p50: Option<f64>,
    /// 90th percentile.
    pub p90: Option<f64>,
    /// 95th percentile.
    pub p95: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
    /// 99.9th percentile.
    pub p999: Option<f64>,
    /// Exact maximum.
    pub max: Option<f64>,
    /// Samples.
    pub count: u64,
}

/// Latencies measured from the scheduled send time (the default view).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LatencyReport {
    /// Time to first token.
    pub ttft: LatencyStats,
    /// Time per output token after the first (one sample per request).
    pub tpot: LatencyStats,
    /// Inter-token latency (one sample per token).
    pub itl: LatencyStats,
    /// End to end (to the last generated token).
    pub e2e: LatencyStats,
    /// End to end divided by the request's items (one sample per request): the latency each
    /// input of a batch costs (embeddings, rerank, batched prompts).
    #[serde(default)]
    pub e2e_per_item: LatencyStats,
    /// Sent − scheduled (client queueing included).
    pub dispatch_lag: LatencyStats,
    /// Time waiting for the client-side concurrency cap (`--max-concurrency`).
    pub client_queue_wait: LatencyStats,
}

/// Latencies measured from the actual send (what tools without coordinated-omission
/// correction report).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LatencyFromSendReport {
    /// Time to first token from the send.
    pub ttft: LatencyStats,
    /// End to end from the send.
    pub e2e: LatencyStats,
}

/// Token totals and per-request shape of a step.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TokenReport {
    /// Prompt tokens of completed requests.
    pub input_total: u64,
    /// Generated tokens of completed requests.
    pub output_total: u64,
    /// Prompt tokens per completed request.
    pub input_per_request: CountStats,
    /// Generated tokens per completed request.
    pub output_per_request: CountStats,
    /// Completed requests whose output count came from the server's `usage`.
    pub output_from_usage: u64,
    /// Completed requests whose output count came from goodput's tokenizer.
    pub output_from_tokenizer: u64,
    /// Completed requests whose output length differs from `max_tokens` asked with ignore_eos.
    pub output_length_mismatches: u64,
    /// Completed requests where usage and goodput's tokenizer differ by more than 10 %.
    pub usage_tokenizer_disagreements: u64,
}

/// Summary of a count per request.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CountStats {
    /// Exact mean.
    pub mean: Option<f64>,
    /// Median.
    pub p50: Option<u64>,
    /// 99th percentile.
    pub p99: Option<u64>,
    /// Exact minimum.
    pub min: Option<u64>,
    /// Exact maximum.
    pub max: Option<u64>,
}

/// Goodput of a step under the run's SLO. Values are `None` when no SLO was given.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct GoodputReport {
    /// The SLO, in flag syntax.
    pub slo: Option<String>,
    /// Measured requests meeting every per-request threshold ÷ measured requests (failures
    /// count as misses).
    pub attained_fraction: Option<f64>,
    /// Compliant requests per second.
    pub requests_per_sec: Option<f64>,
    /// Output tokens of compliant requests per second.
    pub output_tokens_per_sec: Option<f64>,
    /// Compliant requests.
    pub compliant: Option<u64>,
    /// Run-level percentile objectives with their measured values.
    pub objectives: Vec<ObjectiveResult>,
    /// Whether every objective passed (`None` without objectives).
    pub objectives_passed: Option<bool>,
}

/// One percentile objective's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ObjectiveResult {
    /// e.g. `ttft_p99`.
    pub name: String,
    /// Threshold, ms.
    pub max_ms: f64,
    /// Measured value, ms, counting failed requests as infinitely late (`None` = infinite).
    pub measured_ms: Option<f64>,
    /// Whether it held.
    pub pass: bool,
}

/// One load level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepReport {
    /// Load level.
    pub load: LoadReport,
    /// Throughput interval length, seconds: end of start-up (first completion, when later
    /// than the first measured scheduled send) to the last measured scheduled send.
    pub duration_secs: f64,
    /// Throughput interval start, seconds since the run start.
    pub window_start_secs: f64,
    /// How the throughput interval was chosen and counted, with start-up and drain apart.
    #[serde(default)]
    pub interval: IntervalReport,
    /// Request counts.
    pub requests: RequestCounts,
    /// Completed work per second.
    pub throughput: Throughput,
    /// Token totals and shape.
    pub tokens: TokenReport,
    /// Latencies from the scheduled send time.
    pub latency_ms: LatencyReport,
    /// Latencies from the actual send.
    pub latency_from_send_ms: LatencyFromSendReport,
    /// Goodput under the SLO.
    pub goodput: GoodputReport,
    /// Queue stability verdict.
    pub stability: Stability,
    /// Time series.
    pub windows: Vec<WindowReport>,
    /// Recovery after the overload phase of a phase profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<windows::RecoveryReport>,
    /// Quantile points of the latency distributions (for CDFs and comparisons), ms.
    #[serde(default)]
    pub distributions_ms: distributions::Distributions,
    /// What the server's own metrics said (null when they were not scraped).
    #[serde(default)]
    pub server: Option<server::ServerReport>,
    /// Utilisation of the described hardware (null without a model and accelerator).
    #[serde(default)]
    pub utilisation: Option<analysis::UtilisationReport>,
    /// Speculative decoding (null when nothing shows it).
    #[serde(default)]
    pub speculative_decoding: Option<analysis::SpeculativeReport>,
    /// Cost and energy (null without a price or a power figure).
    #[serde(default)]
    pub cost: Option<analysis::CostReport>,
    /// Every metric per input-length bucket.
    #[serde(default)]
    pub buckets: Vec<BucketReport>,
    /// Every metric per turn index (multi-turn sessions; empty otherwise).
    #[serde(default)]
    pub turns: Vec<TurnReport>,
    /// Every metric per image-resolution bucket (vision prompts; absent without images).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_buckets: Vec<ImageBucketReport>,
    /// Every metric per image-generation size and step count (`--image-size`, `--image-steps`;
    /// absent without them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_settings: Vec<GenerationReport>,
    /// Every metric per model of a model mix (absent without one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<LabelReport>,
    /// Every metric per adapter of an adapter mix, the base model's requests last (absent
    /// without one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adapters: Vec<LabelReport>,
    /// Every metric per SLO class, goodput under each class's own SLO (absent without
    /// classes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClassReport>,
    /// Every metric per target of a fleet (`--target` repeated; absent with one target).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<LabelReport>,
    /// Every metric per replica, as the response header `--replica-header` names it (absent
    /// without one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<LabelReport>,
    /// What the workload asked for: realised prompt and answer lengths.
    #[serde(default)]
    pub workload_stats: WorkloadStats,
    /// Reasoning vs answer tokens and time to first answer token (null when no completed
    /// request showed reasoning).
    #[serde(default)]
    pub reasoning: Option<channels::ReasoningReport>,
    /// Tool calls (null when no completed request made one).
    #[serde(default)]
    pub tool_calls: Option<channels::ToolCallReport>,
    /// Multi-turn and agentic sessions (null without sessions).
    #[serde(default)]
    pub sessions: Option<channels::SessionReport>,
    /// Prompt tokens the workload expected to be reusable beside those the server reported
    /// cached (null when neither is known).
    #[serde(default)]
    pub prefix_reuse: Option<channels::PrefixReuseReport>,
    /// Audio sent and produced, real-time factor (null without audio APIs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio: Option<audio::AudioReport>,
}

/// A problem with the run itself, with its fix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    /// Stable identifier, e.g. `few_samples`.
    pub code: String,
    /// What is wrong.
    pub message: String,
    /// What to do about it.
    pub fix: String,
    /// Index in `steps` of the step it is about, in a multi-step run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<usize>,
}

impl Warning {
    /// A warning about the whole run.
    pub fn new(code: &str, message: String, fix: &str) -> Self {
        Warning {
            code: code.to_string(),
            message,
            fix: fix.to_string(),
            step: None,
        }
    }

    /// The same warning, about step `index` of a multi-step run (named in its message).
    pub fn about_step(mut self, index: usize) -> Self {
        self.message = format!("step {}: {}", index + 1, self.message);
        self.step = Some(index);
        self
    }
}
