//! Step time built per operator class: how long one forward step of a batch takes on the
//! modelled hardware.
//!
//! ```text
//! linear    = max(C, M) + ridge · min(C, M), where
//!             C = 2 · layer_params · N / (peak_w · eff_gemm_w) ÷ tp + shard_tail,
//!             M = layer weight bytes / (BW · η_w) ÷ tp
//! shard_tail = layers · F_tail · min(N / N_tail, 1) · (1 − 1/tp) / (peak_w · eff_gemm_w)  (tp > 1)
//! replicated = layers · P_elem · N · hidden · 2 B · (1 − 1/tp) / (BW · η_w)             (tp > 1)
//! logits    = max(2 · vocab · hidden · S / (peak_w · eff_gemm_w), head bytes / (BW · η_w))        ÷ tp
//! attn_pre  = max(Σ_prefill 4·L·H·hd·n·(c + (n−1)/2) / (peak_bf16 · eff_attn),
//!                 Σ_prefill c · kv / (BW · η_kv))                                             ÷ tp
//! attn_dec  = (Σ_decode (c + n) · kv + N_prefill · kv) / (BW · η_kv)                           ÷ tp
//! comm      = 2 · layers · (all_reduce_us · log2 tp + N · hidden · 2 B · 2(tp−1)/tp / (link · η_bus))  (tp > 1)
//! draft     = K · (c_draft / c_target) · (linear + logits + attn_dec)                         (speculative)
//! overhead  = per_step + per_layer · layers + per_sequence · sequences + per_prefill (if any prompt)
//! (GEMM FLOPs of n columns × gemm_batch_factors(n) when configured: small batches run slower)
//! step      = linear + replicated + logits + attn_pre + attn_dec + comm + draft + overhead
//! ```
//! With `roofline = "sum"` (a CPU server) every `max(compute, bytes)` above is a sum instead:
//! one pass over the weights plus the arithmetic of every token in the step, whatever mix of
//! prompt and decode tokens the step carries (llama.cpp runs them as one batch).
//! N is every token computed in the step, S the sequences that sample a token (decodes and
//! prompts whose last chunk runs), `_w` the weight precision. Each operator is its own kernel,
//! so only a GEMM overlaps its own weight reads with its FLOPs; a prompt chunk's FLOPs do not
//! hide the decodes' KV reads. Weights are read once per step whatever the batch, so decode is
//! bandwidth-bound at small batch and becomes compute-bound as the batch grows.
//!
//! Split over `tp` GPUs, two costs do not shrink by `tp` (both vanish at `tp = 1`, where the
//! GEMM efficiency absorbs them): each GEMM's fixed tail of partly filled waves
//! ([`SHARD_GEMM_TAIL_FLOPS`]) and the elementwise kernels every worker runs on the whole
//! hidden state ([`REPLICATED_ELEMENTWISE_PASSES`]); and an all-reduce moves its bytes at
//! `all_reduce_bus_efficiency` of the link (Vidur's operator profiles, `docs/simulator.md`).

use std::time::Duration;

use goodput_protocol::hardware::{GpuSpec, ModelSpec};

use crate::config::{BatchingConfig, Roofline, StepOverheads};

/// GEMM FLOPs per layer that a tensor-parallel shard pays whatever its width, from
/// [`SHARD_GEMM_TAIL_TOKENS`] tokens a step: the tail of the four weight GEMMs' partly filled
/// waves, which the one-GPU GEMM efficiency already absorbs and which does not shrink with the
/// shard. Vidur's BF16 profiles (`microsoft/vidur` @ 7d47513363ec,
/// `data/profiling/compute/{h100,a100}/…/mlp.csv`) at 256 tokens over 2–8 GPUs take 13–30 GFLOP
/// per layer more at the model's GEMM rate than `2 · params · N / tp` (median 22.6 over the
/// eight points: 70B on H100 and A100, 8B on A100), alike on both GPUs and both models;
/// `docs/simulator.md`, "Published points at scale".
pub const SHARD_GEMM_TAIL_FLOPS: f64 = 22e9;

/// Tokens a step from which the shard tail is whole; below, it shrinks with the tokens (a
/// per-token loss of GEMM efficiency that grows with the number of shards). Vidur's profiles
/// put the excess at 70–110 µs per layer over eight A100s from 193 to 320 tokens and 27 µs from
/// 1 to 64, where the weight reads hide it; gpt-fast's batch-1 and vLLM CI's batch-8 decode over
/// 2–8 GPUs (the calibration set) show none.
pub const SHARD_GEMM_TAIL_TOKENS: f64 = 256.0;

/// Passes over the hidden state (`N · hidden · 2 B`, read or written) per layer of the
/// elementwise kernels every tensor-parallel worker runs on the whole activation (two RMSNorms,
/// two residual adds). Vidur's elementwise profiles split as `a + b/tp` over TP 1–8 give a
/// replicated part `a` of 11.7 passes on H100 and 11.8 on A100 at 4096 tokens (9–16 at 256 and
/// 1024) at the weight-streaming bandwidth; `docs/simulator.md`, "Published points at scale".
pub const REPLICATED_ELEMENTWISE_PASSES: f64 = 12.0;

/// One sequence's share of a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchEntry {
    /// Tokens computed for this sequence in the step (prompt chunk, or 1 + drafts in decode).
    pub new_tokens: u32,
    /// Tokens already in its KV cache before the step.
    pub context: u32,
    /// Whether these are prompt (prefill) tokens rather than decode tokens.
    pub is_prefill: bool,
    /// Whether the step computes logits for this sequence (a decode, or the chunk that
    /// completes a prompt).
    pub samples: bool,
}

/// The parts of a step's duration, seconds. Every term is added: each operator class runs as
/// its own kernels.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StepCost {
    /// Layer GEMMs: FLOPs at the GEMM rate of the weight precision.
    pub linear_compute_secs: f64,
    /// Layer GEMMs: weight bytes at the weight-streaming bandwidth.
    pub linear_memory_secs: f64,
    /// Output head for the sampled positions (the larger of its FLOPs and its weight reads).
    pub logits_secs: f64,
    /// Causal attention over prompt chunks.
    pub prefill_attention_secs: f64,
    /// Decode attention reading the KV cache (and every new token's KV write).
    pub decode_attention_secs: f64,
    /// Elementwise kernels every tensor-parallel worker runs on the whole hidden state, beyond
    /// their `1/tp` share (0 on one GPU).
    pub replicated_secs: f64,
    /// Tensor-parallel all-reduces.
    pub comm_secs: f64,
    /// Draft model forwards (speculative decoding).
    pub draft_secs: f64,
    /// Fixed per-step and per-layer costs (scheduling, launches, sampling).
    pub fixed_secs: f64,
    /// Per-sequence costs.
    pub sequence_secs: f64,
    /// Extra cost of a step that carries prompt tokens (no full CUDA graph).
    pub prefill_overhead_secs: f64,
    /// Whether weight reads and arithmetic add up (`roofline = "sum"`) rather than overlap.
    pub summed: bool,
    /// Share of the smaller of the layer GEMMs' arithmetic and weight reads that does not
    /// overlap the larger: the accelerator's `gemm_ridge_loss`, or 1 when summed.
    pub ridge_loss: f64,
}

impl StepCost {
    /// The layer GEMMs: their FLOPs and their weight reads overlap, but for `ridge_loss` of
    /// the smaller (most where the two are equal; all of it when summed).
    pub fn linear_secs(&self) -> f64 {
        let (compute, memory) = (self.linear_compute_secs, self.linear_memory_secs);
        compute.max(memory) + self.ridge_loss * compute.min(memory)
    }

    /// Every fixed cost: per step, per layer, per sequence, per prefill.
    pub fn overhead_secs(&self) -> f64 {
        self.fixed_secs + self.sequence_secs + self.prefill_overhead_secs
    }

    /// The step's duration.
    pub fn total_secs(&self) -> f64 {
        self.linear_secs()
            + self.replicated_secs
            + self.logits_secs
            + self.prefill_attention_secs
            + self.decode_attention_secs
            + self.comm_secs
            + self.draft_secs
            + self.overhead_secs()
    }

    /// The step's duration as a [`Duration`] (rounded to the nanosecond; saturating, so
    /// absurd constants give an absurdly long step rather than a panic).
    pub fn duration(&self) -> Duration {
        Duration::try_from_secs_f64(self.total_secs().max(0.0)).unwrap_or(Duration::MAX)
    }

    /// Whether the layer GEMMs wait on weight bytes rather than on arithmetic.
    pub fn is_memory_bound(&self) -> bool {
        self.linear_memory_secs >= self.linear_compute_secs
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
    summed: bool,
    batch_factors: Vec<[f64; 2]>,
}

/// Token sums of a batch.
#[derive(Debug, Default)]
struct Totals {
    tokens: f64,
    sampled: f64,
    prefill_tokens: f64,
    prefill_attention_flops: f64,
    prefill_context: f64,
    decode_kv_tokens: f64,
    prefills: bool,
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
            overheads: config.effective_overheads(),
            draft_factor,
            summed: config.roofline == Roofline::Sum,
            batch_factors: config.gemm_batch_factors.clone(),
        }
    }

    /// The roofline of one operator: the larger of its arithmetic and its bytes, or their sum.
    fn roof(&self, compute_secs: f64, memory_secs: f64) -> f64 {
        if self.summed {
            compute_secs + memory_secs
        } else {
            compute_secs.max(memory_secs)
        }
    }

    /// FLOPs of a GEMM over `tokens` columns, slowed by the configured small-batch factor.
    fn batch_scaled(&self, flops: f64, tokens: f64) -> f64 {
        flops * gemm_batch_factor(&self.batch_factors, tokens)
    }

    /// The overheads this model charges.
    pub fn overheads(&self) -> &StepOverheads {
        &self.overheads
    }

    fn totals(&self, batch: &[BatchEntry]) -> Totals {
        let mut totals = Totals::default();
        for entry in batch {
            let new = f64::from(entry.new_tokens);
            let context = f64::from(entry.context);
            totals.tokens += new;
            if entry.samples {
                totals.sampled += 1.0;
            }
            if entry.is_prefill {
                totals.prefills = true;
                totals.prefill_tokens += new;
                totals.prefill_attention_flops += self.model.attention_flops(new, context);
                totals.prefill_context += context;
            } else {
                totals.decode_kv_tokens += context + new;
            }
        }
        totals
    }

    /// The cost of one step over `batch`; `drafting` when decode sequences carry draft tokens.
    pub fn cost(&self, batch: &[BatchEntry], drafting: bool) -> StepCost {
        if batch.is_empty() {
            return StepCost::default();
        }
        let t = self.totals(batch);
        let tp = self.tensor_parallel;
        let dtype = self.model.weight_dtype;
        let gemm = self.gpu.gemm_flops(dtype) * tp;
        let stream = self.gpu.effective_bandwidth() * tp;
        let kv_read = self.gpu.kv_read_bandwidth() * tp;
        let kv = self.model.kv_bytes_per_token();
        let logits_secs = if t.sampled > 0.0 {
            self.roof(
                self.batch_scaled(self.model.logits_flops(t.sampled), t.sampled) / gemm,
                self.model.logits_weight_bytes() / stream,
            )
        } else {
            0.0
        };
        let prefill_attention_secs = self.roof(
            t.prefill_attention_flops / (self.gpu.attention_flops() * tp),
            t.prefill_context * kv / kv_read,
        );
        let decode_attention_secs = (t.decode_kv_tokens + t.prefill_tokens) * kv / kv_read;
        let mut cost = StepCost {
            linear_compute_secs: self
                .batch_scaled(self.model.layer_linear_flops(t.tokens), t.tokens)
                / gemm
                + self.shard_tail_secs(t.tokens),
            linear_memory_secs: self.model.layer_weight_bytes() / stream,
            replicated_secs: self.replicated_secs(t.tokens),
            logits_secs,
            prefill_attention_secs,
            decode_attention_secs,
            comm_secs: self.all_reduce_secs(t.tokens),
            summed: self.summed,
            ridge_loss: if self.summed {
                1.0
            } else {
                self.gpu.gemm_ridge_loss
            },
            ..StepCost::default()
        };
        if drafting {
            cost.draft_secs =
                self.draft_factor * (cost.linear_secs() + logits_secs + decode_attention_secs);
        }
        let o = &self.overheads;
        let layers = f64::from(self.model.layers);
        cost.fixed_secs = (o.per_step_us + o.per_layer_us * layers) * 1e-6;
        cost.sequence_secs = o.per_sequence_us * batch.len() as f64 * 1e-6;
        if t.prefills {
            cost.prefill_overhead_secs = o.per_prefill_us * 1e-6;
        }
        cost
    }

    /// The share of a per-GPU cost that tensor parallelism does not divide: `1 − 1/tp`.
    fn unsplit_share(&self) -> f64 {
        1.0 - 1.0 / self.tensor_parallel
    }

    /// The GEMMs' tail a narrow shard keeps (one GPU's GEMM efficiency holds it at `tp = 1`):
    /// [`SHARD_GEMM_TAIL_FLOPS`] per layer at one GPU's GEMM rate, in proportion to the step's
    /// tokens below [`SHARD_GEMM_TAIL_TOKENS`].
    fn shard_tail_secs(&self, tokens: f64) -> f64 {
        let layers = f64::from(self.model.layers);
        let rate = self.gpu.gemm_flops(self.model.weight_dtype);
        let whole = (tokens / SHARD_GEMM_TAIL_TOKENS).min(1.0);
        layers * SHARD_GEMM_TAIL_FLOPS * whole * self.unsplit_share() / rate
    }

    /// The elementwise kernels each worker runs on the whole hidden state of `tokens` tokens,
    /// beyond the `1/tp` share the one-GPU rates already hold.
    fn replicated_secs(&self, tokens: f64) -> f64 {
        let layers = f64::from(self.model.layers);
        let bytes = REPLICATED_ELEMENTWISE_PASSES * tokens * f64::from(self.model.hidden) * 2.0;
        layers * bytes * self.unsplit_share() / self.gpu.effective_bandwidth()
    }

    /// Two all-reduces per layer: a latency per doubling of the group plus the ring's bytes
    /// at the bus bandwidth an all-reduce achieves on the link.
    fn all_reduce_secs(&self, tokens: f64) -> f64 {
        let tp = self.tensor_parallel;
        if tp <= 1.0 {
            return 0.0;
        }
        let bytes = tokens * f64::from(self.model.hidden) * 2.0;
        let bus = self.gpu.interconnect_gb_per_sec * 1e9 * self.gpu.all_reduce_bus_efficiency;
        let ring = bytes * 2.0 * (tp - 1.0) / tp / bus;
        let latency = self.gpu.all_reduce_us * 1e-6 * tp.log2();
        2.0 * f64::from(self.model.layers) * (latency + ring)
    }
}

/// The GEMM slowdown at `tokens` columns: `points` interpolated in log–log, held flat
/// beyond their ends; 1 without points.
fn gemm_batch_factor(points: &[[f64; 2]], tokens: f64) -> f64 {
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        return 1.0;
    };
    if tokens <= first[0] {
        return first[1];
    }
    if tokens >= last[0] {
        return last[1];
    }
    let upper = points
        .partition_point(|p| p[0] < tokens)
        .min(points.len() - 1);
    let ([n0, f0], [n1, f1]) = (points[upper.saturating_sub(1)], points[upper]);
    let at = (tokens / n0).ln() / (n1 / n0).ln();
    (f0.ln() + at * (f1 / f0).ln()).exp()
}

/// A decode batch of `size` sequences, each at `context` tokens.
pub(crate) fn decode_batch(size: u32, context: u32) -> Vec<BatchEntry> {
    (0..size)
        .map(|_| BatchEntry {
            new_tokens: 1,
            context,
            is_prefill: false,
            samples: true,
        })
        .collect()
}

/// A whole prompt of `tokens` tokens computed in one step.
pub(crate) fn prompt(tokens: u32) -> BatchEntry {
    BatchEntry {
        new_tokens: tokens,
        context: 0,
        is_prefill: true,
        samples: true,
    }
}

#[cfg(test)]
#[path = "cost_tests.rs"]
mod tests;
