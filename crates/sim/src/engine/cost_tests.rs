//! The step cost model's tests: each term against its arithmetic.
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
        overheads: Some(StepOverheads::NONE),
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
