//! Published measurements at scale — a 70B model over one, two and four GPUs — re-run on the
//! simulator's default presets in virtual time under their published conditions
//! (`docs/simulator.md`, "Published points at scale"): TensorRT-LLM's offline throughput of
//! Llama-3.3-70B FP8 on one H200 and on two H100s (the page and conditions of the calibration
//! set's DP5), vLLM CI's batch-8 latency on H100s (8B on one GPU, 70B over four), and Vidur's
//! per-layer operator profiles (GEMMs, elementwise kernels, NCCL all-reduces; 70B and 8B, TP
//! 1–8, 256–4096 tokens) against the cost model's layer terms, and SGLang's published serving
//! medians of SGLang 0.3.0 and vLLM 0.6.0 under Poisson load (70B over four H100s, 8B on one
//! A100). Each within its regime's tolerance as in the calibration set: batch-1 and kernel
//! latency ±20 %, offline throughput ±30 %, loaded serving ±40 %; the points the model misses
//! are known-miss tripwires. Prints its tables
//! (`cargo test -p goodput-sim --test published_scale -- --nocapture`).
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use support::engine_request as request;
use support::published::{Table, offline};
use support::sharegpt;

use goodput_protocol::hardware::{DType, GpuSpec, ModelSpec};
use goodput_sim::config::{BatchingConfig, EnginePolicy, StepOverheads};
use goodput_sim::engine::batching::BatchingEngine;
use goodput_sim::engine::cost::{BatchEntry, StepCostModel};
use goodput_sim::virtual_time::Simulation;

/// Relative tolerance of small-batch latency (regime 1).
const LATENCY: f64 = 0.20;
/// Relative tolerance of offline throughput (regime 2).
const OFFLINE: f64 = 0.30;
/// Relative tolerance of loaded serving (regime 3).
const SERVING: f64 = 0.40;

/// `model` on `tp` × `gpu` with `dtype` weights and KV under `policy`.
fn deploy(model: &str, gpu: &str, tp: u32, dtype: DType, policy: EnginePolicy) -> BatchingConfig {
    let mut model = ModelSpec::preset(model).unwrap();
    model.weight_dtype = dtype;
    model.kv_dtype = dtype;
    BatchingConfig {
        model,
        gpu: GpuSpec::preset(gpu).unwrap(),
        tensor_parallel: tp,
        policy,
        ..BatchingConfig::default()
    }
}

/// TensorRT-LLM perf-overview (`NVIDIA/TensorRT-LLM` `docs/source/performance/perf-overview.md`
/// @ 00f37686aa854010d68bcbd0f4ab000221541ca6, table "Llama 3.3 70B"):
/// `nvidia/Llama-3.3-70B-Instruct-FP8`, `trtllm-bench throughput`, PyTorch backend, every
/// request exactly ISL/OSL, all queued at once; H200 TP1 and H100 TP2. Engine settings as
/// DP5's (the same page): FP8 weights and KV, no chunked context, 8192 tokens and 2048
/// sequences a step, KV fraction 0.95.
fn trtllm_70b(table: &mut Table) {
    let rows: [(u32, u32, u64, f64, f64); 10] = [
        (128, 128, 30000, 3803.0, 6378.0),
        (128, 2048, 3000, 4336.0, 6651.0),
        (128, 4096, 1500, 2872.0, 4199.0),
        (500, 2000, 3000, 3666.0, 5222.0),
        (1000, 1000, 3000, 2909.0, 4205.0),
        (1000, 2000, 1500, 2994.0, 4146.0),
        (2048, 128, 3000, 442.0, 762.0),
        (2048, 2048, 1500, 2003.0, 3082.0),
        (5000, 500, 1500, 566.0, 898.0),
        (20000, 2000, 1000, 283.0, 437.0),
    ];
    for (isl, osl, count, h200, h100) in rows {
        for (gpu, tp, published) in [("h200", 1, h200), ("h100", 2, h100)] {
            let config = BatchingConfig {
                gpu_memory_utilization: 0.95,
                max_num_seqs: Some(2048),
                max_num_batched_tokens: Some(8192),
                chunked_prefill: false,
                ..deploy(
                    "llama-3.1-70b",
                    gpu,
                    tp,
                    DType::Fp8,
                    EnginePolicy::TensorrtLlm,
                )
            };
            let (rate, _) = offline(&config, count, isl, osl);
            table.add(
                format!("TRT-LLM 70B FP8 {isl}/{osl} {gpu} TP{tp} tok/s"),
                published,
                rate,
                OFFLINE,
            );
        }
    }
}

/// vLLM CI latency test on H100s (`latency-tests.json`: batch 8, 32 in / 128 out, dummy
/// weights, BF16; the end-to-end latency of the batch): the report of a Buildkite build
/// stored at buildkite.com/elastic/enterprise-search-ruby/builds/571 (GPU "8xH100").
fn vllm_h100_latency(table: &mut Table) {
    for (model, tp, published) in [("llama-3.1-8b", 1, 997.542), ("llama-3.1-70b", 4, 2444.47)] {
        let config = deploy(model, "h100", tp, DType::Bf16, EnginePolicy::Vllm);
        let (_, span) = offline(&config, 8, 32, 128);
        table.add(
            format!("vLLM CI {model} TP{tp} h100 batch-8 latency ms"),
            published,
            span.as_secs_f64() * 1e3,
            LATENCY,
        );
    }
}

/// Vidur's operator profiles (Agrawal et al., MLSys '24; `microsoft/vidur` @
/// 7d47513363ec447a741ac5e47241580b47724fbf, `data/profiling/compute/{gpu}/meta-llama/{model}/mlp.csv`
/// for Llama-2-70b-hf on H100 and Meta-Llama-3-70B / Meta-Llama-3-8B on A100, and
/// `data/profiling/network/{h100,a100}_dgx/all_reduce.csv`): one decoder layer, BF16, N tokens,
/// TP workers within one DGX node. Median µs of the four weight GEMMs (QKV, O, gate-up, down),
/// of the elementwise kernels (two RMSNorms, RoPE, SwiGLU, residual add) and of one NCCL
/// all-reduce of the layer's N × hidden × 2 B activations: (model preset of the same shape,
/// gpu, tp, N, GEMMs, elementwise, one all-reduce).
const VIDUR_LAYER_US: [(&str, &str, u32, u32, f64, f64, f64); 33] = [
    ("llama-3.1-70b", "h100", 1, 256, 719.0, 45.0, 0.0),
    ("llama-3.1-70b", "h100", 1, 1024, 2759.0, 175.5, 0.0),
    ("llama-3.1-70b", "h100", 1, 4096, 10239.5, 777.5, 0.0),
    ("llama-3.1-70b", "h100", 2, 256, 375.5, 32.0, 43.0),
    ("llama-3.1-70b", "h100", 2, 1024, 1327.0, 113.0, 73.0),
    ("llama-3.1-70b", "h100", 2, 4096, 4898.0, 531.5, 245.0),
    ("llama-3.1-70b", "h100", 4, 256, 215.0, 25.0, 47.0),
    ("llama-3.1-70b", "h100", 4, 1024, 688.0, 88.0, 93.0),
    ("llama-3.1-70b", "h100", 4, 4096, 2383.0, 401.5, 318.0),
    ("llama-3.1-70b", "h100", 8, 256, 121.0, 23.0, 51.0),
    ("llama-3.1-70b", "h100", 8, 1024, 332.0, 76.0, 115.0),
    ("llama-3.1-70b", "h100", 8, 4096, 1166.0, 354.0, 322.0),
    ("llama-3.1-70b", "a100-80g", 1, 256, 2187.5, 117.0, 0.0),
    ("llama-3.1-70b", "a100-80g", 1, 1024, 8489.0, 365.0, 0.0),
    ("llama-3.1-70b", "a100-80g", 1, 4096, 30289.5, 1373.5, 0.0),
    ("llama-3.1-70b", "a100-80g", 2, 256, 1032.5, 68.5, 63.0),
    ("llama-3.1-70b", "a100-80g", 2, 1024, 4148.0, 235.0, 139.0),
    ("llama-3.1-70b", "a100-80g", 2, 4096, 15104.0, 932.5, 430.0),
    ("llama-3.1-70b", "a100-80g", 4, 256, 587.0, 50.0, 85.0),
    ("llama-3.1-70b", "a100-80g", 4, 1024, 2152.0, 182.0, 201.0),
    ("llama-3.1-70b", "a100-80g", 4, 4096, 7486.5, 712.0, 603.0),
    ("llama-3.1-70b", "a100-80g", 8, 256, 337.5, 45.0, 99.0),
    ("llama-3.1-70b", "a100-80g", 8, 1024, 1036.5, 144.0, 274.0),
    ("llama-3.1-70b", "a100-80g", 8, 4096, 3800.0, 606.5, 675.0),
    ("llama-3.1-8b", "a100-80g", 1, 256, 554.0, 55.0, 0.0),
    ("llama-3.1-8b", "a100-80g", 1, 1024, 2175.0, 173.0, 0.0),
    ("llama-3.1-8b", "a100-80g", 1, 4096, 7839.0, 710.0, 0.0),
    ("llama-3.1-8b", "a100-80g", 2, 256, 323.5, 38.0, 54.0),
    ("llama-3.1-8b", "a100-80g", 2, 1024, 1037.5, 110.0, 95.0),
    ("llama-3.1-8b", "a100-80g", 2, 4096, 3958.0, 484.0, 247.0),
    ("llama-3.1-8b", "a100-80g", 4, 256, 205.0, 30.0, 53.0),
    ("llama-3.1-8b", "a100-80g", 4, 1024, 574.5, 79.0, 123.0),
    ("llama-3.1-8b", "a100-80g", 4, 4096, 2025.5, 388.0, 319.0),
];

/// The operator-level points the cost model misses (tripwires): none since the GEMMs' ridge
/// loss (2026-12-07). The last, 256 tokens of an 8B model over two A100s, missed by a quarter
/// of its GEMMs (beside an NCCL all-reduce of 2 MB at 54 µs against the model's 22).
const KNOWN_LAYER_MISSES: [(&str, &str, u32, u32); 0] = [];

/// The cost model's layer GEMMs (with the elementwise kernels each worker repeats) and
/// all-reduces for a chunk of `tokens` prompt tokens (no
/// attention, logits or overheads), per layer, µs: (GEMMs, all-reduces).
fn simulated_layer_us(model: &str, gpu: &str, tp: u32, tokens: u32) -> (f64, f64) {
    let config = BatchingConfig {
        overheads: Some(StepOverheads::NONE),
        ..deploy(model, gpu, tp, DType::Bf16, EnginePolicy::Vllm)
    };
    let chunk = BatchEntry {
        new_tokens: tokens,
        context: 0,
        is_prefill: true,
        samples: false,
    };
    let cost = StepCostModel::new(&config).cost(&[chunk], false);
    let per_layer = 1e6 / f64::from(config.model.layers);
    (
        (cost.linear_secs() + cost.replicated_secs) * per_layer,
        cost.comm_secs * per_layer,
    )
}

/// Operator-level points (Vidur's layer profiles): the model's GEMMs + all-reduces per layer
/// against the profiled GEMMs + elementwise kernels + two all-reduces. Regime 1 (a kernel's
/// latency, ±20 %); the points the model misses are tripwires. Prints each term.
fn vidur_layers(table: &mut Table) {
    println!(
        "| layer | GEMMs sim / profiled µs | elementwise profiled µs | all-reduces sim / profiled µs |"
    );
    println!("|---|---:|---:|---:|");
    for (model, gpu, tp, tokens, gemms, elementwise, all_reduce) in VIDUR_LAYER_US {
        let (linear, comm) = simulated_layer_us(model, gpu, tp, tokens);
        let name = format!("Vidur {model} layer {gpu} TP{tp} N={tokens} µs");
        println!(
            "| {name} | {linear:.0} / {gemms:.0} | {elementwise:.0} | {comm:.0} / {:.0} |",
            2.0 * all_reduce
        );
        let published = gemms + elementwise + 2.0 * all_reduce;
        if KNOWN_LAYER_MISSES.contains(&(model, gpu, tp, tokens)) {
            table.miss(name, published, linear + comm, LATENCY);
        } else {
            table.add(name, published, linear + comm, LATENCY);
        }
    }
}

/// One row of SGLang's comparison: a deployment, a Poisson rate and the published medians.
struct ServingPoint {
    model: &'static str,
    gpu: &'static str,
    tp: u32,
    rate: f64,
    prompts: usize,
    /// SGLang's median TTFT and TPOT, ms.
    sglang: [f64; 2],
    /// vLLM's median TPOT, ms.
    vllm_tpot: f64,
}

/// SGLang's comparison of SGLang v0.3.0 with vLLM v0.6.0 (`sgl-project/sglang`
/// `benchmark/benchmark_vllm_060/README.md` @ 120affb9613cc3f5bcd055ec09c7621d3ced0ebc, "Online
/// benchmark results"): `bench_serving` on ShareGPT, Poisson arrivals, medians over the
/// requests. Llama 3.1 70B Instruct on 4 × H100 80G (TP4) and, as the one-GPU control, Llama
/// 3.1 8B Instruct on 1 × A100 80G.
const SGLANG_VS_VLLM: [ServingPoint; 4] = [
    ServingPoint {
        model: "llama-3.1-8b",
        gpu: "a100-80g",
        tp: 1,
        rate: 4.0,
        prompts: 1200,
        sglang: [31.98, 13.17],
        vllm_tpot: 14.14,
    },
    ServingPoint {
        model: "llama-3.1-8b",
        gpu: "a100-80g",
        tp: 1,
        rate: 8.0,
        prompts: 2400,
        sglang: [35.68, 17.85],
        vllm_tpot: 17.09,
    },
    ServingPoint {
        model: "llama-3.1-70b",
        gpu: "h100",
        tp: 4,
        rate: 4.0,
        prompts: 1200,
        sglang: [53.94, 25.03],
        vllm_tpot: 23.58,
    },
    ServingPoint {
        model: "llama-3.1-70b",
        gpu: "h100",
        tp: 4,
        rate: 8.0,
        prompts: 2400,
        sglang: [58.11, 33.07],
        vllm_tpot: 29.15,
    },
];

/// The published rows the model misses (tripwires): none yet.
const KNOWN_SERVING_MISSES: [&str; 0] = [];

/// ShareGPT stand-in requests arriving as Poisson at `rate` on `config`: (median TTFT, median
/// TPOT) in ms.
fn serve_sharegpt(config: &BatchingConfig, rate: f64, count: usize) -> (f64, f64) {
    let lengths = sharegpt::lengths(count, 11);
    let arrivals = sharegpt::poisson_arrivals(count, rate, 13);
    let requests = arrivals.into_iter().zip(lengths).enumerate();
    let arrivals =
        requests.map(|(id, (at, (prompt, answer)))| (at, request(id as u64, prompt, answer)));
    let engine = Box::new(BatchingEngine::new(config.clone(), 1));
    let sim = Simulation::run_open_loop(engine, arrivals);
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let ttft = sim
        .timelines()
        .iter()
        .filter_map(|t| t.ttft().map(ms))
        .collect();
    let tpot = sim
        .timelines()
        .iter()
        .filter_map(|t| t.tpot().map(ms))
        .collect();
    (median(ttft), median(tpot))
}

/// SGLang's and vLLM's published medians under Poisson load: SGLang with its defaults and the
/// README's memory fractions (0.88 on one GPU, 0.85 over four), vLLM 0.6.0 on the `vllm-v0`
/// policy as its server ran them (`--max_model_len 4096`: 256 sequences, 4096 tokens a step,
/// no chunked prefill, so prompts in steps of their own).
/// vLLM's TTFT and ITL are not compared: it ran `--num-scheduler-steps 10`, which delivers
/// tokens in bursts of ten, so only its TPOT is a per-token time.
fn sglang_vs_vllm_serving(table: &mut Table) {
    let mut row = |name: String, published: f64, simulated: f64| {
        if KNOWN_SERVING_MISSES.contains(&name.as_str()) {
            table.miss(name, published, simulated, SERVING);
        } else {
            table.add(name, published, simulated, SERVING);
        }
    };
    for point in SGLANG_VS_VLLM {
        let ServingPoint {
            model,
            gpu,
            tp,
            rate,
            prompts: count,
            sglang: [ttft, tpot],
            vllm_tpot,
        } = point;
        let sglang = BatchingConfig {
            gpu_memory_utilization: if tp > 1 { 0.85 } else { 0.88 },
            ..deploy(model, gpu, tp, DType::Bf16, EnginePolicy::Sglang)
        };
        let at = format!("{model} {gpu} TP{tp} {rate} req/s");
        let (sim_ttft, sim_tpot) = serve_sharegpt(&sglang, rate, count);
        row(format!("SGLang 0.3.0 {at} median TTFT ms"), ttft, sim_ttft);
        row(format!("SGLang 0.3.0 {at} median TPOT ms"), tpot, sim_tpot);
        // V0's own limits at that context: 256 sequences, 4096 tokens a step.
        let vllm = BatchingConfig {
            max_model_len: Some(4096),
            chunked_prefill: false,
            ..deploy(model, gpu, tp, DType::Bf16, EnginePolicy::VllmV0)
        };
        let (_, sim_tpot) = serve_sharegpt(&vllm, rate, count);
        row(
            format!("vLLM 0.6.0 {at} median TPOT ms"),
            vllm_tpot,
            sim_tpot,
        );
    }
}

#[test]
fn published_points_at_scale_within_their_tolerance() {
    let mut table = Table::default();
    vidur_layers(&mut table);
    vllm_h100_latency(&mut table);
    sglang_vs_vllm_serving(&mut table);
    trtllm_70b(&mut table);
    table.print_and_assert("docs/simulator.md");
}
