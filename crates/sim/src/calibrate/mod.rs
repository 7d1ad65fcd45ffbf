//! Calibration: the constants of the one batching engine fitted to measurements of a real
//! server, so the simulator predicts that server. [`Facts`] are what the server says about
//! itself (slots, context, model width); [`Constants`] are the fitted rates and overheads;
//! [`calibrated_config`] turns both into an ordinary [`SimConfig`] that every virtual-time
//! command accepts; [`predict`] replays one probe shape in virtual time; [`fit`](fit::fit)
//! finds the constants whose predictions match the measured probes.

pub mod fit;
mod linalg;
mod predict;

pub use fit::{ConstantFit, Fit, FitError, MeasuredProbe, POOR_RMS, Residual, fit};
pub use predict::{Predicted, ProbeShape, Tail, predict};

use goodput_protocol::hardware::{DType, GpuSpec, ModelSpec};
use serde::{Deserialize, Serialize};

use crate::config::{
    BatchingConfig, EngineConfig, EnginePolicy, Roofline, SimConfig, StepOverheads,
};

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// What a server says about itself (llama.cpp `/props`, `/slots`, `/v1/models` metadata);
/// every field has a default for servers that say nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Facts {
    /// Name the server serves the model under.
    pub model_name: String,
    /// Sequences the server batches (llama.cpp slots, vLLM `max_num_seqs`).
    pub slots: u32,
    /// Context of one slot, tokens (prompt plus answer).
    pub context_per_slot: u32,
    /// Tokens one engine step may carry (llama.cpp `n_batch`).
    pub batch_tokens: u32,
    /// Model width (`n_embd`).
    pub hidden: u32,
    /// Vocabulary size.
    pub vocab: u32,
    /// Parameter count.
    pub params: f64,
    /// Weight format.
    pub weight_dtype: DType,
    /// KV cache format.
    pub kv_dtype: DType,
}

impl Default for Facts {
    fn default() -> Self {
        Facts {
            model_name: "calibrated".to_string(),
            slots: 1,
            context_per_slot: 4096,
            batch_tokens: 2048,
            hidden: 4096,
            vocab: 32_000,
            params: 7.0e9,
            weight_dtype: DType::Bf16,
            kv_dtype: DType::Fp16,
        }
    }
}

impl Facts {
    /// The model as one equivalent layer of the server's width, vocabulary and parameter
    /// count (tied embeddings). Layer count and head shape cannot be read from an
    /// OpenAI-compatible server; the fitted rates are per this shape, so predictions do not
    /// depend on them.
    pub fn model(&self) -> ModelSpec {
        let d = f64::from(self.hidden.max(64));
        let head_dim = if self.hidden.is_multiple_of(64) {
            64
        } else {
            1
        };
        let heads = (self.hidden.max(1) / head_dim).max(1);
        let layer = (self.params - f64::from(self.vocab) * d - d).max(4.0 * d * d + 2.0 * d);
        // layer = 4d² (q, k, v, o at full width) + 3·d·ffn (SwiGLU) + 2d (norms).
        let ffn = ((layer - 4.0 * d * d - 2.0 * d) / (3.0 * d))
            .round()
            .max(1.0);
        ModelSpec {
            name: self.model_name.clone(),
            layers: 1,
            hidden: self.hidden.max(1),
            heads,
            kv_heads: heads,
            head_dim,
            ffn: ffn as u32,
            vocab: self.vocab.max(1),
            tied_embeddings: true,
            max_context: self.context_per_slot.max(1),
            weight_dtype: self.weight_dtype,
            kv_dtype: self.kv_dtype,
        }
    }
}

/// The fitted constants: achieved rates of each operator class and the overheads.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Constants {
    /// Bandwidth weights stream at, GB/s (the batch-1 decode floor).
    pub weight_gb_per_sec: f64,
    /// Rate of the weight GEMMs, GFLOP/s (prompt tokens).
    pub gemm_gflops: f64,
    /// Rate of causal prompt attention, GFLOP/s (grows with prompt length squared).
    pub attention_gflops: f64,
    /// Bandwidth decode attention reads the KV cache at, GB/s (grows with context).
    pub kv_gb_per_sec: f64,
    /// Cost of every sequence in a step (sampling, bookkeeping), µs.
    pub per_sequence_us: f64,
    /// Time from a request's arrival to the engine seeing it (HTTP, tokenisation), µs.
    pub frontend_us: f64,
}

impl Constants {
    /// Names and units, in the order of [`Constants::to_vec`].
    pub const NAMES: [(&'static str, &'static str); 6] = [
        ("weight_bandwidth", "GB/s"),
        ("gemm_rate", "GFLOP/s"),
        ("attention_rate", "GFLOP/s"),
        ("kv_read_bandwidth", "GB/s"),
        ("per_sequence", "µs"),
        ("frontend", "µs"),
    ];

    /// The constants as a vector.
    pub fn to_vec(self) -> [f64; 6] {
        [
            self.weight_gb_per_sec,
            self.gemm_gflops,
            self.attention_gflops,
            self.kv_gb_per_sec,
            self.per_sequence_us,
            self.frontend_us,
        ]
    }

    /// The constants from a vector in [`Constants::NAMES`] order.
    pub fn from_vec(v: [f64; 6]) -> Self {
        Constants {
            weight_gb_per_sec: v[0],
            gemm_gflops: v[1],
            attention_gflops: v[2],
            kv_gb_per_sec: v[3],
            per_sequence_us: v[4],
            frontend_us: v[5],
        }
    }
}

/// The accelerator whose peaks are the fastest fitted rates and whose efficiencies are each
/// class's share of them, so every efficiency stays in (0, 1].
fn calibrated_accelerator(c: &Constants, memory_gib: f64) -> GpuSpec {
    let bandwidth = c.weight_gb_per_sec.max(c.kv_gb_per_sec);
    let flops = c.gemm_gflops.max(c.attention_gflops);
    GpuSpec {
        name: "calibrated".to_string(),
        bf16_tflops: flops / 1e3,
        fp8_tflops: 0.0,
        hbm_tb_per_sec: bandwidth / 1e3,
        memory_gib,
        bandwidth_efficiency: c.weight_gb_per_sec / bandwidth,
        kv_read_efficiency: c.kv_gb_per_sec / bandwidth,
        gemm_efficiency_bf16: c.gemm_gflops / flops,
        gemm_efficiency_fp8: 1.0,
        attention_efficiency: c.attention_gflops / flops,
        interconnect_gb_per_sec: 1.0,
        all_reduce_us: 0.0,
    }
}

/// The simulator configuration of a server with `facts` and fitted `constants`: the batching
/// engine with the server's slots and context, FIFO admission without preemption (every slot
/// owns its context), the calibrated accelerator, and no per-step or per-prompt overhead beyond
/// the fitted ones.
pub fn calibrated_config(facts: &Facts, constants: &Constants) -> SimConfig {
    let model = facts.model();
    let block_size = 16;
    let kv_tokens = u64::from(facts.slots.max(1)) * u64::from(facts.context_per_slot.max(1));
    let kv_gib = kv_tokens as f64 * model.kv_bytes_per_token() / GIB;
    // Enough memory for the weights, the reserve the deployment arithmetic sets aside and the
    // slots' KV cache; the pool itself is fixed by `kv_blocks_override`.
    let memory_gib = (model.weight_bytes() / GIB + kv_gib + 8.0).ceil();
    let engine = BatchingConfig {
        gpu: calibrated_accelerator(constants, memory_gib),
        model,
        tensor_parallel: 1,
        gpu_memory_utilization: 1.0,
        max_model_len: Some(facts.context_per_slot.max(1)),
        max_num_seqs: facts.slots.max(1),
        max_num_batched_tokens: facts.batch_tokens.max(1),
        block_size,
        chunked_prefill: true,
        prefix_caching: false,
        watermark: 0.0,
        max_waiting: 100_000,
        kv_blocks_override: Some(kv_tokens.div_ceil(u64::from(block_size)) + 1),
        policy: EnginePolicy::Vllm,
        overheads: Some(StepOverheads {
            per_step_us: 0.0,
            per_layer_us: 0.0,
            per_sequence_us: constants.per_sequence_us,
            per_prefill_us: 0.0,
            frontend_us: constants.frontend_us,
        }),
        speculative: None,
        roofline: Roofline::Sum,
    };
    SimConfig {
        engine: EngineConfig::Batching(engine),
        served_model_name: Some(facts.model_name.clone()),
        ..SimConfig::default()
    }
}

/// The probes a calibration runs, in order: batch-1 decode at a short and a long context,
/// prefill at three prompt lengths, a concurrency sweep up to the slots, every slot at a long
/// context, then twice the slots (queueing).
/// Lengths are scaled to the slot's context; `requests` of each shape at concurrency 1.
pub fn plan(facts: &Facts, requests: u32) -> Vec<ProbeShape> {
    let ctx = facts.context_per_slot.max(64);
    let longest = (ctx / 2).clamp(16, 1024);
    let answer = (ctx / 8).clamp(8, 48);
    let shape = |concurrency: u32, prompt_tokens: u32, output_tokens: u32| ProbeShape {
        concurrency,
        prompt_tokens,
        output_tokens,
        requests: requests.max(1) * concurrency,
    };
    let mut probes = vec![
        shape(1, 16, answer),
        shape(1, longest, answer),
        shape(1, longest / 8, 4),
        shape(1, longest / 2, 4),
    ];
    let slots = facts.slots.max(1);
    let mut concurrency = 2;
    while concurrency <= slots {
        probes.push(shape(concurrency, 64.min(longest), answer));
        concurrency *= 2;
    }
    // Every slot decoding at a long context: how the KV reads of a batch add up.
    probes.push(shape(slots, longest / 2, answer));
    probes.push(shape(slots * 2, 64.min(longest), answer));
    probes
}

/// A held-out workload for `calibrate --check`, none of its shapes probed by [`plan`]: the
/// slots filled with prompts four times the sweep's and with answers four times the sweep's,
/// then twice the slots (queueing) at the sweep's own lengths.
pub fn held_out(facts: &Facts, requests: u32) -> Vec<ProbeShape> {
    let ctx = facts.context_per_slot.max(64);
    let prompt = 64.min(ctx / 8).max(8);
    let answer = (ctx / 8).clamp(8, 48) / 2;
    let slots = facts.slots.max(1);
    let shape = |concurrency: u32, prompt_tokens: u32, output_tokens: u32| ProbeShape {
        concurrency,
        prompt_tokens,
        output_tokens,
        requests: requests.max(1) * concurrency,
    };
    vec![
        shape(slots, prompt * 4, answer),
        shape(slots, prompt, answer * 4),
        shape(slots * 2, prompt, answer),
    ]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_equivalent_model_has_the_servers_parameter_count() {
        let facts = Facts {
            hidden: 512,
            vocab: 32_000,
            params: 42_082_816.0,
            ..Facts::default()
        };
        let model = facts.model();
        assert!(
            (model.params() / facts.params - 1.0).abs() < 1e-3,
            "{model:?}"
        );
    }

    #[test]
    fn the_calibrated_config_is_valid_and_round_trips_through_toml() {
        let constants = Constants {
            weight_gb_per_sec: 18.0,
            gemm_gflops: 90.0,
            attention_gflops: 40.0,
            kv_gb_per_sec: 30.0,
            per_sequence_us: 2000.0,
            frontend_us: 1000.0,
        };
        let config = calibrated_config(&Facts::default(), &constants);
        config.validate().unwrap();
        let text = toml::to_string(&config).unwrap();
        let back: SimConfig = toml::from_str(&text).unwrap();
        back.validate().unwrap();
        assert_eq!(back, config);
    }
}
