//! Engine policies: how a serving engine admits, preempts and what it costs per step beyond the
//! kernels. vLLM, SGLang and TensorRT-LLM differ in admission (allocate on demand and preempt,
//! reserve part of the answer, reserve the whole answer) and in their runtime overheads.

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// The serving engine whose scheduling the simulator mimics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EnginePolicy {
    /// vLLM V1: KV blocks allocated as sequences grow; when none is free the newest running
    /// sequence is preempted and recomputed later.
    #[default]
    Vllm,
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
    pub const ALL: [(&'static str, EnginePolicy); 4] = [
        ("vllm", EnginePolicy::Vllm),
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
            EnginePolicy::Vllm | EnginePolicy::Bare => 0.0,
            // SGLang's new_token_ratio starts at 0.7 and decays to 0.1; 0.3 is its typical
            // steady value under load (sglang/srt/managers/schedule_policy.py).
            EnginePolicy::Sglang => 0.3,
            // GUARANTEED_NO_EVICT reserves prompt + max_tokens (TensorRT-LLM capacity scheduler).
            EnginePolicy::TensorrtLlm => 1.0,
        }
    }

    /// The runtime overheads of this engine.
    pub fn overheads(self) -> StepOverheads {
        match self {
            EnginePolicy::Vllm => StepOverheads {
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
