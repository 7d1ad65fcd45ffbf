//! Utilisation from a model and accelerator description (the same [`ModelSpec`] /
//! [`GpuSpec`] arithmetic the simulator's roofline uses) and a step's measured rates: KV bytes
//! per token, the KV capacity in tokens and in sequences of the measured length, achieved MFU,
//! achieved HBM bandwidth, and the bandwidth-bound TPOT floor.

use goodput_protocol::hardware::{
    ACTIVATION_RESERVE_GIB, Deployment, GpuSpec, MemoryFraction, ModelSpec, SpecError,
};
use serde::{Deserialize, Serialize};

use super::{Figure, input};
use crate::report::StepReport;
pub use crate::report::analysis::UtilisationReport;

/// A model served on a number of identical accelerators.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hardware {
    /// The model.
    pub model: ModelSpec,
    /// The accelerator.
    pub gpu: GpuSpec,
    /// Accelerators serving the target in total.
    pub accelerators: u32,
    /// Accelerators per replica (tensor parallel); `accelerators` must be a multiple.
    pub tensor_parallel: u32,
    /// Fraction of accelerator memory the server may use.
    pub gpu_memory_utilization: f64,
}

/// A hardware description that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum HardwareError {
    /// The model, accelerator or memory fraction is invalid, or the weights do not fit.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// The accelerators do not divide into replicas.
    #[error(
        "{accelerators} accelerators cannot be split into replicas of tensor-parallel {tensor_parallel}; \
         make --accelerators a multiple of --tp"
    )]
    Replicas {
        /// Accelerators in total.
        accelerators: u32,
        /// Per replica.
        tensor_parallel: u32,
    },
}

impl Hardware {
    /// One replica.
    pub fn deployment(&self) -> Deployment {
        Deployment {
            model: self.model.clone(),
            gpu: self.gpu.clone(),
            tensor_parallel: self.tensor_parallel,
            gpu_memory_utilization: self.gpu_memory_utilization,
            memory_fraction: MemoryFraction::OfTotal,
        }
    }

    /// Replicas: accelerators ÷ tensor parallel.
    pub fn replicas(&self) -> u32 {
        self.accelerators / self.tensor_parallel.max(1)
    }

    /// Checks the description, naming what to fix.
    pub fn validate(&self) -> Result<(), HardwareError> {
        if self.tensor_parallel == 0
            || self.accelerators == 0
            || !self.accelerators.is_multiple_of(self.tensor_parallel)
        {
            return Err(HardwareError::Replicas {
                accelerators: self.accelerators,
                tensor_parallel: self.tensor_parallel,
            });
        }
        self.deployment().validate()?;
        Ok(())
    }
}

/// Utilisation of `hardware` at the rates measured in `step`.
pub fn utilisation(hardware: &Hardware, step: &StepReport) -> UtilisationReport {
    let model = &hardware.model;
    let replicas = f64::from(hardware.replicas());
    let mean_input = step.tokens.input_per_request.mean;
    let mean_output = step.tokens.output_per_request.mean;
    let context = mean_input.zip(mean_output).map(|(i, o)| i + o / 2.0);
    let kv_capacity = kv_capacity(hardware);
    UtilisationReport {
        model: model.name.clone(),
        accelerator: hardware.gpu.name.clone(),
        accelerators: hardware.accelerators,
        tensor_parallel: hardware.tensor_parallel,
        replicas: hardware.replicas(),
        weight_bytes: Figure::new(
            "bytes",
            "params · bytes_per_param",
            &[
                ("params", Some(model.params())),
                ("bytes_per_param", Some(model.weight_dtype.bytes())),
            ],
            |i| input(i, "params") * input(i, "bytes_per_param"),
        ),
        kv_bytes_per_token: Figure::new(
            "bytes",
            "2 · layers · kv_heads · head_dim · bytes_per_element",
            &[
                ("layers", Some(f64::from(model.layers))),
                ("kv_heads", Some(f64::from(model.kv_heads))),
                ("head_dim", Some(f64::from(model.head_dim))),
                ("bytes_per_element", Some(model.kv_dtype.bytes())),
            ],
            |i| {
                2.0 * input(i, "layers")
                    * input(i, "kv_heads")
                    * input(i, "head_dim")
                    * input(i, "bytes_per_element")
            },
        ),
        max_sequences: Figure::new(
            "sequences",
            "kv_capacity_tokens / (mean_input_tokens + mean_output_tokens)",
            &[
                ("kv_capacity_tokens", kv_capacity.value),
                ("mean_input_tokens", mean_input),
                ("mean_output_tokens", mean_output),
            ],
            |i| {
                input(i, "kv_capacity_tokens")
                    / (input(i, "mean_input_tokens") + input(i, "mean_output_tokens"))
            },
        ),
        kv_capacity_tokens: kv_capacity,
        mfu: mfu(hardware, step),
        hbm_bandwidth_utilisation: bandwidth(hardware, step, context, replicas),
        tpot_floor_ms: tpot_floor(hardware, context),
    }
}

fn kv_capacity(hardware: &Hardware) -> Figure {
    let deployment = hardware.deployment();
    let non_tensor = deployment.non_tensor_gib();
    Figure::new(
        "tokens",
        "replicas · floor((memory_gib · gpu_memory_utilization · tp − (activation_reserve_gib + \
         non_tensor_gib) · tp) · 2^30 − weight_bytes) / kv_bytes_per_token)",
        &[
            ("replicas", Some(f64::from(hardware.replicas()))),
            ("memory_gib", Some(hardware.gpu.memory_gib)),
            (
                "gpu_memory_utilization",
                Some(hardware.gpu_memory_utilization),
            ),
            ("tp", Some(f64::from(hardware.tensor_parallel))),
            ("activation_reserve_gib", Some(ACTIVATION_RESERVE_GIB)),
            ("non_tensor_gib", Some(non_tensor)),
            ("weight_bytes", Some(hardware.model.weight_bytes())),
            (
                "kv_bytes_per_token",
                Some(hardware.model.kv_bytes_per_token()),
            ),
        ],
        |_| f64::from(hardware.replicas()) * deployment.kv_capacity_tokens() as f64,
    )
}

fn mfu(hardware: &Hardware, step: &StepReport) -> Figure {
    let t = &step.throughput;
    Figure::new(
        "fraction",
        "2 · params · (input_tokens_per_sec + output_tokens_per_sec) / (peak_flops · accelerators)",
        &[
            ("params", Some(hardware.model.params())),
            ("input_tokens_per_sec", Some(t.input_tokens_per_sec)),
            ("output_tokens_per_sec", Some(t.output_tokens_per_sec)),
            (
                "peak_flops",
                Some(hardware.gpu.peak_flops(hardware.model.weight_dtype)),
            ),
            ("accelerators", Some(f64::from(hardware.accelerators))),
        ],
        |i| {
            2.0 * input(i, "params")
                * (input(i, "input_tokens_per_sec") + input(i, "output_tokens_per_sec"))
                / (input(i, "peak_flops") * input(i, "accelerators"))
        },
    )
}

fn bandwidth(
    hardware: &Hardware,
    step: &StepReport,
    context: Option<f64>,
    replicas: f64,
) -> Figure {
    let tpot_secs = step.latency_ms.tpot.mean.map(|ms| ms / 1000.0);
    Figure::new(
        "fraction",
        "(replicas · streamed_weight_bytes / tpot_secs + output_tokens_per_sec · context_tokens · \
         kv_bytes_per_token) / (hbm_bytes_per_sec · accelerators)",
        &[
            ("replicas", Some(replicas)),
            (
                "streamed_weight_bytes",
                Some(hardware.model.streamed_weight_bytes()),
            ),
            ("tpot_secs", tpot_secs),
            (
                "output_tokens_per_sec",
                Some(step.throughput.output_tokens_per_sec),
            ),
            ("context_tokens", context),
            (
                "kv_bytes_per_token",
                Some(hardware.model.kv_bytes_per_token()),
            ),
            (
                "hbm_bytes_per_sec",
                Some(hardware.gpu.hbm_tb_per_sec * 1e12),
            ),
            ("accelerators", Some(f64::from(hardware.accelerators))),
        ],
        |i| {
            let weights =
                input(i, "replicas") * input(i, "streamed_weight_bytes") / input(i, "tpot_secs");
            let kv = input(i, "output_tokens_per_sec")
                * input(i, "context_tokens")
                * input(i, "kv_bytes_per_token");
            (weights + kv) / (input(i, "hbm_bytes_per_sec") * input(i, "accelerators"))
        },
    )
}

fn tpot_floor(hardware: &Hardware, context: Option<f64>) -> Figure {
    let gpu = &hardware.gpu;
    Figure::new(
        "ms",
        "1000 · (streamed_weight_bytes + kv_bytes_per_token · context_tokens) / (hbm_bytes_per_sec \
         · bandwidth_efficiency · tp)",
        &[
            (
                "streamed_weight_bytes",
                Some(hardware.model.streamed_weight_bytes()),
            ),
            (
                "kv_bytes_per_token",
                Some(hardware.model.kv_bytes_per_token()),
            ),
            ("context_tokens", context),
            ("hbm_bytes_per_sec", Some(gpu.hbm_tb_per_sec * 1e12)),
            ("bandwidth_efficiency", Some(gpu.bandwidth_efficiency)),
            ("tp", Some(f64::from(hardware.tensor_parallel))),
        ],
        |i| {
            1000.0
                * hardware
                    .deployment()
                    .decode_floor_secs(input(i, "context_tokens"))
        },
    )
}
