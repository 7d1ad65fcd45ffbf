//! Engine policies: how a serving engine admits, preempts and what it costs per step beyond the
//! kernels. vLLM, SGLang and TensorRT-LLM differ in admission (allocate on demand and preempt,
//! reserve part of the answer, reserve the whole answer) and in their runtime overheads.

use goodput_protocol::hardware::{GpuSpec, MemoryFraction};
use serde::{Deserialize, Serialize};

use super::ConfigError;

/// A scheduler's batch limits: most sequences and most tokens in one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    /// Most sequences in one step (vLLM `max_num_seqs`, SGLang `max_running_requests`,
    /// TensorRT-LLM `max_batch_size`).
    pub max_num_seqs: u32,
    /// Token budget of one step (vLLM `max_num_batched_tokens`, SGLang
    /// `chunked_prefill_size`, TensorRT-LLM `max_num_tokens`).
    pub max_num_batched_tokens: u32,
}

/// The serving engine whose scheduling the simulator mimics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EnginePolicy {
    /// vLLM V1: KV blocks allocated as sequences grow; when none is free the newest running
    /// sequence is preempted and recomputed later.
    #[default]
    Vllm,
    /// vLLM V0 (the engine of vLLM ≤ 0.7, and of most results published in 2024): admission
    /// and preemption as V1, but without chunked prefill (its server's default up to 32k
    /// tokens of context) a step that carries prompts carries nothing else, and its limits are
    /// 256 sequences and `max(max_model_len, 2048)` tokens (512 with chunked prefill).
    VllmV0,
    /// SGLang: admission reserves a share of every running answer's remaining tokens
    /// (`new_token_ratio`); retracts (recomputes) the newest when the cache still runs out.
    Sglang,
    /// TensorRT-LLM `GUARANTEED_NO_EVICT`: admission reserves the prompt and the whole
    /// `max_tokens` answer, so a started request is never evicted.
    TensorrtLlm,
    /// A bare decode loop with no server (gpt-fast): no scheduler or frontend costs.
    Bare,
}

impl EnginePolicy {
    /// Every policy, for help texts and parsing.
    pub const ALL: [(&'static str, EnginePolicy); 5] = [
        ("vllm", EnginePolicy::Vllm),
        ("vllm-v0", EnginePolicy::VllmV0),
        ("sglang", EnginePolicy::Sglang),
        ("tensorrt-llm", EnginePolicy::TensorrtLlm),
        ("bare", EnginePolicy::Bare),
    ];

    /// The policy named `name` (`trtllm` is accepted for `tensorrt-llm`).
    pub fn from_name(name: &str) -> Option<EnginePolicy> {
        let name = name.to_ascii_lowercase();
        if name == "trtllm" || name == "trt-llm" {
            return Some(EnginePolicy::TensorrtLlm);
        }
        Self::ALL
            .iter()
            .find(|(known, _)| *known == name)
            .map(|(_, policy)| *policy)
    }

    /// The policy's name.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, policy)| *policy == self)
            .map_or("vllm", |(name, _)| name)
    }

    /// Share of a request's `max_tokens` answer whose KV blocks admission reserves.
    pub fn reserved_output_fraction(self) -> f64 {
        match self {
            // vLLM allocates on demand; only the 1 % watermark guards admissions.
            EnginePolicy::Vllm | EnginePolicy::VllmV0 | EnginePolicy::Bare => 0.0,
            // SGLang's new_token_ratio starts at 0.7 and decays to 0.1; 0.3 is its typical
            // steady value under load (sglang/srt/managers/schedule_policy.py).
            EnginePolicy::Sglang => 0.3,
            // GUARANTEED_NO_EVICT reserves prompt + max_tokens (TensorRT-LLM capacity scheduler).
            EnginePolicy::TensorrtLlm => 1.0,
        }
    }

    /// Whether a step that carries prompts carries nothing else, the running decodes waiting
    /// for it: SGLang runs a prefill batch on its own ahead of decoding (`enable_mixed_chunk`
    /// is off by default, `sglang/srt/server_args.py`); vLLM V0 without chunked prefill
    /// schedules the running decodes only when no prompt was scheduled
    /// (`Scheduler._schedule_default`, `vllm/core/scheduler.py`). vLLM V1 (chunked prefill or
    /// not), V0 with chunked prefill and TensorRT-LLM's in-flight batching put prompts (or
    /// their chunks) and decodes in one step.
    pub fn runs_prompts_alone(self, chunked_prefill: bool) -> bool {
        match self {
            EnginePolicy::Sglang => true,
            EnginePolicy::VllmV0 => !chunked_prefill,
            EnginePolicy::Vllm | EnginePolicy::TensorrtLlm | EnginePolicy::Bare => false,
        }
    }

    /// The batch limits this engine picks when its server is started without them, on `gpu`
    /// with a KV pool of `kv_tokens` and a context of `context_len`:
    /// * vLLM V1 (`EngineArgs.get_batch_defaults`, OpenAI server): 1024 sequences and 8192
    ///   tokens on an accelerator of 70 GiB or more that is not an A100; 256 and 2048 otherwise.
    /// * SGLang (`ServerArgs`, `ModelRunner`): `chunked_prefill_size` 2048 below 35 GiB, 8192
    ///   below 160 GiB, 16384 above; `max_running_requests` = kv_tokens / context_len · 512,
    ///   held within 2048…4096 and at most kv_tokens / 2.
    /// * TensorRT-LLM (LLM API / `trtllm-serve` defaults): `max_batch_size` 2048,
    ///   `max_num_tokens` 8192.
    /// * vLLM V0 (`SchedulerConfig`, `EngineArgs` of vLLM 0.6): 256 sequences; `max(context,
    ///   2048)` tokens without chunked prefill, 512 with it.
    /// * A bare decode loop: 256 and 2048 (it batches what it is given).
    pub fn default_batch_limits(
        self,
        gpu: &GpuSpec,
        kv_tokens: u64,
        context_len: u32,
        chunked_prefill: bool,
    ) -> BatchLimits {
        let limits = |max_num_seqs, max_num_batched_tokens| BatchLimits {
            max_num_seqs,
            max_num_batched_tokens,
        };
        match self {
            EnginePolicy::Vllm => {
                let large =
                    gpu.memory_gib >= 70.0 && !gpu.name.to_ascii_lowercase().contains("a100");
                if large {
                    limits(1024, 8192)
                } else {
                    limits(256, 2048)
                }
            }
            EnginePolicy::Sglang => {
                let tokens = if gpu.memory_gib < 35.0 {
                    2048
                } else if gpu.memory_gib < 160.0 {
                    8192
                } else {
                    16384
                };
                let estimated = kv_tokens as f64 / f64::from(context_len.max(1)) * 512.0;
                let seqs = (estimated as u64)
                    .clamp(2048, 4096)
                    .min(kv_tokens / 2)
                    .max(1);
                limits(u32::try_from(seqs).unwrap_or(u32::MAX), tokens)
            }
            EnginePolicy::VllmV0 if chunked_prefill => limits(256, 512),
            EnginePolicy::VllmV0 => limits(256, context_len.max(2048)),
            EnginePolicy::TensorrtLlm => limits(2048, 8192),
            EnginePolicy::Bare => limits(256, 2048),
        }
    }

    /// What this engine's memory fraction is a fraction of: vLLM's (and a bare loop's) of the
    /// whole memory, SGLang's of the whole for weights and KV only, TensorRT-LLM's of what
    /// is free once the model is loaded.
    pub fn memory_fraction(self) -> MemoryFraction {
        match self {
            EnginePolicy::Vllm | EnginePolicy::VllmV0 | EnginePolicy::Bare => {
                MemoryFraction::OfTotal
            }
            EnginePolicy::Sglang => MemoryFraction::Static,
            EnginePolicy::TensorrtLlm => MemoryFraction::OfFree,
        }
    }

    /// The runtime overheads of this engine.
    pub fn overheads(self) -> StepOverheads {
        match self {
            // V0's own per-step costs are not published apart from V1's; both take V1's.
            EnginePolicy::Vllm | EnginePolicy::VllmV0 => StepOverheads {
                // vLLM V1 scheduling, input preparation, sampling and output processing: CI
                // batch-8 decode (8B, A100/H200) leaves ~2.2 ms beyond the weight reads.
                per_step_us: 1200.0,
                // CUDA-graph kernel boundaries, ~10 kernels a layer (BLIS fit to vLLM: 32 µs).
                per_layer_us: 32.0,
                // Python bookkeeping per request per step (BLIS fit: ~4 µs).
                per_sequence_us: 4.0,
                // Steps with prompt tokens run piecewise/eager, not as one CUDA graph.
                per_prefill_us: 1500.0,
                // HTTP parse, tokenisation, IPC to the engine core, detokenisation, SSE.
                frontend_us: 4000.0,
            },
            EnginePolicy::Sglang => StepOverheads {
                // The overlap scheduler prepares step n+1 while step n runs.
                per_step_us: 600.0,
                per_layer_us: 30.0,
                per_sequence_us: 3.0,
                per_prefill_us: 1000.0,
                frontend_us: 3000.0,
            },
            EnginePolicy::TensorrtLlm => StepOverheads {
                // C++ executor with CUDA graphs: ~0.4 ms a step.
                per_step_us: 400.0,
                // Fused QKV/RoPE/attention and GEMM+activation plugins: fewer kernels a layer.
                per_layer_us: 20.0,
                per_sequence_us: 1.0,
                per_prefill_us: 500.0,
                // trtllm-serve / NIM frontend: HTTP, tokenisation, detokenisation.
                frontend_us: 4000.0,
            },
            EnginePolicy::Bare => StepOverheads {
                // torch.compile with CUDA graphs: one graph replay and a sample a token.
                per_step_us: 100.0,
                per_layer_us: 10.0,
                per_sequence_us: 0.0,
                per_prefill_us: 0.0,
                frontend_us: 0.0,
            },
        }
    }
}

/// How a step's weight reads and its arithmetic combine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Roofline {
    /// The larger of the two: a GPU's GEMM kernels stream the weights while the tensor cores
    /// compute, so decode is bandwidth-bound until the batch reaches the ridge point.
    #[default]
    Max,
    /// Their sum: one pass over the weights plus the arithmetic of every token in the step
    /// (a CPU server such as llama.cpp, whose threads do not hide one behind the other).
    Sum,
}

/// Costs beyond the kernels' arithmetic and bytes (CPU scheduling, kernel launches, sampling,
/// the HTTP frontend).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StepOverheads {
    /// Added to every step, µs.
    pub per_step_us: f64,
    /// Added to every step per model layer, µs.
    pub per_layer_us: f64,
    /// Added to every step per sequence in the batch, µs.
    pub per_sequence_us: f64,
    /// Added to every step that carries prompt tokens, µs.
    pub per_prefill_us: f64,
    /// Delay between a request's arrival and the engine seeing it (HTTP, tokenisation, IPC),
    /// µs. It adds to TTFT without taking engine time.
    pub frontend_us: f64,
}

impl Default for StepOverheads {
    fn default() -> Self {
        EnginePolicy::Vllm.overheads()
    }
}

impl StepOverheads {
    /// No overhead at all: steps cost their kernels alone and requests reach the engine at once.
    pub const NONE: StepOverheads = StepOverheads {
        per_step_us: 0.0,
        per_layer_us: 0.0,
        per_sequence_us: 0.0,
        per_prefill_us: 0.0,
        frontend_us: 0.0,
    };

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let fields = [
            ("overheads.per_step_us", self.per_step_us),
            ("overheads.per_layer_us", self.per_layer_us),
            ("overheads.per_sequence_us", self.per_sequence_us),
            ("overheads.per_prefill_us", self.per_prefill_us),
            ("overheads.frontend_us", self.frontend_us),
        ];
        match fields.iter().find(|(_, v)| !(v.is_finite() && *v >= 0.0)) {
            Some((field, _)) => Err(ConfigError::invalid(field, "must be 0 or positive")),
            None => Ok(()),
        }
    }
}
