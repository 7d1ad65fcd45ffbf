//! Report sections about the workload: every metric per input-length bucket and per turn
//! index (multi-turn), and the realised statistics of what the workload asked for, so two
//! runs can be checked for the same load.

use serde::{Deserialize, Serialize};

use super::{
    CountStats, GoodputReport, LatencyFromSendReport, LatencyReport, RequestCounts, Throughput,
    TokenReport,
};

/// Every metric of a step, over a slice of its requests. Throughput counts the slice's work
/// over the *step's* measurement interval, so the slices' throughputs add up to the step's.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SliceMetrics {
    /// Request counts of the slice.
    pub requests: RequestCounts,
    /// Completed work of the slice per second of the step's interval.
    pub throughput: Throughput,
    /// Token totals and shape.
    pub tokens: TokenReport,
    /// Latencies from the scheduled send time.
    pub latency_ms: LatencyReport,
    /// Latencies from the actual send.
    pub latency_from_send_ms: LatencyFromSendReport,
    /// Goodput under the run's SLO.
    pub goodput: GoodputReport,
}

/// The requests whose prompt length falls in one bucket.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BucketReport {
    /// Bucket name (`short`, `medium`, `long`, or as configured).
    pub name: String,
    /// Shortest prompt in the bucket, tokens.
    pub min_input_tokens: u64,
    /// Longest prompt in the bucket, tokens (`null`: no upper end).
    pub max_input_tokens: Option<u64>,
    /// Its metrics.
    #[serde(flatten)]
    pub metrics: SliceMetrics,
}

/// The requests at one turn index of multi-turn sessions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnReport {
    /// Turn index (0 = a session's first request).
    pub turn: u32,
    /// Whether the row also holds every later turn (the last row, when sessions are long).
    pub and_later: bool,
    /// Its metrics.
    #[serde(flatten)]
    pub metrics: SliceMetrics,
}

/// The requests whose images fall in one resolution bucket (vision prompts).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageBucketReport {
    /// The bucket: the distinct sizes of the images a request carried, `WxH`, from the fewest
    /// pixels to the most, joined by `+` (`224x224`; `64x32+224x224` for a mix).
    pub resolution: String,
    /// Images carried by the bucket's measured requests (failed ones included).
    pub images: u64,
    /// Images of its completed requests per second of the step's interval: its
    /// `requests_per_sec` times the mean images per completed request.
    pub images_per_sec: f64,
    /// Its metrics.
    #[serde(flatten)]
    pub metrics: SliceMetrics,
}

/// The image-generation requests that asked for one size and step count (`--image-size`,
/// `--image-steps`): images/s is `throughput.items_per_sec`, the latency per image
/// `latency_ms.e2e_per_item`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenerationReport {
    /// The size asked for (`WxH`; `null`: the server's default).
    pub size: Option<String>,
    /// The denoising steps asked for (`null`: the server's default).
    pub steps: Option<u32>,
    /// Images its completed measured requests returned.
    pub images: u64,
    /// Its metrics.
    #[serde(flatten)]
    pub metrics: SliceMetrics,
}

/// The requests of one model of a model mix (`--model a=70%,b=30%`) or one adapter of an
/// adapter mix (`--lora`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabelReport {
    /// The model or adapter; the adapter row `base` holds the requests an adapter mix left to
    /// the base model.
    pub name: String,
    /// Its metrics (goodput under the run's SLO).
    #[serde(flatten)]
    pub metrics: SliceMetrics,
    /// A fleet's target: what the target's own `/metrics` counted over the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ReplicaServer>,
}

/// What one target of a fleet said on its own `/metrics` about the step: its counters'
/// increases from a scrape right before the step to one right after it (`None`: the target
/// does not expose that counter).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplicaServer {
    /// Where its metrics were read.
    pub metrics_url: String,
    /// Requests it finished.
    pub requests_finished: Option<f64>,
    /// Prompt tokens it processed.
    pub prompt_tokens: Option<f64>,
    /// Tokens it generated.
    pub generation_tokens: Option<f64>,
    /// Why a scrape gave nothing, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// The requests of one SLO class (`--class`), judged against the class's own thresholds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassReport {
    /// The class.
    pub name: String,
    /// Its SLO, in flag syntax (`null`: the class has none of its own and is judged against
    /// the run's).
    pub slo: Option<String>,
    /// Its metrics; `goodput` is under the class's SLO.
    #[serde(flatten)]
    pub metrics: SliceMetrics,
}

/// What the workload asked for, over the measured requests (failed ones included).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct WorkloadStats {
    /// Measured requests.
    pub requests: u64,
    /// Prompt lengths the workload built (its own count; the server's when it had none).
    pub input_tokens: CountStats,
    /// Answer lengths asked for (`max_tokens`).
    pub output_tokens: CountStats,
    /// Requests sent without `max_tokens` (the server decided the length).
    pub output_unlimited: u64,
    /// Sessions seen (multi-turn), else `null`.
    pub sessions: Option<u64>,
    /// Measured turns per session (multi-turn), else `null`.
    pub turns_per_session: Option<CountStats>,
}
