//! What a run sends, as the `Workload` flags describe it: synthetic prompts (length
//! distributions, shared prefixes, multi-turn and agentic sessions), a dataset or a trace to
//! replay, the tokenizer that counts and sizes prompts, and the report's length buckets. The
//! files are read and the workload built by `wiring::workload`.

use std::path::PathBuf;

use goodput_core::metrics::LengthBuckets;
use goodput_core::workload::dataset::DatasetFormat;
use goodput_core::workload::tokenize::TokenizeApi;
use goodput_core::workload::trace::TraceFormat;
use goodput_core::workload::{
    AgentTurns, LengthDistribution, ReplayOptions, SharedPrefix, ThinkTime,
};

/// The workload of a run.
#[derive(Debug, Clone)]
pub(crate) struct WorkloadOptions {
    /// Where the prompts come from.
    pub(crate) source: WorkloadSource,
    /// `--tokenizer`.
    pub(crate) tokenizer: Tokenizer,
    /// `--length-buckets`.
    pub(crate) buckets: LengthBuckets,
}

/// The tokenizer of `--tokenizer`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tokenizer {
    /// A local tokenizer: `cl100k_base`, `o200k_base` or a `tokenizer.json` path.
    Local(String),
    /// The target's own `/tokenize` (`server`, or `server:DIALECT`).
    Server {
        /// The flag's value, for messages.
        name: String,
        /// The dialect named (`None`: detected).
        api: Option<TokenizeApi>,
    },
}

/// Where the prompts come from.
#[derive(Debug, Clone)]
pub(crate) enum WorkloadSource {
    /// Generated prompts.
    Synthetic(Synthetic),
    /// `--dataset`.
    Dataset(Dataset),
    /// `--trace`.
    Trace(Trace),
}

/// Generated prompts of `--input-tokens`, asking for `--output-tokens`.
#[derive(Debug, Clone)]
pub(crate) struct Synthetic {
    /// Prompt length (with sessions: each user message's).
    pub(crate) input: LengthDistribution,
    /// Answer length.
    pub(crate) output: LengthDistribution,
    /// `--shared-prefix`.
    pub(crate) prefix: Option<SharedPrefix>,
    /// `--turns` and what goes with it.
    pub(crate) sessions: Option<Sessions>,
}

/// Synthetic multi-turn sessions.
#[derive(Debug, Clone)]
pub(crate) struct Sessions {
    /// `--turns`.
    pub(crate) turns: LengthDistribution,
    /// `--think-time` (default 0 s).
    pub(crate) think_time: ThinkTime,
    /// `--agent`.
    pub(crate) agent: Option<AgentTurns>,
}

/// The prompts of a local dataset file.
#[derive(Debug, Clone)]
pub(crate) struct Dataset {
    /// `--dataset`.
    pub(crate) path: PathBuf,
    /// `--dataset-format` (`None`: detected from the file).
    pub(crate) format: Option<DatasetFormat>,
    /// `--output-tokens`, for records that carry no length.
    pub(crate) output: LengthDistribution,
    /// `--think-time` (default 0 s), or the message refusing its value: it applies only when
    /// the dataset turns out to hold conversations, and a prompts dataset ignores it.
    pub(crate) think_time: Result<ThinkTime, String>,
    /// `--skip-invalid`.
    pub(crate) skip_invalid: bool,
}

/// A trace replayed at its own times.
#[derive(Debug, Clone)]
pub(crate) struct Trace {
    /// `--trace`.
    pub(crate) path: PathBuf,
    /// `--trace-format` (`None`: detected).
    pub(crate) format: Option<TraceFormat>,
    /// `--trace-time-scale`, `--trace-rate-scale`, `--trace-block-tokens`, checked.
    pub(crate) replay: ReplayOptions,
    /// `--skip-invalid`.
    pub(crate) skip_invalid: bool,
    /// The load flags that still apply to a replay.
    pub(crate) bounds: ReplayBounds,
}

/// What bounds a trace replay: the load mode is the trace's own arrivals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReplayBounds {
    /// `--max-concurrency`.
    pub(crate) max_concurrency: Option<u32>,
    /// `--requests` (at most the trace's).
    pub(crate) requests: Option<u64>,
    /// Whether `--duration` was given (else the replay sends the whole trace).
    pub(crate) duration_given: bool,
}
