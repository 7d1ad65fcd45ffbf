//! Published disaggregated-serving results re-run on the simulator's prefill/decode pools in
//! virtual time, under the published conditions (`docs/validation.md`, "Disaggregated
//! serving"): DistServe's Figure 6 (OPT-13B on A100s: colocated, prefill-only, decode-only and
//! 2P1D goodput under P90 TTFT ≤ 0.4 s and TPOT ≤ 40 ms) and NVIDIA Dynamo's single-node
//! comparison (a 70B FP8 model on 8 × H100: 4 prefill TP1 + 1 decode TP4 against 2 × TP4
//! aggregated, 3000 in / 150 out). Figures read off published plots carry the loaded-serving
//! tolerance of the calibration set (±40 %). Prints the table `docs/validation.md` shows
//! (`cargo test -p goodput-sim --test published_disaggregation -- --nocapture`).
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use support::engine_request as request;
use support::published::Table;

use goodput_protocol::hardware::{DType, GpuSpec, ModelSpec};
use goodput_sim::config::{BatchingConfig, DisaggregationConfig, EngineConfig, EnginePolicy};
use goodput_sim::virtual_time::{RequestTimeline, Simulation};
use goodput_sim::{SimConfig, build_engine};

/// Relative tolerance of a figure read off a published loaded-serving plot (regime 3).
const LOADED: f64 = 0.40;

/// OPT-13B (40 layers, d 5120, 40 heads of 128, a 20480-wide two-matrix ReLU MLP, vocabulary
/// 50272, tied embeddings, 2048 context). The simulator's MLP is three `hidden × ffn` matrices
/// (SwiGLU): ffn 13653 = 2 · 20480 / 3 gives OPT's MLP parameters and FLOPs.
fn opt_13b() -> ModelSpec {
    ModelSpec {
        name: "opt-13b".into(),
        layers: 40,
        hidden: 5120,
        heads: 40,
        kv_heads: 40,
        head_dim: 128,
        ffn: 13653,
        vocab: 50272,
        tied_embeddings: true,
        max_context: 2048,
        weight_dtype: DType::Fp16,
        kv_dtype: DType::Fp16,
    }
}

/// DistServe's engines: vLLM of early 2024 (its baseline) computes a prompt in one step, no
/// chunking, 2048 batched tokens; prefix caching off (random prompts).
fn distserve_engine() -> BatchingConfig {
    BatchingConfig {
        model: opt_13b(),
        gpu: GpuSpec::preset("a100-80g").unwrap(),
        tensor_parallel: 1,
        chunked_prefill: false,
        prefix_caching: false,
        max_num_batched_tokens: Some(2048),
        policy: EnginePolicy::Vllm,
        ..BatchingConfig::default()
    }
}

/// `engine` alone, or as `prefill`P + `decode`D pools over a link of `link_gb_per_s`.
fn fleet(engine: BatchingConfig, pools: Option<(u32, u32)>, link_gb_per_s: f64) -> SimConfig {
    SimConfig {
        engine: EngineConfig::Batching(engine),
        disaggregation: pools.map(|(prefill, decode)| DisaggregationConfig {
            prefill_replicas: prefill,
            decode_replicas: decode,
            kv_link_gb_per_s: link_gb_per_s,
            ..DisaggregationConfig::default()
        }),
        ..SimConfig::default()
    }
}

/// A seeded xorshift64* stream of unit exponential gaps: the same gaps scaled by 1/rate at
/// every rate (common random numbers keep the attainment monotone in the rate).
fn unit_gaps(count: usize, seed: u64) -> Vec<f64> {
    let mut state = seed.max(1);
    (0..count)
        .map(|_| {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            let bits = state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11;
            let uniform = (bits as f64 + 0.5) / (1u64 << 53) as f64;
            -uniform.ln()
        })
        .collect()
}

/// What a request must meet: TTFT and TPOT bounds (either may be absent).
#[derive(Clone, Copy)]
struct Slo {
    ttft: Option<f64>,
    tpot: Option<f64>,
}

impl Slo {
    fn met(self, t: &RequestTimeline) -> bool {
        let Some(ttft) = t.ttft().filter(|_| t.finished.is_some()) else {
            return false;
        };
        let ttft_ok = self.ttft.is_none_or(|bound| ttft.as_secs_f64() <= bound);
        let tpot_ok = self
            .tpot
            .is_none_or(|bound| t.tpot().is_none_or(|tpot| tpot.as_secs_f64() <= bound));
        ttft_ok && tpot_ok
    }
}

/// Fraction of `prompt`/`output` requests arriving as Poisson at `rate` that meet `slo`.
fn attainment(config: &SimConfig, rate: f64, prompt: u32, output: u32, slo: Slo) -> f64 {
    let gaps = unit_gaps(600, 7);
    let mut at = 0.0;
    let arrivals: Vec<(Duration, _)> = gaps
        .iter()
        .enumerate()
        .map(|(id, gap)| {
            at += gap / rate;
            (
                Duration::from_secs_f64(at),
                request(id as u64, prompt, output),
            )
        })
        .collect();
    let sim = Simulation::run_open_loop(build_engine(config), arrivals);
    let timelines = sim.timelines();
    let met = timelines.iter().filter(|t| slo.met(t)).count();
    met as f64 / timelines.len() as f64
}

/// The highest Poisson rate at which 90 % of requests meet `slo` (DistServe's goodput), to 1 %.
fn goodput(config: &SimConfig, prompt: u32, output: u32, slo: Slo) -> f64 {
    let passes = |rate: f64| attainment(config, rate, prompt, output, slo) >= 0.9;
    let (mut low, mut high) = (0.0, 1.0);
    while passes(high) {
        low = high;
        high *= 2.0;
        assert!(high < 1e4, "no rate fails");
    }
    while high - low > 0.01 * high {
        let mid = (low + high) / 2.0;
        if passes(mid) {
            low = mid;
        } else {
            high = mid;
        }
    }
    low
}

/// What the DistServe miss comes from: one prompt's prefill, and 25 sequences decoding together.
fn explain_distserve_miss() {
    let unloaded = |count: u64| {
        let arrivals = (0..count).map(|id| (Duration::ZERO, request(id, 512, 64)));
        let config = fleet(distserve_engine(), Some((count as u32, 1)), 300.0);
        let sim = Simulation::run_open_loop(build_engine(&config), arrivals);
        let t = &sim.timelines()[0];
        (t.ttft().unwrap(), t.tpot().unwrap())
    };
    println!(
        "OPT-13B on an A100: 512-token prefill {:?}; TPOT of 25 decoding together {:?}",
        unloaded(1).0,
        unloaded(25).1
    );
}

/// DistServe Figure 6 (Zhong et al., OSDI '24; the authors' blog of 2024-03-17): OPT-13B on
/// A100-80GB, 512 in / 64 out, Poisson arrivals; goodput under P90 TTFT ≤ 0.4 s and P90 TPOT
/// ≤ 40 ms (90 % of requests meeting both). Prefill and decode workers share an NVLink node
/// (A100 NVLink: 300 GB/s each way).
fn distserve(table: &mut Table) {
    let both = Slo {
        ttft: Some(0.4),
        tpot: Some(0.04),
    };
    explain_distserve_miss();
    let colocated = goodput(&fleet(distserve_engine(), None, 300.0), 512, 64, both);
    // The absolute rates miss (the simulator's A100 runs OPT-13B 2–4× faster than the
    // systems of early 2024 did); the relative gain of 2P1D is the check.
    table.miss(
        "DistServe colocated 1×A100 goodput req/s",
        1.6,
        colocated,
        LOADED,
    );
    let prefill_only = Slo {
        ttft: Some(0.4),
        tpot: None,
    };
    let prefill = goodput(
        &fleet(distserve_engine(), None, 300.0),
        512,
        1,
        prefill_only,
    );
    table.miss("DistServe prefill-only worker req/s", 5.6, prefill, LOADED);
    let decode_only = Slo {
        ttft: None,
        tpot: Some(0.04),
    };
    let decode = goodput(
        &fleet(distserve_engine(), Some((4, 1)), 300.0),
        512,
        64,
        decode_only,
    );
    table.miss("DistServe decode-only worker req/s", 10.0, decode, LOADED);
    let split = goodput(
        &fleet(distserve_engine(), Some((2, 1)), 300.0),
        512,
        64,
        both,
    );
    table.miss("DistServe 2P1D goodput req/s", 10.0, split, LOADED);
    table.add(
        "DistServe 2P1D ÷ colocated, per GPU",
        (10.0 / 3.0) / 1.6,
        (split / 3.0) / colocated,
        LOADED,
    );
}

/// Dynamo's engines: DeepSeek-R1-Distill-Llama-70B (Llama-3.3-70B's architecture, the
/// `llama-3.1-70b` preset) with FP8 weights and 16-bit KV on H100s, vLLM with block 128,
/// 3500 batched tokens and context, memory utilisation 0.95.
fn dynamo_engine(tensor_parallel: u32) -> BatchingConfig {
    let mut model = ModelSpec::preset("llama-3.1-70b").unwrap();
    model.weight_dtype = DType::Fp8;
    BatchingConfig {
        model,
        gpu: GpuSpec::preset("h100").unwrap(),
        tensor_parallel,
        gpu_memory_utilization: 0.95,
        block_size: 128,
        max_model_len: Some(3500),
        max_num_batched_tokens: Some(3500),
        chunked_prefill: false,
        prefix_caching: false,
        policy: EnginePolicy::Vllm,
        ..BatchingConfig::default()
    }
}

/// One closed-loop point: (output tokens/s per GPU, output tokens/s per user = 150 ÷ E2E).
fn closed_loop(config: &SimConfig, gpus: f64, concurrency: u64) -> (f64, f64) {
    let (prompt, output, total) = (3000, 150, concurrency * 6);
    let mut sim = Simulation::new(build_engine(config));
    // Clients start 50 ms apart, as a benchmark's do not start in one instant.
    support::run_closed_loop(
        &mut sim,
        (concurrency, total),
        Duration::from_millis(50),
        (prompt, output),
    );
    // The window after the first wave: requests sent from the first finish on.
    let timelines: Vec<&RequestTimeline> = sim
        .timelines()
        .iter()
        .filter(|t| t.id >= concurrency && t.finished.is_some())
        .collect();
    let start = timelines.iter().map(|t| t.arrival).min().unwrap();
    let end = timelines
        .iter()
        .map(|t| t.finished.unwrap().0)
        .max()
        .unwrap();
    let tokens = (timelines.len() as f64) * f64::from(output);
    let per_gpu = tokens / (end - start).as_secs_f64() / gpus;
    let per_user = timelines
        .iter()
        .map(|t| f64::from(output) / t.e2e().unwrap().as_secs_f64())
        .sum::<f64>()
        / timelines.len() as f64;
    (per_gpu, per_user)
}

/// Throughput per GPU at `per_user` tokens/s per user, interpolated along the points of
/// increasing concurrency (per-user speed falls as concurrency rises).
fn at_interactivity(points: &[(f64, f64)], per_user: f64) -> f64 {
    for pair in points.windows(2) {
        let ((g0, u0), (g1, u1)) = (pair[0], pair[1]);
        if (u1..=u0).contains(&per_user) {
            return g0 + (g1 - g0) * (u0 - per_user) / (u0 - u1);
        }
    }
    panic!("{per_user} tokens/s/user outside {points:?}");
}

/// Closed-loop points of increasing concurrency: (output tokens/s per GPU, tokens/s per user).
type Frontier = Vec<(f64, f64)>;

/// The aggregated and disaggregated frontiers of `nodes` 8 × H100 nodes: vLLM as 2 replicas of
/// TP 4·`nodes` (TP4 on one node, TP8 on two) against 4·`nodes` prefill TP1 engines and one
/// decode engine of TP 4·`nodes`.
fn dynamo_frontiers(nodes: u32) -> (Frontier, Frontier) {
    let concurrencies = [4, 8, 16, 32, 64, 128];
    let gpus = f64::from(8 * nodes);
    let aggregated = SimConfig {
        replicas: 2,
        ..fleet(dynamo_engine(4 * nodes), None, 450.0)
    };
    let mut split = fleet(dynamo_engine(1), Some((4 * nodes, 1)), 450.0);
    if let Some(pools) = &mut split.disaggregation {
        pools.decode_tensor_parallel = Some(4 * nodes);
        if nodes > 1 {
            // Across nodes the KV crosses one 400 Gb/s InfiniBand NIC per GPU.
            pools.kv_link_gb_per_s = 50.0;
        }
    }
    let frontier = |config: &SimConfig| -> Frontier {
        concurrencies
            .iter()
            .map(|c| closed_loop(config, gpus, *c * u64::from(nodes)))
            .collect()
    };
    let (aggregated, split) = (frontier(&aggregated), frontier(&split));
    println!("{nodes} node(s), aggregated (tok/s/GPU, tok/s/user): {aggregated:.1?}");
    println!("{nodes} node(s), disaggregated: {split:.1?}");
    (aggregated, split)
}

/// NVIDIA Dynamo (docs/architecture.md: "for Llama 70B, single-node tests show a 30 %
/// throughput/GPU improvement, while two-node setups achieve over 2X gains";
/// examples/llm/benchmarks/README.md: one node is 4 prefill TP1 + 1 decode TP4 against vLLM
/// 2 × TP4, two nodes 8 prefill TP1 + 1 decode TP8 against 2 × TP8, 3000 in / 150 out,
/// GenAI-Perf closed loop; its example Pareto plot reads 145 against 80 tokens/s/GPU at 45
/// tokens/s per user). Throughput per GPU at 45 tokens/s per user, the README's operating
/// point; the gains' own operating points are not stated. Links: NVLink 4 within a node (450
/// GB/s each way), one 400 Gb/s NIC per GPU across nodes.
fn dynamo(table: &mut Table) {
    let (aggregated, split) = dynamo_frontiers(1);
    let (aggregated, split) = (
        at_interactivity(&aggregated, 45.0),
        at_interactivity(&split, 45.0),
    );
    table.add(
        "Dynamo 1 node 4P(TP1)+1D(TP4) tok/s/GPU at 45 tok/s/user",
        145.0,
        split,
        LOADED,
    );
    table.add(
        "Dynamo 1 node vLLM 2×TP4 tok/s/GPU at 45 tok/s/user",
        80.0,
        aggregated,
        LOADED,
    );
    table.add(
        "Dynamo 1 node disaggregated ÷ aggregated, per GPU",
        1.3,
        split / aggregated,
        LOADED,
    );
    let (aggregated, split) = dynamo_frontiers(2);
    let ratio = at_interactivity(&split, 45.0) / at_interactivity(&aggregated, 45.0);
    table.add(
        "Dynamo 2 nodes disaggregated ÷ aggregated, per GPU",
        2.0,
        ratio,
        LOADED,
    );
}

#[test]
fn published_disaggregated_serving_results_within_their_tolerance() {
    let mut table = Table::default();
    distserve(&mut table);
    dynamo(&mut table);
    table.print_and_assert("docs/validation.md");
}
