//! Roofline step time: how long one forward step of a batch takes on the modelled hardware.
//!
//! ```text
//! compute  = Σ_prefill (linear + attention FLOPs) / (peak · MFU_prefill)
//!          + Σ_decode  (linear + attention FLOPs) / (peak · MFU_decode)          ÷ tp
//! memory   = (streamed weights + KV bytes · Σ(context + new) + activations · Σ new)
//!            / (bandwidth · efficiency)                                          ÷ tp
//! comm     = 2 · layers · (all_reduce latency + new · hidden · 2 bytes · 2(tp−1)/tp / link)   (tp > 1)
//! draft    = K · (c_draft / c_target) · max(compute, memory)                   (speculative)
//! step     = per_step + per_layer · layers + per_sequence · sequences
//!            + max(compute, memory) + comm + draft
//! ```
//! Weights are read once per step whatever the batch, so decode is bandwidth-bound at small
//! batch and becomes compute-bound as the batch grows; prefill is compute-bound.

use std::time::Duration;

use goodput_protocol::hardware::{GpuSpec, ModelSpec};

use crate::config::{BatchingConfig, StepOverheads};

/// One sequence's share of a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchEntry {
    /// Tokens computed for this sequence in the step (prompt chunk, or 1 + drafts in decode).
    pub new_tokens: u32,
    /// Tokens already in its KV cache before the step.
    pub context: u32,
    /// Whether these are prompt (prefill) tokens rather than decode tokens.
    pub is_prefill: bool,
}

/// The parts of a step's duration, seconds.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StepCost {
    /// FLOPs ÷ effective FLOP/s.
    pub compute_secs: f64,
    /// Bytes ÷ effective bandwidth.
    pub memory_secs: f64,
    /// Tensor-parallel all-reduces.
    pub comm_secs: f64,
    /// Draft model forwards (speculative decoding).
    pub draft_secs: f64,
    /// Fixed per-step, per-layer and per-sequence costs.
    pub overhead_secs: f64,
}

impl StepCost {
    /// The step's duration.
    pub fn total_secs(&self) -> f64 {
        self.overhead_secs
            + self.compute_secs.max(self.memory_secs)
            + self.comm_secs
            + self.draft_secs
    }

    /// The step's duration as a [`Duration`] (rounded to the nanosecond).
    pub fn duration(&self) -> Duration {
        Duration::from_secs_f64(self.total_secs().max(0.0))
    }

    /// Whether memory traffic, not arithmetic, bounds the step.
    pub fn is_memory_bound(&self) -> bool {
        self.memory_secs >= self.compute_secs
    }
}

/// Computes step costs for one deployment.
#[derive(Debug, Clone)]
pub struct StepCostModel {
    model: ModelSpec,
    gpu: GpuSpec,
    tensor_parallel: f64,
    overheads: StepOverheads,
    draft_factor: f64,
}

impl StepCostModel {
    /// The cost model of a batching engine configuration.
    pub fn new(config: &BatchingConfig) -> Self {
        let draft_factor = config.speculative.as_ref().map_or(0.0, |s| {
            f64::from(s.num_draft_tokens()) * s.draft_cost_ratio
        });
        StepCostModel {
            model: config.model.clone(),
            gpu: config.gpu.clone(),
            tensor_parallel: f64::from(config.tensor_parallel.max(1)),
            overheads: config.overheads.clone(),
            draft_factor,
        }
    }

    /// The cost of one step over `batch`; `drafting` when decode sequences carry draft tokens.
    pub fn cost(&self, batch: &[BatchEntry], drafting: bool) -> StepCost {
        if batch.is_empty() {
            return StepCost::default();
        }
        let peak = self.gpu.peak_flops(self.model.weight_dtype);
        let (mut prefill_flops, mut decode_flops) = (0.0, 0.0);
        let (mut kv_tokens, mut new_tokens) = (0.0, 0.0);
        for entry in batch {
            let new = f64::from(entry.new_tokens);
            let context = f64::from(entry.context);
            let flops = self.model.linear_flops(new) + self.model.attention_flops(new, context);
            if entry.is_prefill {
                prefill_flops += flops;
            } else {
                decode_flops += flops;
            }
            kv_tokens += context + new;
            new_tokens += new;
        }
        let tp = self.tensor_parallel;
        let compute_secs = (prefill_flops / (peak * self.gpu.mfu_prefill)
            + decode_flops / (peak * self.gpu.mfu_decode))
            / tp;
        let bytes = self.model.streamed_weight_bytes()
            + self.model.kv_bytes_per_token() * kv_tokens
            + self.model.activation_bytes_per_token() * new_tokens;
        let memory_secs = bytes / (self.gpu.effective_bandwidth() * tp);
        let comm_secs = self.all_reduce_secs(new_tokens);
        let forward = compute_secs.max(memory_secs);
        let draft_secs = if drafting {
            self.draft_factor * forward
        } else {
            0.0
        };
        let layers = f64::from(self.model.layers);
        let overhead_us = self.overheads.per_step_us
            + self.overheads.per_layer_us * layers
            + self.overheads.per_sequence_us * batch.len() as f64;
        StepCost {
            compute_secs,
            memory_secs,
            comm_secs,
            draft_secs,
            overhead_secs: overhead_us * 1e-6,
        }
    }

    fn all_reduce_secs(&self, new_tokens: f64) -> f64 {
        let tp = self.tensor_parallel;
        if tp <= 1.0 {
            return 0.0;
        }
        let bytes = new_tokens * f64::from(self.model.hidden) * 2.0;
        let ring = bytes * 2.0 * (tp - 1.0) / tp / (self.gpu.interconnect_gb_per_sec * 1e9);
        2.0 * f64::from(self.model.layers) * (self.overheads.all_reduce_us * 1e-6 + ring)
    }
}

/// A decode batch of `size` sequences, each at `context` tokens.
pub(crate) fn decode_batch(size: u32, context: u32) -> Vec<BatchEntry> {
    (0..size)
        .map(|_| BatchEntry {
            new_tokens: 1,
            context,
            is_prefill: false,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn model_8b_h100() -> (BatchingConfig, StepCostModel) {
        let config = BatchingConfig::default();
        let cost = StepCostModel::new(&config);
        (config, cost)
    }

    #[test]
    fn batch1_decode_step_is_weight_bytes_over_bandwidth_plus_overhead() {
        let (config, model) = model_8b_h100();
        let cost = model.cost(&decode_batch(1, 1024), false);
        assert!(cost.is_memory_bound());
        let weights = config.model.streamed_weight_bytes() / (3.35e12 * 0.9);
        // Weights dominate: KV of 1k tokens adds 134 MB to 15 GB.
        assert!((cost.memory_secs - weights) / weights < 0.01, "{cost:?}");
        let overhead = (126.0 + 32.0 * 32.0 + 4.0) * 1e-6;
        assert!((cost.total_secs() - (cost.memory_secs + overhead)).abs() < 1e-9);
        assert!(
            (0.0055..0.0065).contains(&cost.total_secs()),
            "{}",
            cost.total_secs()
        );
    }

    #[test]
    fn decode_turns_compute_bound_only_at_large_batch() {
        let (_, model) = model_8b_h100();
        assert!(model.cost(&decode_batch(8, 512), false).is_memory_bound());
        let big = model.cost(&decode_batch(1024, 16), false);
        assert!(!big.is_memory_bound(), "{big:?}");
    }

    #[test]
    fn prefill_is_compute_bound_and_about_33ms_per_1k_tokens() {
        let (_, model) = model_8b_h100();
        let cost = model.cost(
            &[BatchEntry {
                new_tokens: 1024,
                context: 0,
                is_prefill: true,
            }],
            false,
        );
        assert!(!cost.is_memory_bound());
        assert!((0.030..0.040).contains(&cost.compute_secs), "{cost:?}");
    }

    #[test]
    fn output_tokens_per_second_rise_with_batch_then_flatten() {
        let (_, model) = model_8b_h100();
        let rate = |b: u32| f64::from(b) / model.cost(&decode_batch(b, 2048), false).total_secs();
        let (r1, r32, r128, r256) = (rate(1), rate(32), rate(128), rate(256));
        assert!(r32 > 10.0 * r1);
        assert!(r256 > r128);
        assert!(r256 / r128 < 1.3, "gains flatten: {r128} -> {r256}");
    }

    #[test]
    fn tensor_parallel_adds_all_reduce_time() {
        let mut config = BatchingConfig {
            model: ModelSpec::preset("llama-3.1-70b").unwrap(),
            tensor_parallel: 4,
            ..BatchingConfig::default()
        };
        let cost = StepCostModel::new(&config).cost(&decode_batch(1, 1024), false);
        assert!(cost.comm_secs > 0.0);
        config.tensor_parallel = 8;
        let wider = StepCostModel::new(&config).cost(&decode_batch(1, 1024), false);
        assert!(wider.memory_secs < cost.memory_secs);
    }
}
