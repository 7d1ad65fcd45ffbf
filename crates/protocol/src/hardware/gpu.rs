//! Accelerator descriptions: datasheet peaks, the efficiency each operator class achieves on
//! them, and the built-in presets, each constant with its public source.

use serde::{Deserialize, Serialize};

use super::{DType, SpecError};

/// An accelerator (one GPU), described by its datasheet and the efficiencies its kernels
/// achieve. Efficiencies are fractions of the datasheet peak, one per operator class, so a
/// step costs each operator at the rate it really runs at (see `docs/simulator.md`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuSpec {
    /// Name, e.g. `H100`.
    pub name: String,
    /// Dense BF16 tensor throughput, TFLOP/s.
    pub bf16_tflops: f64,
    /// Dense FP8 tensor throughput, TFLOP/s (0 when unsupported).
    #[serde(default)]
    pub fp8_tflops: f64,
    /// Memory bandwidth, TB/s (10¹² bytes per second).
    pub hbm_tb_per_sec: f64,
    /// Memory, GiB.
    pub memory_gib: f64,
    /// Fraction of peak bandwidth achieved streaming weights through small-batch GEMMs.
    #[serde(default = "default_bandwidth_efficiency")]
    pub bandwidth_efficiency: f64,
    /// Fraction of peak bandwidth achieved by decode attention reading the KV cache.
    #[serde(default = "default_kv_read_efficiency")]
    pub kv_read_efficiency: f64,
    /// Fraction of the BF16 peak achieved by large BF16 weight GEMMs.
    #[serde(default = "default_gemm_efficiency")]
    pub gemm_efficiency_bf16: f64,
    /// Fraction of the FP8 peak achieved by large FP8 weight GEMMs (activation quantisation
    /// and scaling included).
    #[serde(default = "default_gemm_efficiency_fp8")]
    pub gemm_efficiency_fp8: f64,
    /// Share of the smaller of a layer GEMM's arithmetic and weight-read times that does not
    /// hide under the larger: the GEMMs take `max(compute, bytes) + loss · min(compute, bytes)`
    /// (0: perfect overlap, the plain roofline; 1: their sum). Largest at the ridge, where the
    /// two are equal: a step of a few hundred tokens.
    #[serde(default = "default_gemm_ridge_loss")]
    pub gemm_ridge_loss: f64,
    /// Fraction of the BF16 peak achieved by causal prefill attention (FlashAttention).
    #[serde(default = "default_attention_efficiency")]
    pub attention_efficiency: f64,
    /// GPU-to-GPU bandwidth per direction for tensor-parallel all-reduce, GB/s.
    pub interconnect_gb_per_sec: f64,
    /// Latency of one small all-reduce per doubling of the group (µs): an all-reduce over
    /// `tp` GPUs costs `all_reduce_us · log2(tp)` before its bytes move.
    #[serde(default = "default_all_reduce_us")]
    pub all_reduce_us: f64,
    /// Fraction of `interconnect_gb_per_sec` an all-reduce of a step's activations achieves
    /// as bus bandwidth (1 when unmeasured: the link rate).
    #[serde(
        default = "default_all_reduce_bus_efficiency",
        skip_serializing_if = "is_link_rate"
    )]
    pub all_reduce_bus_efficiency: f64,
}

fn default_bandwidth_efficiency() -> f64 {
    0.8
}
fn default_kv_read_efficiency() -> f64 {
    // FlashInfer / TensorRT-LLM XQA decode-attention benchmarks: ~80 % of peak bandwidth once
    // the batch holds a few thousand context tokens.
    0.8
}
fn default_gemm_efficiency() -> f64 {
    0.65
}
fn default_gemm_efficiency_fp8() -> f64 {
    0.5
}
fn default_gemm_ridge_loss() -> f64 {
    // Where nothing is profiled: the mean of the A100 and H100 fits below (0.43, 0.28).
    0.35
}
fn default_attention_efficiency() -> f64 {
    0.5
}
fn default_all_reduce_us() -> f64 {
    10.0
}
fn default_all_reduce_bus_efficiency() -> f64 {
    1.0
}
fn is_link_rate(efficiency: &f64) -> bool {
    *efficiency == default_all_reduce_bus_efficiency()
}

/// Datasheet figures of one accelerator (arguments of [`GpuSpec::datasheet`]).
struct Datasheet {
    bf16: f64,
    fp8: f64,
    hbm: f64,
    mem: f64,
    link: f64,
}

impl GpuSpec {
    /// Names of the built-in accelerator presets.
    pub const PRESETS: [&'static str; 6] = ["a100-80g", "h100", "h200", "l40s", "b200", "mi300x"];

    fn datasheet(name: &str, sheet: Datasheet) -> GpuSpec {
        GpuSpec {
            name: name.to_string(),
            bf16_tflops: sheet.bf16,
            fp8_tflops: sheet.fp8,
            hbm_tb_per_sec: sheet.hbm,
            memory_gib: sheet.mem,
            bandwidth_efficiency: default_bandwidth_efficiency(),
            kv_read_efficiency: default_kv_read_efficiency(),
            gemm_efficiency_bf16: default_gemm_efficiency(),
            gemm_efficiency_fp8: default_gemm_efficiency_fp8(),
            gemm_ridge_loss: default_gemm_ridge_loss(),
            attention_efficiency: default_attention_efficiency(),
            interconnect_gb_per_sec: sheet.link,
            all_reduce_us: default_all_reduce_us(),
            all_reduce_bus_efficiency: default_all_reduce_bus_efficiency(),
        }
    }

    /// A built-in accelerator preset by name (see [`GpuSpec::PRESETS`]).
    pub fn preset(name: &str) -> Option<GpuSpec> {
        match name.to_ascii_lowercase().as_str() {
            "a100-80g" | "a100" => Some(Self::a100()),
            "h100" => Some(Self::h100()),
            "h200" => Some(Self::h200()),
            "l40s" => Some(Self::l40s()),
            "b200" => Some(Self::b200()),
            "mi300x" => Some(Self::mi300x()),
            _ => None,
        }
    }

    fn a100() -> GpuSpec {
        // NVIDIA A100 datasheet (SXM4 80GB): 312 TF dense BF16, no FP8, 2.039 TB/s HBM2e,
        // NVLink 3 600 GB/s bidirectional (300 per direction).
        let sheet = Datasheet {
            bf16: 312.0,
            fp8: 0.0,
            hbm: 2.039,
            mem: 80.0,
            link: 300.0,
        };
        GpuSpec {
            // cuBLAS BF16 GEMMs of Llama shapes reach ~220 TF (public A100 prefill MFU 0.6–0.67).
            gemm_efficiency_bf16: 0.70,
            // Vidur's one-GPU BF16 layer GEMM profiles (a100 mlp.csv, Llama 2/3 7B–70B) where
            // arithmetic and weight reads are within 4× of each other: 0.43 of the smaller
            // does not overlap (max() alone is 1.21× fast there on average).
            gemm_ridge_loss: 0.43,
            // FlashAttention-2 paper: causal forward, head dim 128, ~190 TF on A100.
            attention_efficiency: 0.60,
            // gpt-fast batch-1 decode and vLLM batch-8 decode: ~1.6 TB/s streamed.
            bandwidth_efficiency: 0.78,
            // NVLink 3 small all-reduce: gpt-fast TP2/4/8 imply ~13/20/25 µs per all-reduce.
            all_reduce_us: 9.0,
            // Vidur's NCCL profiles (a100_dgx all_reduce.csv), 67 MB over 2/4/8 GPUs: bus
            // bandwidth 156/167/174 GB/s of the 300 GB/s link.
            all_reduce_bus_efficiency: 0.55,
            ..Self::datasheet("A100-80G", sheet)
        }
    }

    fn h100() -> GpuSpec {
        // NVIDIA H100 SXM datasheet: 989.5 TF dense BF16, 1979 FP8, 3.35 TB/s HBM3,
        // NVLink 4 900 GB/s bidirectional (450 per direction).
        let sheet = Datasheet {
            bf16: 989.5,
            fp8: 1979.0,
            hbm: 3.35,
            mem: 80.0,
            link: 450.0,
        };
        GpuSpec {
            // cuBLAS BF16 GEMMs of 4k–8k-wide layers: ~620 TF on H100 SXM (public GEMM sweeps).
            gemm_efficiency_bf16: 0.62,
            // FP8 GEMMs with per-tensor scaling: ~1000 TF, half the datasheet (TRT-LLM FP8 prefill).
            gemm_efficiency_fp8: 0.50,
            // Vidur's one-GPU BF16 layer GEMM profiles (h100 mlp.csv, Llama 2 7B and 70B) where
            // arithmetic and weight reads are within 4× of each other: 0.28 of the smaller
            // does not overlap (max() alone is 1.14× fast there on average).
            gemm_ridge_loss: 0.28,
            // FlashAttention-3 paper: causal BF16 forward, head dim 128, ~500–600 TF.
            attention_efficiency: 0.55,
            // Weight-streaming GEMV at batch 1–8: ~2.7 TB/s of 3.35 (vLLM / TRT-LLM small-batch ITL).
            bandwidth_efficiency: 0.80,
            // NVLink 4 + NVSwitch one-shot all-reduce: ~9 µs per doubling (NCCL/vLLM custom AR).
            all_reduce_us: 9.0,
            // Vidur's NCCL profiles (h100_dgx all_reduce.csv), 67 MB over 2/4/8 GPUs: bus
            // bandwidth 274/317/365 GB/s of the 450 GB/s link.
            all_reduce_bus_efficiency: 0.70,
            ..Self::datasheet("H100", sheet)
        }
    }

    fn h200() -> GpuSpec {
        // NVIDIA H200 SXM datasheet: H100 compute, 4.8 TB/s HBM3e, 141 GB (140 GiB usable).
        let sheet = Datasheet {
            bf16: 989.5,
            fp8: 1979.0,
            hbm: 4.8,
            mem: 140.0,
            link: 450.0,
        };
        GpuSpec {
            name: "H200".to_string(),
            hbm_tb_per_sec: sheet.hbm,
            memory_gib: sheet.mem,
            // vLLM CI batch-8 decode on H200 implies ~3.7 TB/s of 4.8 streamed.
            bandwidth_efficiency: 0.78,
            ..Self::h100()
        }
    }

    fn l40s() -> GpuSpec {
        // NVIDIA L40S datasheet: 362 TF dense BF16, 733 TF dense FP8, 864 GB/s GDDR6, 48 GB,
        // no NVLink: PCIe Gen4 x16 (32 GB/s per direction).
        let sheet = Datasheet {
            bf16: 362.05,
            fp8: 733.0,
            hbm: 0.864,
            mem: 45.0,
            link: 32.0,
        };
        GpuSpec {
            // 350 W cap throttles clocks under sustained tensor load: ~0.5 of boost-clock peak.
            gemm_efficiency_bf16: 0.50,
            gemm_efficiency_fp8: 0.45,
            // FlashAttention-2 on Ada: ~0.4 of peak.
            attention_efficiency: 0.40,
            // GDDR6 streams well: ~0.85 of 864 GB/s in GEMV microbenchmarks.
            bandwidth_efficiency: 0.85,
            // PCIe all-reduce through host: ~30 µs per doubling.
            all_reduce_us: 30.0,
            ..Self::datasheet("L40S", sheet)
        }
    }

    fn b200() -> GpuSpec {
        // NVIDIA DGX B200 datasheet ÷ 8: 2.25 PF dense BF16, 4.5 PF dense FP8, 8 TB/s HBM3e,
        // 180 GB (179 GiB usable), NVLink 5 1.8 TB/s bidirectional (900 per direction).
        let sheet = Datasheet {
            bf16: 2250.0,
            fp8: 4500.0,
            hbm: 8.0,
            mem: 179.0,
            link: 900.0,
        };
        GpuSpec {
            // Early public B200 GEMM and FlashAttention-4 figures: ~0.6 of BF16 peak.
            gemm_efficiency_bf16: 0.60,
            gemm_efficiency_fp8: 0.50,
            attention_efficiency: 0.50,
            // HBM3e streaming like H200: ~0.78 of peak.
            bandwidth_efficiency: 0.78,
            // NVLink 5 + NVSwitch: like NVLink 4 per hop.
            all_reduce_us: 9.0,
            ..Self::datasheet("B200", sheet)
        }
    }

    fn mi300x() -> GpuSpec {
        // AMD Instinct MI300X datasheet: 1307 TF dense BF16, 2615 TF dense FP8, 5.3 TB/s HBM3,
        // 192 GB, Infinity Fabric 7 × 64 GB/s per direction to peers (448).
        let sheet = Datasheet {
            bf16: 1307.4,
            fp8: 2614.9,
            hbm: 5.3,
            mem: 192.0,
            link: 448.0,
        };
        GpuSpec {
            // Public hipBLASLt sweeps (SemiAnalysis, Chips and Cheese): ~600 TF BF16, ~1000 TF FP8.
            gemm_efficiency_bf16: 0.46,
            gemm_efficiency_fp8: 0.38,
            // CK FlashAttention forward: ~0.35 of BF16 peak.
            attention_efficiency: 0.35,
            // Achievable HBM3 stream ~4.0–4.3 TB/s of 5.3; GEMV ~0.7.
            bandwidth_efficiency: 0.70,
            // ROCm paged-attention decode kernels: ~0.65 of peak bandwidth.
            kv_read_efficiency: 0.65,
            // RCCL small all-reduce over xGMI: ~20 µs per doubling.
            all_reduce_us: 20.0,
            ..Self::datasheet("MI300X", sheet)
        }
    }

    /// Peak FLOP/s for weights of `dtype` (FP8 rate when the weights are 8-bit and supported).
    pub fn peak_flops(&self, dtype: DType) -> f64 {
        let tflops = if Self::runs_fp8(self, dtype) {
            self.fp8_tflops
        } else {
            self.bf16_tflops
        };
        tflops * 1e12
    }

    fn runs_fp8(&self, dtype: DType) -> bool {
        dtype.bytes() <= 1.0 && self.fp8_tflops > 0.0
    }

    /// FLOP/s weight GEMMs achieve with weights of `dtype`: the precision's peak times its
    /// GEMM efficiency.
    pub fn gemm_flops(&self, dtype: DType) -> f64 {
        let efficiency = if self.runs_fp8(dtype) {
            self.gemm_efficiency_fp8
        } else {
            self.gemm_efficiency_bf16
        };
        self.peak_flops(dtype) * efficiency
    }

    /// FLOP/s causal prefill attention achieves (BF16 tensor cores).
    pub fn attention_flops(&self) -> f64 {
        self.bf16_tflops * 1e12 * self.attention_efficiency
    }

    /// Achievable bandwidth streaming weights, bytes per second.
    pub fn effective_bandwidth(&self) -> f64 {
        self.hbm_tb_per_sec * 1e12 * self.bandwidth_efficiency
    }

    /// Achievable bandwidth reading the KV cache in decode attention, bytes per second.
    pub fn kv_read_bandwidth(&self) -> f64 {
        self.hbm_tb_per_sec * 1e12 * self.kv_read_efficiency
    }

    /// Checks that every figure is positive and every efficiency is in (0, 1].
    pub fn validate(&self) -> Result<(), SpecError> {
        let positive = [
            ("bf16_tflops", self.bf16_tflops),
            ("hbm_tb_per_sec", self.hbm_tb_per_sec),
            ("memory_gib", self.memory_gib),
            ("interconnect_gb_per_sec", self.interconnect_gb_per_sec),
        ];
        if let Some((field, _)) = positive.iter().find(|(_, v)| !(v.is_finite() && *v > 0.0)) {
            return Err(SpecError::new(
                &self.name,
                field,
                "must be a positive number",
            ));
        }
        let fractions = [
            ("bandwidth_efficiency", self.bandwidth_efficiency),
            ("kv_read_efficiency", self.kv_read_efficiency),
            ("gemm_efficiency_bf16", self.gemm_efficiency_bf16),
            ("gemm_efficiency_fp8", self.gemm_efficiency_fp8),
            ("attention_efficiency", self.attention_efficiency),
            ("all_reduce_bus_efficiency", self.all_reduce_bus_efficiency),
        ];
        if let Some((field, _)) = fractions.iter().find(|(_, v)| !(*v > 0.0 && *v <= 1.0)) {
            return Err(SpecError::new(&self.name, field, "must be in (0, 1]"));
        }
        let non_negative = [
            ("fp8_tflops", self.fp8_tflops),
            ("all_reduce_us", self.all_reduce_us),
        ];
        if let Some((field, _)) = non_negative
            .iter()
            .find(|(_, v)| !(v.is_finite() && *v >= 0.0))
        {
            return Err(SpecError::new(&self.name, field, "must be 0 or positive"));
        }
        if !(0.0..=1.0).contains(&self.gemm_ridge_loss) {
            return Err(SpecError::new(
                &self.name,
                "gemm_ridge_loss",
                "must be in [0, 1] (0: the GEMMs' arithmetic and weight reads overlap fully; 1: they add up)",
            ));
        }
        Ok(())
    }
}
