//! The one concept table: what goodput wants to know about a server (running and waiting
//! requests, KV usage, token counters, preemptions, prefix cache, speculative decoding,
//! latency histograms, power, and a disaggregated deployment's prefill and decode queues and KV
//! transfers) and the metric each server family exposes it under — vLLM (and
//! the simulator, which uses vLLM's names), SGLang, TGI, llama.cpp (`llamacpp:`) and NVIDIA
//! DCGM for power. Sources are listed in order of preference; the first one a server exposes
//! is used.

use serde::{Deserialize, Serialize};

/// Server families whose metric names goodput knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Flavour {
    /// vLLM V1 (`vllm:` prefix).
    Vllm,
    /// SGLang (`sglang:` prefix).
    Sglang,
    /// Text Generation Inference (`tgi_` prefix).
    Tgi,
    /// llama.cpp server (`llamacpp:` prefix).
    LlamaCpp,
    /// goodput's simulator (vLLM names plus `goodput_sim:`).
    GoodputSim,
    /// NVIDIA DCGM exporter (`DCGM_FI_` prefix), for power.
    Dcgm,
}

impl Flavour {
    /// The name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Flavour::Vllm => "vllm",
            Flavour::Sglang => "sglang",
            Flavour::Tgi => "tgi",
            Flavour::LlamaCpp => "llamacpp",
            Flavour::GoodputSim => "goodput-sim",
            Flavour::Dcgm => "dcgm",
        }
    }

    /// The family a metric name belongs to, from its prefix.
    pub fn of(name: &str) -> Option<Flavour> {
        [
            ("vllm:", Flavour::Vllm),
            ("sglang:", Flavour::Sglang),
            ("tgi_", Flavour::Tgi),
            ("llamacpp:", Flavour::LlamaCpp),
            ("goodput_sim:", Flavour::GoodputSim),
            ("DCGM_FI_", Flavour::Dcgm),
        ]
        .into_iter()
        .find(|(prefix, _)| name.starts_with(prefix))
        .map(|(_, flavour)| flavour)
    }
}

/// How a metric behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A value that goes up and down; summarised by mean, p95 and max.
    Gauge,
    /// A monotonic total; differenced over a window (resets handled).
    Counter,
    /// A Prometheus histogram (`_bucket{le}`, `_sum`, `_count`), differenced like counters.
    Histogram,
}

/// How samples of one concept from several label sets (engines, GPUs, models) combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combine {
    /// Add them (request counts, tokens, watts).
    Sum,
    /// Average them (fractions such as KV usage).
    Mean,
}

/// Something goodput reads from a server's metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Concept {
    /// Requests in the running batch.
    Running,
    /// Requests waiting for admission.
    Waiting,
    /// KV cache in use, 0–1.
    KvCacheUsage,
    /// Prompt tokens processed.
    PromptTokens,
    /// Tokens generated.
    GenerationTokens,
    /// Requests finished (any reason).
    RequestsFinished,
    /// Preemptions (vLLM) or retractions (SGLang).
    Preemptions,
    /// Prompt tokens looked up in the prefix cache.
    PrefixCacheQueries,
    /// Prompt tokens found in the prefix cache.
    PrefixCacheHits,
    /// Speculative verification steps that carried drafts.
    SpecDrafts,
    /// Draft tokens proposed.
    SpecDraftTokens,
    /// Draft tokens accepted.
    SpecAcceptedTokens,
    /// Mean accepted length, as a gauge (SGLang).
    SpecAcceptLength,
    /// Acceptance rate, as a gauge (SGLang).
    SpecAcceptRate,
    /// Board power, watts.
    PowerWatts,
    /// Server-side time to first token, seconds.
    Ttft,
    /// Server-side inter-token latency, seconds.
    Itl,
    /// Server-side end-to-end latency, seconds.
    E2e,
    /// Time requests waited in the server's queue, seconds.
    QueueTime,
    /// Requests refused by the server (the simulator's 429s and rejections).
    RequestsRejected,
    /// Prompt tokens per finished request (a histogram of lengths).
    PromptLength,
    /// Generated tokens per finished request (a histogram of lengths).
    OutputLength,
    /// Disaggregated serving, a prefill instance: requests waiting for KV room on their
    /// decode instance (SGLang's prealloc queue).
    PrefillPreallocQueue,
    /// Disaggregated serving, a prefill instance: requests prefilled, their KV in transfer.
    PrefillInflightQueue,
    /// Disaggregated serving, a decode instance: requests waiting for KV room.
    DecodePreallocQueue,
    /// Disaggregated serving, a decode instance: requests waiting for their KV to arrive.
    DecodeTransferQueue,
    /// KV cache transfer time, seconds (vLLM's NIXL connector, per transfer).
    KvTransferTime,
    /// KV cache transfer latency, ms, as a gauge (SGLang).
    KvTransferLatencyGauge,
    /// KV cache transfers that failed.
    KvTransferFailures,
}

/// One metric name for a concept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source {
    /// The server family.
    pub flavour: Flavour,
    /// The exposed name (histograms: the base name without `_bucket`/`_sum`/`_count`).
    pub name: &'static str,
}

/// A [`Source`] literal (a macro, so the tables stay promotable to `'static`).
macro_rules! src {
    ($flavour:ident, $name:literal) => {
        Source {
            flavour: $flavour,
            name: $name,
        }
    };
}

use Flavour::{Dcgm, GoodputSim, LlamaCpp, Sglang, Tgi, Vllm};

impl Concept {
    /// Every concept.
    pub const ALL: [Concept; 29] = [
        Concept::Running,
        Concept::Waiting,
        Concept::KvCacheUsage,
        Concept::PromptTokens,
        Concept::GenerationTokens,
        Concept::RequestsFinished,
        Concept::Preemptions,
        Concept::PrefixCacheQueries,
        Concept::PrefixCacheHits,
        Concept::SpecDrafts,
        Concept::SpecDraftTokens,
        Concept::SpecAcceptedTokens,
        Concept::SpecAcceptLength,
        Concept::SpecAcceptRate,
        Concept::PowerWatts,
        Concept::Ttft,
        Concept::Itl,
        Concept::E2e,
        Concept::QueueTime,
        Concept::RequestsRejected,
        Concept::PromptLength,
        Concept::OutputLength,
        Concept::PrefillPreallocQueue,
        Concept::PrefillInflightQueue,
        Concept::DecodePreallocQueue,
        Concept::DecodeTransferQueue,
        Concept::KvTransferTime,
        Concept::KvTransferLatencyGauge,
        Concept::KvTransferFailures,
    ];

    /// Gauge, counter or histogram.
    pub fn kind(self) -> Kind {
        use Concept::*;
        match self {
            Running | Waiting | KvCacheUsage | SpecAcceptLength | SpecAcceptRate | PowerWatts
            | PrefillPreallocQueue | PrefillInflightQueue | DecodePreallocQueue
            | DecodeTransferQueue => Kind::Gauge,
            KvTransferLatencyGauge => Kind::Gauge,
            Ttft | Itl | E2e | QueueTime | PromptLength | OutputLength | KvTransferTime => {
                Kind::Histogram
            }
            _ => Kind::Counter,
        }
    }

    /// How several label sets combine.
    pub fn combine(self) -> Combine {
        match self {
            Concept::KvCacheUsage
            | Concept::SpecAcceptLength
            | Concept::SpecAcceptRate
            | Concept::KvTransferLatencyGauge => Combine::Mean,
            _ => Combine::Sum,
        }
    }

    /// The metric names of this concept, in order of preference.
    pub fn sources(self) -> &'static [Source] {
        TABLE
            .iter()
            .find(|(concept, _)| *concept == self)
            .map_or(&[], |(_, sources)| sources)
    }
}

/// The concept table: every concept's metric names, in order of preference.
static TABLE: &[(Concept, &[Source])] = &[
    (
        Concept::Running,
        &[
            src!(Vllm, "vllm:num_requests_running"),
            src!(Sglang, "sglang:num_running_reqs"),
            src!(Tgi, "tgi_batch_current_size"),
            src!(LlamaCpp, "llamacpp:requests_processing"),
        ],
    ),
    (
        Concept::Waiting,
        &[
            src!(Vllm, "vllm:num_requests_waiting"),
            src!(Sglang, "sglang:num_queue_reqs"),
            src!(Tgi, "tgi_queue_size"),
            src!(LlamaCpp, "llamacpp:requests_deferred"),
        ],
    ),
    (
        Concept::KvCacheUsage,
        &[
            src!(Vllm, "vllm:kv_cache_usage_perc"),
            src!(Vllm, "vllm:gpu_cache_usage_perc"),
            src!(Sglang, "sglang:token_usage"),
            src!(LlamaCpp, "llamacpp:kv_cache_usage_ratio"),
        ],
    ),
    (
        Concept::PromptTokens,
        &[
            src!(Vllm, "vllm:prompt_tokens_total"),
            src!(Sglang, "sglang:prompt_tokens_total"),
            src!(Tgi, "tgi_request_input_length_sum"),
            src!(LlamaCpp, "llamacpp:prompt_tokens_total"),
        ],
    ),
    (
        Concept::GenerationTokens,
        &[
            src!(Vllm, "vllm:generation_tokens_total"),
            src!(Sglang, "sglang:generation_tokens_total"),
            src!(Tgi, "tgi_request_generated_tokens_sum"),
            src!(LlamaCpp, "llamacpp:tokens_predicted_total"),
        ],
    ),
    (
        Concept::RequestsFinished,
        &[
            src!(Vllm, "vllm:request_success_total"),
            src!(Sglang, "sglang:num_requests_total"),
            src!(Tgi, "tgi_request_success"),
        ],
    ),
    (
        Concept::Preemptions,
        &[
            src!(Vllm, "vllm:num_preemptions_total"),
            src!(Sglang, "sglang:num_retracted_requests_total"),
        ],
    ),
    (
        Concept::PrefixCacheQueries,
        &[
            src!(Vllm, "vllm:prefix_cache_queries_total"),
            src!(Sglang, "sglang:prompt_tokens_total"),
        ],
    ),
    (
        Concept::PrefixCacheHits,
        &[
            src!(Vllm, "vllm:prefix_cache_hits_total"),
            src!(Sglang, "sglang:cached_tokens_total"),
            src!(LlamaCpp, "llamacpp:prompt_tokens_cached_total"),
        ],
    ),
    (
        Concept::SpecDrafts,
        &[
            src!(Vllm, "vllm:spec_decode_num_drafts_total"),
            src!(LlamaCpp, "llamacpp:spec_decode_num_drafts_total"),
        ],
    ),
    (
        Concept::SpecDraftTokens,
        &[
            src!(Vllm, "vllm:spec_decode_num_draft_tokens_total"),
            src!(LlamaCpp, "llamacpp:spec_decode_num_draft_tokens_total"),
        ],
    ),
    (
        Concept::SpecAcceptedTokens,
        &[
            src!(Vllm, "vllm:spec_decode_num_accepted_tokens_total"),
            src!(LlamaCpp, "llamacpp:spec_decode_num_accepted_tokens_total"),
        ],
    ),
    (
        Concept::SpecAcceptLength,
        &[src!(Sglang, "sglang:spec_accept_length")],
    ),
    (
        Concept::SpecAcceptRate,
        &[src!(Sglang, "sglang:spec_accept_rate")],
    ),
    (
        Concept::PowerWatts,
        &[src!(Dcgm, "DCGM_FI_DEV_POWER_USAGE")],
    ),
    (
        Concept::Ttft,
        &[
            src!(Vllm, "vllm:time_to_first_token_seconds"),
            src!(Sglang, "sglang:time_to_first_token_seconds"),
        ],
    ),
    (
        Concept::Itl,
        &[
            src!(Vllm, "vllm:inter_token_latency_seconds"),
            src!(Vllm, "vllm:time_per_output_token_seconds"),
            src!(Sglang, "sglang:inter_token_latency_seconds"),
            src!(Tgi, "tgi_request_mean_time_per_token_duration"),
        ],
    ),
    (
        Concept::E2e,
        &[
            src!(Vllm, "vllm:e2e_request_latency_seconds"),
            src!(Sglang, "sglang:e2e_request_latency_seconds"),
            src!(Tgi, "tgi_request_duration"),
        ],
    ),
    (
        Concept::QueueTime,
        &[
            src!(Vllm, "vllm:request_queue_time_seconds"),
            src!(Sglang, "sglang:queue_time_seconds"),
            src!(Tgi, "tgi_request_queue_duration"),
        ],
    ),
    (
        Concept::RequestsRejected,
        &[src!(GoodputSim, "goodput_sim:requests_rejected_total")],
    ),
    (
        Concept::PromptLength,
        &[
            src!(Vllm, "vllm:request_prompt_tokens"),
            src!(Tgi, "tgi_request_input_length"),
        ],
    ),
    (
        Concept::OutputLength,
        &[
            src!(Vllm, "vllm:request_generation_tokens"),
            src!(Tgi, "tgi_request_generated_tokens"),
        ],
    ),
    (
        Concept::PrefillPreallocQueue,
        &[src!(Sglang, "sglang:num_prefill_prealloc_queue_reqs")],
    ),
    (
        Concept::PrefillInflightQueue,
        &[src!(Sglang, "sglang:num_prefill_inflight_queue_reqs")],
    ),
    (
        Concept::DecodePreallocQueue,
        &[src!(Sglang, "sglang:num_decode_prealloc_queue_reqs")],
    ),
    (
        Concept::DecodeTransferQueue,
        &[src!(Sglang, "sglang:num_decode_transfer_queue_reqs")],
    ),
    (
        Concept::KvTransferTime,
        &[src!(Vllm, "vllm:nixl_xfer_time_seconds")],
    ),
    (
        Concept::KvTransferLatencyGauge,
        &[src!(Sglang, "sglang:kv_transfer_latency_ms")],
    ),
    (
        Concept::KvTransferFailures,
        &[
            src!(Vllm, "vllm:nixl_num_failed_transfers_total"),
            src!(Sglang, "sglang:num_transfer_failed_reqs_total"),
        ],
    ),
];

/// Which part of a histogram a sample is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// A gauge or counter value.
    Value,
    /// `_bucket{le=…}`: cumulative count up to `le`.
    Bucket,
    /// `_sum`.
    Sum,
    /// `_count`.
    Count,
}

/// Whether goodput reads a sample of this name (for some concept), and as what part.
pub fn is_known(name: &str) -> Option<Part> {
    Concept::ALL.iter().find_map(|concept| {
        concept.sources().iter().find_map(|source| {
            if concept.kind() != Kind::Histogram {
                return (source.name == name).then_some(Part::Value);
            }
            let suffix = name.strip_prefix(source.name)?;
            match suffix {
                "_bucket" => Some(Part::Bucket),
                "_sum" => Some(Part::Sum),
                "_count" => Some(Part::Count),
                _ => None,
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_belongs_to_the_family_its_prefix_says() {
        for concept in Concept::ALL {
            assert!(!concept.sources().is_empty(), "{concept:?}");
            for source in concept.sources() {
                assert_eq!(
                    Flavour::of(source.name),
                    Some(source.flavour),
                    "{}",
                    source.name
                );
            }
        }
    }

    #[test]
    fn histogram_parts_and_plain_names_are_recognised() {
        assert_eq!(is_known("vllm:num_requests_running"), Some(Part::Value));
        assert_eq!(
            is_known("vllm:time_to_first_token_seconds_bucket"),
            Some(Part::Bucket)
        );
        assert_eq!(is_known("tgi_request_duration_count"), Some(Part::Count));
        assert_eq!(is_known("tgi_request_input_length_sum"), Some(Part::Value));
        assert_eq!(is_known("process_cpu_seconds_total"), None);
    }
}
