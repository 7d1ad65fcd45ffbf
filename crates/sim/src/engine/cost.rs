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
    /// overlap the larger (the accelerator's `gemm_ridge_loss`; unused when summed).
    pub ridge_loss: f64,
}

impl StepCost {
    /// The layer GEMMs: their FLOPs and their weight reads overlap, but for `ridge_loss` of
    /// the smaller (most where the two are equal).
    pub fn linear_secs(&self) -> f64 {
        let (compute, memory) = (self.linear_compute_secs, self.linear_memory_secs);
        if self.summed {
            compute + memory
        } else {
            compute.max(memory) + self.ridge_loss * compute.min(memory)
        }
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
            ridge_loss: self.gpu.gemm_ridge_loss,
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
mod tests {
    #![allow(clippy::unwrap_used)]
    use goodput_protocol::hardware::DType;

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
        let weights = config.model.streamed_weight_bytes() / config.gpu.effective_bandwidth();
        let streamed = cost.linear_memory_secs + cost.logits_secs;
        assert!((streamed - weights).abs() / weights < 0.01, "{cost:?}");
        let o = config.effective_overheads();
        let overhead = (o.per_step_us + o.per_layer_us * 32.0 + o.per_sequence_us) * 1e-6;
        assert!((cost.overhead_secs() - overhead).abs() < 1e-12);
        assert!(
            (0.0065..0.0085).contains(&cost.total_secs()),
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
    fn prefill_is_compute_bound_and_about_35ms_per_1k_tokens() {
        let (_, model) = model_8b_h100();
        let cost = model.cost(&[prompt(1024)], false);
        assert!(!cost.is_memory_bound());
        let compute = cost.linear_secs() + cost.prefill_attention_secs;
        assert!((0.020..0.030).contains(&compute), "{cost:?}");
    }

    #[test]
    fn logits_are_computed_for_the_last_prompt_token_only() {
        let (_, model) = model_8b_h100();
        let whole = model.cost(&[prompt(4096)], false);
        let mut chunk = prompt(4096);
        chunk.samples = false;
        let middle = model.cost(&[chunk], false);
        assert_eq!(middle.logits_secs, 0.0);
        // One position's logits cost the head's weight reads, not 4096 positions' FLOPs.
        assert!(whole.logits_secs < 0.001, "{whole:?}");
    }

    #[test]
    fn a_prompt_chunk_does_not_hide_the_decodes_kv_reads() {
        let (_, model) = model_8b_h100();
        let decodes = decode_batch(32, 2048);
        let alone = model.cost(&decodes, false).total_secs();
        let mut mixed = decodes;
        mixed.push(prompt(512));
        let together = model.cost(&mixed, false);
        let prompt_alone = model.cost(&[prompt(512)], false).total_secs();
        assert!(together.decode_attention_secs > 0.0);
        assert!(together.total_secs() > alone * 1.2, "{together:?}");
        assert!(together.total_secs() < alone + prompt_alone);
    }

    #[test]
    fn fp8_weights_run_gemms_at_the_fp8_rate_and_stream_half_the_bytes() {
        let (mut config, bf16) = model_8b_h100();
        config.model.weight_dtype = DType::Fp8;
        let fp8 = StepCostModel::new(&config);
        let (a, b) = (
            bf16.cost(&[prompt(4096)], false),
            fp8.cost(&[prompt(4096)], false),
        );
        let ratio = a.linear_compute_secs / b.linear_compute_secs;
        let expected = 2.0 * config.gpu.gemm_efficiency_fp8 / config.gpu.gemm_efficiency_bf16;
        assert!((ratio - expected).abs() < 1e-9, "{ratio}");
        assert!((a.linear_memory_secs / b.linear_memory_secs - 2.0).abs() < 1e-9);
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
        assert!(wider.linear_memory_secs < cost.linear_memory_secs);
        assert!(wider.comm_secs > cost.comm_secs);
    }

    #[test]
    fn a_shard_pays_its_gemm_tail_and_the_replicated_elementwise_beyond_its_share() {
        let on = |tp: u32| {
            let config = BatchingConfig {
                model: ModelSpec::preset("llama-3.1-70b").unwrap(),
                tensor_parallel: tp,
                ..BatchingConfig::default()
            };
            (StepCostModel::new(&config), config)
        };
        let (one, _) = on(1);
        let (four, config) = on(4);
        let chunk = |tokens| {
            let mut entry = prompt(tokens);
            entry.samples = false;
            [entry]
        };
        // One GPU: neither term.
        let alone = one.cost(&chunk(512), false);
        assert_eq!(alone.replicated_secs, 0.0);
        // Four: 12 passes over 512 tokens' hidden state, three quarters of them extra.
        let split = four.cost(&chunk(512), false);
        let layers = f64::from(config.model.layers);
        let bytes = 12.0 * 512.0 * f64::from(config.model.hidden) * 2.0;
        let expected = layers * bytes * 0.75 / config.gpu.effective_bandwidth();
        assert!(
            (split.replicated_secs - expected).abs() < 1e-12,
            "{split:?}"
        );
        // The GEMMs: a quarter of one GPU's FLOPs plus three quarters of 22 GFLOP a layer.
        let rate = config.gpu.gemm_flops(config.model.weight_dtype);
        let tail = layers * 22e9 * 0.75 / rate;
        let quarter = alone.linear_compute_secs / 4.0;
        assert!(
            (split.linear_compute_secs - quarter - tail).abs() < 1e-9,
            "{split:?}"
        );
        // Below 256 tokens the tail shrinks with the tokens.
        let small = four.cost(&chunk(64), false).linear_compute_secs;
        let small_alone = one.cost(&chunk(64), false).linear_compute_secs / 4.0;
        assert!((small - small_alone - tail / 4.0).abs() < 1e-9);
        // The all-reduce moves its bytes at the bus efficiency: 0.7 of NVLink 4 on H100.
        assert!((config.gpu.all_reduce_bus_efficiency - 0.7).abs() < 1e-12);
    }

    #[test]
    fn a_summed_roofline_charges_a_mixed_step_one_weight_pass_and_every_tokens_arithmetic() {
        let config = BatchingConfig {
            roofline: Roofline::Sum,
            overheads: Some(StepOverheads {
                per_step_us: 0.0,
                per_layer_us: 0.0,
                per_sequence_us: 0.0,
                per_prefill_us: 0.0,
                frontend_us: 0.0,
            }),
            ..BatchingConfig::default()
        };
        let model = StepCostModel::new(&config);
        let decodes = decode_batch(3, 0);
        let mut mixed = decodes.clone();
        mixed.push(prompt(256));
        let (d, p, m) = (
            model.cost(&decodes, false),
            model.cost(&[prompt(256)], false),
            model.cost(&mixed, false),
        );
        // Weights once, whatever the mix; arithmetic of all 259 tokens.
        assert_eq!(m.linear_memory_secs, p.linear_memory_secs);
        let expected = d.linear_compute_secs + p.linear_compute_secs;
        assert!((m.linear_compute_secs - expected).abs() < 1e-12 * expected.max(1.0));
        assert!((m.linear_secs() - (m.linear_compute_secs + m.linear_memory_secs)).abs() < 1e-15);
        // The mixed step costs less than a prompt step and a decode step one after the other.
        let apart = d.total_secs() + p.total_secs();
        assert!(m.total_secs() < apart - 0.9 * d.linear_memory_secs, "{m:?}");
        // The GPU default still overlaps them, but for its ridge loss.
        let gpu = StepCostModel::new(&BatchingConfig::default()).cost(&decodes, false);
        let overlapped = gpu.linear_memory_secs + gpu.ridge_loss * gpu.linear_compute_secs;
        assert!(!gpu.summed && (gpu.linear_secs() - overlapped).abs() < 1e-15);
    }

    #[test]
    fn gemms_lose_most_overlap_at_the_ridge() {
        let (config, model) = model_8b_h100();
        assert_eq!(config.gpu.gemm_ridge_loss, 0.28);
        let linear = |tokens: u32| {
            let c = model.cost(&[prompt(tokens)], false);
            let (compute, memory) = (c.linear_compute_secs, c.linear_memory_secs);
            (c.linear_secs(), compute, memory)
        };
        // One token: the weight reads, and 0.28 of a token's arithmetic (under 0.3 %).
        let (one, compute, memory) = linear(1);
        assert!((one - (memory + 0.28 * compute)).abs() < 1e-15);
        assert!(one < memory * 1.003, "{one} vs {memory}");
        // Where arithmetic and weight reads are equal — 0.62 × 989.5 TF ÷ (0.80 × 3.35 TB/s)
        // = 229 tokens (two FLOPs and two bytes a parameter) — 1.28 × either.
        let ridge = (1..4096)
            .min_by(|&a, &b| {
                let gap = |n| {
                    let (_, c, m) = linear(n);
                    (c / m - 1.0f64).abs()
                };
                gap(a).total_cmp(&gap(b))
            })
            .unwrap_or(1);
        let (at, compute, memory) = linear(ridge);
        assert!((228..=230).contains(&ridge), "{ridge}");
        assert!(
            (at / compute.max(memory) - 1.28).abs() < 0.01,
            "{at} {compute} {memory}"
        );
        // Far above it, the arithmetic and 0.28 of the (now small) weight reads: within 1 %.
        let (far, compute, _) = linear(32_768);
        assert!(far / compute < 1.01);
    }

    #[test]
    fn gemm_batch_factors_slow_small_batches_by_their_interpolated_factor() {
        let base = BatchingConfig {
            roofline: Roofline::Sum,
            ..BatchingConfig::default()
        };
        let slowed = BatchingConfig {
            gemm_batch_factors: vec![[1.0, 8.0], [4.0, 2.0], [64.0, 1.0]],
            ..base.clone()
        };
        slowed.validate().unwrap();
        let (plain, slow) = (StepCostModel::new(&base), StepCostModel::new(&slowed));
        // Log–log between the points: 2 tokens halfway from 8 to 2, 16 halfway from 2 to 1.
        let expected = [
            (1, 8.0),
            (2, 4.0),
            (4, 2.0),
            (16, 2f64.sqrt()),
            (64, 1.0),
            (512, 1.0),
        ];
        for (tokens, factor) in expected {
            let batch = [prompt(tokens)];
            let ratio = slow.cost(&batch, false).linear_compute_secs
                / plain.cost(&batch, false).linear_compute_secs;
            assert!(
                (ratio - factor).abs() < 1e-9,
                "{tokens}: {ratio} vs {factor}"
            );
        }
        // The output head is a GEMM over the sampled positions: two decodes, factor 4.
        let (a, b) = (
            plain.cost(&decode_batch(2, 0), false),
            slow.cost(&decode_batch(2, 0), false),
        );
        let head = |c: &StepCost| {
            c.logits_secs - plain.model.logits_weight_bytes() / plain.gpu.effective_bandwidth()
        };
        assert!((head(&b) / head(&a) - 4.0).abs() < 1e-9, "{a:?} {b:?}");
        // Weight reads and attention do not change.
        assert_eq!(a.linear_memory_secs, b.linear_memory_secs);
        assert_eq!(a.decode_attention_secs, b.decode_attention_secs);
    }
}
