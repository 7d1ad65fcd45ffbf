//! Model and accelerator descriptions, their presets, and the figures derived from them:
//! parameter count, weight bytes, KV bytes per token, KV capacity, FLOPs per token and the
//! bandwidth-bound decode floor. The simulator's roofline and the client's utilisation report
//! both use these, so the two always agree on the arithmetic.

mod gpu;

pub use gpu::GpuSpec;
use serde::{Deserialize, Serialize};

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Numeric format of weights or KV cache entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// 32-bit float.
    Fp32,
    /// 16-bit brain float.
    Bf16,
    /// 16-bit float.
    Fp16,
    /// 8-bit float.
    Fp8,
    /// 8-bit integer.
    Int8,
    /// 4-bit integer (weights only).
    Int4,
}

impl std::str::FromStr for DType {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.to_ascii_lowercase().as_str() {
            "fp32" | "f32" => Ok(DType::Fp32),
            "bf16" => Ok(DType::Bf16),
            "fp16" | "f16" => Ok(DType::Fp16),
            "fp8" | "f8" => Ok(DType::Fp8),
            "int8" | "i8" => Ok(DType::Int8),
            "int4" | "i4" => Ok(DType::Int4),
            other => Err(format!(
                "unknown precision `{other}`; one of fp32, bf16, fp16, fp8, int8, int4"
            )),
        }
    }
}

impl DType {
    /// Bytes per element.
    pub fn bytes(self) -> f64 {
        match self {
            DType::Fp32 => 4.0,
            DType::Bf16 | DType::Fp16 => 2.0,
            DType::Fp8 | DType::Int8 => 1.0,
            DType::Int4 => 0.5,
        }
    }
}

/// A dense decoder-only transformer, described by its config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// Name served at `/v1/models`.
    pub name: String,
    /// Transformer layers.
    pub layers: u32,
    /// Hidden size `d`.
    pub hidden: u32,
    /// Attention (query) heads.
    pub heads: u32,
    /// Key/value heads (grouped-query attention).
    pub kv_heads: u32,
    /// Dimension of one head.
    pub head_dim: u32,
    /// MLP intermediate size (SwiGLU: three matrices of `hidden × ffn`).
    pub ffn: u32,
    /// Vocabulary size.
    pub vocab: u32,
    /// Whether the output head shares the input embedding matrix.
    #[serde(default)]
    pub tied_embeddings: bool,
    /// Maximum context length in tokens.
    pub max_context: u32,
    /// Weight format.
    #[serde(default = "default_dtype")]
    pub weight_dtype: DType,
    /// KV cache format.
    #[serde(default = "default_dtype")]
    pub kv_dtype: DType,
}

fn default_dtype() -> DType {
    DType::Bf16
}

impl ModelSpec {
    /// Names of the built-in model presets.
    pub const PRESETS: [&'static str; 6] = [
        "llama-3.1-8b",
        "llama-3.1-70b",
        "qwen2.5-7b",
        "llama-3.2-1b",
        "llama-2-7b",
        "llama-2-70b",
    ];

    /// A built-in model preset by name (see [`ModelSpec::PRESETS`]).
    pub fn preset(name: &str) -> Option<ModelSpec> {
        let spec = |name: &str, layers, hidden, heads, kv_heads, ffn, vocab, tied, ctx| ModelSpec {
            name: name.to_string(),
            layers,
            hidden,
            heads,
            kv_heads,
            head_dim: 128,
            ffn,
            vocab,
            tied_embeddings: tied,
            max_context: ctx,
            weight_dtype: DType::Bf16,
            kv_dtype: DType::Bf16,
        };
        match name {
            // Hugging Face config.json of each model (layers, hidden, heads, kv heads, ffn, vocab).
            "llama-3.1-8b" | "llama-3-8b" => {
                Some(spec(name, 32, 4096, 32, 8, 14336, 128_256, false, 131_072))
            }
            "llama-3.1-70b" | "llama-3-70b" | "llama-3.3-70b" => {
                Some(spec(name, 80, 8192, 64, 8, 28672, 128_256, false, 131_072))
            }
            "llama-2-7b" => Some(spec(name, 32, 4096, 32, 32, 11008, 32_000, false, 4096)),
            "llama-2-70b" => Some(spec(name, 80, 8192, 64, 8, 28672, 32_000, false, 4096)),
            "qwen2.5-7b" => Some(spec(name, 28, 3584, 28, 4, 18944, 152_064, false, 32_768)),
            "llama-3.2-1b" => Some(ModelSpec {
                head_dim: 64,
                ..spec(name, 16, 2048, 32, 8, 8192, 128_256, true, 131_072)
            }),
            _ => None,
        }
    }

    /// Parameters of one layer: attention projections, SwiGLU MLP and two norms.
    fn layer_params(&self) -> f64 {
        let d = f64::from(self.hidden);
        let q = d * f64::from(self.heads) * f64::from(self.head_dim);
        let kv = 2.0 * d * f64::from(self.kv_heads) * f64::from(self.head_dim);
        let o = f64::from(self.heads) * f64::from(self.head_dim) * d;
        let mlp = 3.0 * d * f64::from(self.ffn);
        q + kv + o + mlp + 2.0 * d
    }

    fn embedding_params(&self) -> f64 {
        f64::from(self.vocab) * f64::from(self.hidden)
    }

    /// Total parameter count: layers, input embedding, output head (unless tied), final norm.
    pub fn params(&self) -> f64 {
        let head = if self.tied_embeddings {
            0.0
        } else {
            self.embedding_params()
        };
        f64::from(self.layers) * self.layer_params()
            + self.embedding_params()
            + head
            + f64::from(self.hidden)
    }

    /// Parameters that take part in a matrix multiply for every token: all layers plus the
    /// output head. The input embedding is a row gather, not a matmul.
    pub fn matmul_params(&self) -> f64 {
        f64::from(self.layers) * self.layer_params() + self.embedding_params()
    }

    /// Bytes of all weights.
    pub fn weight_bytes(&self) -> f64 {
        self.params() * self.weight_dtype.bytes()
    }

    /// Weight bytes streamed from memory on every forward step: everything but the input
    /// embedding table, whose rows are gathered rather than read in full.
    pub fn streamed_weight_bytes(&self) -> f64 {
        let gathered = if self.tied_embeddings {
            0.0
        } else {
            self.embedding_params()
        };
        (self.params() - gathered) * self.weight_dtype.bytes()
    }

    /// KV cache bytes per token: `2 (K and V) · layers · kv_heads · head_dim · bytes`.
    pub fn kv_bytes_per_token(&self) -> f64 {
        2.0 * f64::from(self.layers)
            * f64::from(self.kv_heads)
            * f64::from(self.head_dim)
            * self.kv_dtype.bytes()
    }

    /// Linear-layer FLOPs for `tokens` new tokens: `2 · matmul_params · tokens`.
    pub fn linear_flops(&self, tokens: f64) -> f64 {
        2.0 * self.matmul_params() * tokens
    }

    /// FLOPs of the transformer layers' weight GEMMs for `tokens` tokens:
    /// `2 · layers · layer_params · tokens` (no output head).
    pub fn layer_linear_flops(&self, tokens: f64) -> f64 {
        2.0 * f64::from(self.layers) * self.layer_params() * tokens
    }

    /// Bytes of the transformer layers' weights (no embeddings, no output head).
    pub fn layer_weight_bytes(&self) -> f64 {
        f64::from(self.layers) * self.layer_params() * self.weight_dtype.bytes()
    }

    /// FLOPs of the output head (logits) for `tokens` sampled positions: `2 · vocab · hidden`.
    pub fn logits_flops(&self, tokens: f64) -> f64 {
        2.0 * self.embedding_params() * tokens
    }

    /// Bytes of the output-head matrix streamed when computing logits.
    pub fn logits_weight_bytes(&self) -> f64 {
        self.embedding_params() * self.weight_dtype.bytes()
    }

    /// Attention FLOPs (QKᵀ and AV) for `new` tokens appended after `context` cached tokens:
    /// `4 · layers · heads · head_dim · new · (context + (new − 1) / 2)`.
    pub fn attention_flops(&self, new: f64, context: f64) -> f64 {
        if new <= 0.0 {
            return 0.0;
        }
        4.0 * f64::from(self.layers)
            * f64::from(self.heads)
            * f64::from(self.head_dim)
            * new
            * (context + (new - 1.0) / 2.0)
    }

    /// Bytes of activations written per token and layer boundary (`layers · hidden · 2`).
    pub fn activation_bytes_per_token(&self) -> f64 {
        f64::from(self.layers) * f64::from(self.hidden) * 2.0
    }

    /// Checks that every dimension is positive and consistent.
    pub fn validate(&self) -> Result<(), SpecError> {
        let dims = [
            ("layers", self.layers),
            ("hidden", self.hidden),
            ("heads", self.heads),
            ("kv_heads", self.kv_heads),
            ("head_dim", self.head_dim),
            ("ffn", self.ffn),
            ("vocab", self.vocab),
            ("max_context", self.max_context),
        ];
        if let Some((field, _)) = dims.iter().find(|(_, value)| *value == 0) {
            return Err(SpecError::new(&self.name, field, "must be greater than 0"));
        }
        if !self.heads.is_multiple_of(self.kv_heads) {
            return Err(SpecError::new(&self.name, "kv_heads", "must divide heads"));
        }
        Ok(())
    }
}

/// A model served on `tensor_parallel` accelerators, and how much of their memory it may use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Deployment {
    /// The model.
    pub model: ModelSpec,
    /// The accelerator (all the same).
    pub gpu: GpuSpec,
    /// Tensor-parallel degree (number of accelerators serving one replica).
    pub tensor_parallel: u32,
    /// Fraction of accelerator memory the server may use (vLLM `gpu_memory_utilization`,
    /// SGLang `mem_fraction_static`, TensorRT-LLM `free_gpu_memory_fraction`: what it is a
    /// fraction of is [`Deployment::memory_fraction`]).
    pub gpu_memory_utilization: f64,
    /// What `gpu_memory_utilization` is a fraction of, as the engine reads its own knob.
    #[serde(default, skip_serializing_if = "MemoryFraction::is_of_total")]
    pub memory_fraction: MemoryFraction,
}

/// How an engine's memory fraction sizes its KV cache — the three serving engines read the
/// same-looking knob three ways.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MemoryFraction {
    /// vLLM `gpu_memory_utilization`: a share of each accelerator's whole memory for all the
    /// engine holds; the KV cache gets what the weights, the activations (profiled peak) and
    /// the non-tensor allocations leave of it.
    #[default]
    OfTotal,
    /// SGLang `mem_fraction_static`: a share of the whole memory for the weights and the KV
    /// pool only (`rest_memory = available − total · (1 − fraction)` in its model runner);
    /// activations and CUDA graphs live in the remaining share.
    Static,
    /// TensorRT-LLM `free_gpu_memory_fraction`: a share of the memory still free once the
    /// weights, the activation buffers and the runtime are loaded ("90 % of free GPU memory
    /// for KV cache" at its default 0.9).
    OfFree,
}

impl MemoryFraction {
    /// Whether this is vLLM's reading (the default, left out of serialised deployments).
    pub fn is_of_total(&self) -> bool {
        *self == MemoryFraction::OfTotal
    }
}

/// Memory reserved per accelerator for activations (dense models), GiB.
pub const ACTIVATION_RESERVE_GIB: f64 = 5.5;
/// Memory taken per accelerator by the CUDA context and other non-tensor allocations, GiB.
pub const NON_TENSOR_GIB_SINGLE: f64 = 0.15;
/// Same, when tensor parallel (NCCL buffers), GiB per accelerator.
pub const NON_TENSOR_GIB_PARALLEL: f64 = 0.6;

impl Deployment {
    /// Bytes available to the KV cache over all accelerators of the replica, by
    /// [`MemoryFraction`] (`u` the utilisation, `M` memory · tp, `W` the weights, `A` and `N`
    /// the activation reserve and the non-tensor memory · tp):
    /// of total `u·M − W − A − N`; static `u·M − W − N`; of free `u·(M − W − A − N)`.
    /// Negative when the weights do not fit.
    pub fn kv_pool_bytes(&self) -> f64 {
        let tp = f64::from(self.tensor_parallel.max(1));
        let memory = self.gpu.memory_gib * tp * GIB;
        let weights = self.model.weight_bytes();
        let activations = ACTIVATION_RESERVE_GIB * tp * GIB;
        let non_tensor = self.non_tensor_gib() * tp * GIB;
        let share = self.gpu_memory_utilization;
        match self.memory_fraction {
            MemoryFraction::OfTotal => memory * share - weights - activations - non_tensor,
            MemoryFraction::Static => memory * share - weights - non_tensor,
            MemoryFraction::OfFree => (memory - weights - activations - non_tensor) * share,
        }
    }

    /// Memory each accelerator gives the CUDA context (and NCCL's buffers when split), GiB.
    pub fn non_tensor_gib(&self) -> f64 {
        if self.tensor_parallel > 1 {
            NON_TENSOR_GIB_PARALLEL
        } else {
            NON_TENSOR_GIB_SINGLE
        }
    }

    /// Tokens the KV cache holds (0 when the weights do not fit).
    pub fn kv_capacity_tokens(&self) -> u64 {
        let tokens = self.kv_pool_bytes() / self.model.kv_bytes_per_token();
        if tokens.is_finite() && tokens > 0.0 {
            tokens as u64
        } else {
            0
        }
    }

    /// Bandwidth-bound floor of one decode step at batch 1 (weights streamed once, KV of
    /// `context` tokens read), seconds; no compute, no overheads.
    pub fn decode_floor_secs(&self, context: f64) -> f64 {
        let bytes = self.model.streamed_weight_bytes() + self.model.kv_bytes_per_token() * context;
        bytes / (self.gpu.effective_bandwidth() * f64::from(self.tensor_parallel.max(1)))
    }

    /// Checks the model, the accelerator and the memory fraction, and that the weights fit.
    pub fn validate(&self) -> Result<(), SpecError> {
        self.model.validate()?;
        self.gpu.validate()?;
        if self.tensor_parallel == 0 {
            return Err(SpecError::new(
                "deployment",
                "tensor_parallel",
                "must be at least 1",
            ));
        }
        if !(self.gpu_memory_utilization > 0.0 && self.gpu_memory_utilization <= 1.0) {
            return Err(SpecError::new(
                "deployment",
                "gpu_memory_utilization",
                "must be in (0, 1]",
            ));
        }
        if self.kv_capacity_tokens() == 0 {
            let message = format!(
                "{:.1} GiB of weights leave no room for a KV cache on {} × {} ({} GiB each); \
                 raise tensor_parallel or use a larger accelerator",
                self.model.weight_bytes() / GIB,
                self.tensor_parallel,
                self.gpu.name,
                self.gpu.memory_gib
            );
            return Err(SpecError::new(&self.model.name, "weights", &message));
        }
        Ok(())
    }
}

/// A model, accelerator or deployment description that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{subject}: `{field}` {message}")]
pub struct SpecError {
    /// What was being checked (model or accelerator name).
    pub subject: String,
    /// The offending field.
    pub field: String,
    /// What is wrong and how to fix it.
    pub message: String,
}

impl SpecError {
    pub(crate) fn new(subject: &str, field: &str, message: &str) -> Self {
        SpecError {
            subject: subject.to_string(),
            field: field.to_string(),
            message: message.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn llama8b_h100() -> Deployment {
        Deployment {
            model: ModelSpec::preset("llama-3.1-8b").unwrap(),
            gpu: GpuSpec::preset("h100").unwrap(),
            tensor_parallel: 1,
            gpu_memory_utilization: 0.9,
            memory_fraction: MemoryFraction::OfTotal,
        }
    }

    #[test]
    fn llama_8b_figures_match_the_published_config() {
        let model = ModelSpec::preset("llama-3.1-8b").unwrap();
        // 8.03 B parameters, 16.06 GB of BF16 weights, 128 KiB of KV per token.
        assert!(
            (model.params() / 1e9 - 8.030).abs() < 0.005,
            "{}",
            model.params()
        );
        assert!((model.weight_bytes() / 1e9 - 16.06).abs() < 0.01);
        assert_eq!(model.kv_bytes_per_token(), 131_072.0);
    }

    #[test]
    fn llama_70b_has_70_6_billion_parameters() {
        let model = ModelSpec::preset("llama-3.1-70b").unwrap();
        assert!(
            (model.params() / 1e9 - 70.55).abs() < 0.05,
            "{}",
            model.params()
        );
        assert_eq!(model.kv_bytes_per_token(), 327_680.0);
    }

    #[test]
    fn kv_capacity_of_8b_on_h100_is_about_421k_tokens() {
        let tokens = llama8b_h100().kv_capacity_tokens();
        assert!((415_000..=425_000).contains(&tokens), "{tokens}");
    }

    #[test]
    fn each_engine_reads_its_memory_fraction_its_own_way() {
        // 70B in FP8 on one 80 GiB H100 at 0.95: 70.55 G parameters are 65.70 GiB of weights.
        let mut model = ModelSpec::preset("llama-3.1-70b").unwrap();
        model.weight_dtype = DType::Fp8;
        let weights = model.weight_bytes() / GIB;
        let pool = |memory_fraction| {
            Deployment {
                model: model.clone(),
                gpu: GpuSpec::preset("h100").unwrap(),
                tensor_parallel: 1,
                gpu_memory_utilization: 0.95,
                memory_fraction,
            }
            .kv_pool_bytes()
                / GIB
        };
        // vLLM: 0.95 of 80 for everything, less weights, 5.5 activations and 0.15 non-tensor.
        let of_total = 76.0 - weights - 5.65;
        assert!((pool(MemoryFraction::OfTotal) - of_total).abs() < 1e-9);
        // SGLang: the fraction holds weights and KV only.
        let fixed = 76.0 - weights - 0.15;
        assert!((pool(MemoryFraction::Static) - fixed).abs() < 1e-9);
        // TensorRT-LLM: 0.95 of what the loaded model leaves free.
        let of_free = 0.95 * (80.0 - weights - 5.65);
        assert!((pool(MemoryFraction::OfFree) - of_free).abs() < 1e-9);
        assert!((4.6..4.7).contains(&of_total) && (8.2..8.3).contains(&of_free));
    }

    #[test]
    fn a_deployment_without_a_memory_reading_is_read_as_vllm_reads_it() {
        let json = serde_json::to_value(llama8b_h100()).unwrap();
        assert!(json.get("memory_fraction").is_none(), "{json}");
        let back: Deployment = serde_json::from_value(json).unwrap();
        assert_eq!(back.memory_fraction, MemoryFraction::OfTotal);
        let mut sglang = llama8b_h100();
        sglang.memory_fraction = MemoryFraction::Static;
        let json = serde_json::to_value(&sglang).unwrap();
        assert_eq!(json["memory_fraction"], "static");
    }

    #[test]
    fn batch1_decode_floor_is_weights_over_bandwidth() {
        let deployment = llama8b_h100();
        let floor = deployment.decode_floor_secs(0.0);
        let expected = deployment.model.streamed_weight_bytes() / (3.35e12 * 0.8);
        assert!((floor - expected).abs() < 1e-12);
        assert!((0.004..0.006).contains(&floor), "{floor}");
    }

    #[test]
    fn weights_that_do_not_fit_are_reported_with_a_fix() {
        let mut deployment = llama8b_h100();
        deployment.model = ModelSpec::preset("llama-3.1-70b").unwrap();
        let error = deployment.validate().unwrap_err();
        assert!(error.message.contains("raise tensor_parallel"), "{error}");
        deployment.tensor_parallel = 4;
        deployment.validate().unwrap();
    }

    #[test]
    fn fp8_weights_use_the_fp8_peak_and_its_own_gemm_efficiency() {
        let h100 = GpuSpec::preset("h100").unwrap();
        assert_eq!(h100.peak_flops(DType::Fp8), 1979e12);
        assert_eq!(
            h100.gemm_flops(DType::Fp8),
            1979e12 * h100.gemm_efficiency_fp8
        );
        assert_eq!(
            h100.gemm_flops(DType::Bf16),
            989.5e12 * h100.gemm_efficiency_bf16
        );
        // No FP8 tensor cores: FP8 weights run at the BF16 rate.
        let a100 = GpuSpec::preset("a100").unwrap();
        assert_eq!(a100.gemm_flops(DType::Fp8), a100.gemm_flops(DType::Bf16));
        assert_eq!("FP8".parse::<DType>(), Ok(DType::Fp8));
        assert!("fp7".parse::<DType>().is_err());
    }

    #[test]
    fn every_preset_is_valid() {
        for name in ModelSpec::PRESETS {
            ModelSpec::preset(name).unwrap().validate().unwrap();
        }
        for name in GpuSpec::PRESETS {
            GpuSpec::preset(name).unwrap().validate().unwrap();
        }
    }

    #[test]
    fn a_ridge_loss_outside_zero_to_one_is_refused_by_name() {
        let mut gpu = GpuSpec::preset("h100").unwrap();
        for (loss, ok) in [
            (0.0, true),
            (1.0, true),
            (-0.1, false),
            (1.5, false),
            (f64::NAN, false),
        ] {
            gpu.gemm_ridge_loss = loss;
            match gpu.validate() {
                Ok(()) => assert!(ok, "{loss} accepted"),
                Err(error) => {
                    assert!(!ok, "{loss} refused");
                    assert!(error.to_string().contains("gemm_ridge_loss"), "{error}");
                }
            }
        }
        // A configured accelerator without the key takes the unprofiled default.
        let parsed: GpuSpec = serde_json::from_value(serde_json::json!({
            "name": "custom", "bf16_tflops": 100.0, "fp8_tflops": 0.0, "hbm_tb_per_sec": 1.0,
            "memory_gib": 40.0, "interconnect_gb_per_sec": 50.0
        }))
        .unwrap();
        assert_eq!(parsed.gemm_ridge_loss, 0.35);
    }
}
