//! The textbook behaviours of a continuous-batching server, reproduced by the batching engine
//! in virtual time: saturation, the bandwidth-bound decode floor, KV exhaustion, prefill
//! interference and chunked prefill, prefix caching, speculative decoding.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use support::engine_request as request;

use goodput_protocol::hardware::GpuSpec;
use goodput_sim::config::{
    BatchingConfig, EngineConfig, EnginePolicy, SimConfig, SlotPromptSimilarity, SpeculativeConfig,
};
use goodput_sim::engine::batching::BatchingEngine;
use goodput_sim::engine::{EngineEvent, EngineRequest, StepSummary};
use goodput_sim::virtual_time::Simulation;
use goodput_sim::{Engine, build_engine};

fn engine(config: BatchingConfig) -> Box<dyn Engine> {
    let config = SimConfig {
        engine: EngineConfig::Batching(config),
        ..SimConfig::default()
    };
    config.validate().unwrap();
    build_engine(&config)
}

/// Closed loop of `concurrency` requests for `total` requests; returns (output tokens/s,
/// mean TTFT).
fn closed_loop(concurrency: u32, total: u64, prompt: u32, output: u32) -> (f64, Duration) {
    closed_loop_on(
        BatchingConfig::default(),
        concurrency,
        total,
        prompt,
        output,
    )
}

/// [`closed_loop`] on `config`.
fn closed_loop_on(
    config: BatchingConfig,
    concurrency: u32,
    total: u64,
    prompt: u32,
    output: u32,
) -> (f64, Duration) {
    let mut sim = Simulation::new(engine(config));
    support::run_closed_loop(
        &mut sim,
        (u64::from(concurrency), total),
        Duration::ZERO,
        (prompt, output),
    );
    let timelines = sim.timelines();
    let elapsed = timelines
        .iter()
        .filter_map(|t| t.finished.map(|(at, _)| at))
        .max()
        .unwrap();
    let tokens: u32 = timelines.iter().map(|t| t.output_tokens()).sum();
    let ttft: Duration = timelines
        .iter()
        .map(|t| t.ttft().unwrap())
        .sum::<Duration>()
        / timelines.len() as u32;
    (f64::from(tokens) / elapsed.as_secs_f64(), ttft)
}

#[test]
fn throughput_rises_with_concurrency_then_saturates() {
    let rates: Vec<f64> = [1, 8, 64, 256]
        .iter()
        .map(|&c| closed_loop(c, u64::from(c) * 4, 512, 256).0)
        .collect();
    assert!(rates[1] > 5.0 * rates[0], "{rates:?}");
    assert!(rates[2] > 3.0 * rates[1], "{rates:?}");
    assert!(
        rates[3] < 2.5 * rates[2],
        "gains flatten at high batch: {rates:?}"
    );
}

#[test]
fn past_saturation_ttft_grows_with_queueing_while_output_rate_stays_flat() {
    // max_num_seqs 256: beyond it requests queue for a slot.
    let config = BatchingConfig {
        max_num_seqs: Some(256),
        ..BatchingConfig::default()
    };
    let (rate_256, ttft_256) = closed_loop_on(config.clone(), 256, 1024, 256, 256);
    let (rate_768, ttft_768) = closed_loop_on(config, 768, 3072, 256, 256);
    assert!(
        (rate_768 - rate_256).abs() / rate_256 < 0.15,
        "{rate_256} vs {rate_768}"
    );
    assert!(ttft_768 > ttft_256 * 3, "{ttft_256:?} vs {ttft_768:?}");
}

#[test]
fn the_default_batch_limits_are_the_engines_own_on_each_accelerator() {
    // vLLM V1's OpenAI server: 1024 sequences and 8192 tokens on 70 GiB or more (not A100s),
    // 256 and 2048 below or on an A100; TensorRT-LLM 2048 and 8192.
    let on = |gpu: &str, policy: EnginePolicy| {
        let config = BatchingConfig {
            gpu: GpuSpec::preset(gpu).unwrap(),
            policy,
            ..BatchingConfig::default()
        };
        (config.max_num_seqs(), config.max_num_batched_tokens())
    };
    assert_eq!(on("h100", EnginePolicy::Vllm), (1024, 8192));
    assert_eq!(on("h200", EnginePolicy::Vllm), (1024, 8192));
    assert_eq!(on("a100", EnginePolicy::Vllm), (256, 2048));
    assert_eq!(on("l40s", EnginePolicy::Vllm), (256, 2048));
    assert_eq!(on("h100", EnginePolicy::TensorrtLlm), (2048, 8192));
    // vLLM V0: 256 sequences and max(context, 2048) tokens, 512 with chunked prefill (the
    // default context is the model's 131072; 4096 when the server is started with it).
    let v0 = |chunked_prefill, max_model_len| {
        let config = BatchingConfig {
            policy: EnginePolicy::VllmV0,
            chunked_prefill,
            max_model_len,
            ..BatchingConfig::default()
        };
        (config.max_num_seqs(), config.max_num_batched_tokens())
    };
    assert_eq!(v0(false, Some(4096)), (256, 4096));
    assert_eq!(v0(false, Some(1024)), (256, 2048));
    assert_eq!(v0(true, Some(4096)), (256, 512));
    // SGLang: kv_tokens / context · 512 within 2048…4096; 8192 tokens under 160 GiB, 16384 over.
    let (seqs, tokens) = on("h100", EnginePolicy::Sglang);
    assert!((2048..=4096).contains(&seqs), "{seqs}");
    assert_eq!(tokens, 8192);
    assert_eq!(on("b200", EnginePolicy::Sglang).1, 16384);
    assert_eq!(on("l40s", EnginePolicy::Sglang).1, 8192);
    // A configured limit wins.
    let set = BatchingConfig {
        max_num_seqs: Some(7),
        max_num_batched_tokens: Some(300),
        ..BatchingConfig::default()
    };
    assert_eq!((set.max_num_seqs(), set.max_num_batched_tokens()), (7, 300));
}

#[test]
fn batch_one_decode_step_is_weight_bytes_over_bandwidth_plus_overhead() {
    let config = BatchingConfig::default();
    let weights_secs = config.model.streamed_weight_bytes()
        / (config.gpu.hbm_tb_per_sec * 1e12 * config.gpu.bandwidth_efficiency);
    let o = config.effective_overheads();
    let overhead_secs = (o.per_step_us + o.per_layer_us * 32.0 + o.per_sequence_us) * 1e-6;
    let sim = Simulation::run_open_loop(engine(config), [(Duration::ZERO, request(1, 128, 64))]);
    let timeline = sim.timeline(1).unwrap();
    let gaps: Vec<Duration> = timeline.delivery_gaps().collect();
    let expected = weights_secs + overhead_secs;
    for gap in &gaps {
        let error = (gap.as_secs_f64() - expected).abs() / expected;
        assert!(error < 0.02, "step {gap:?}, expected {expected} s");
    }
    // vLLM on an H100: ~5.6 ms of weights at 0.8 of 3.35 TB/s and ~2.2 ms of step overhead.
    assert!((0.0070..0.0085).contains(&expected));
}

#[test]
fn kv_exhaustion_preempts_and_refuses_instead_of_growing_without_bound() {
    let config = BatchingConfig {
        kv_blocks_override: Some(256),
        max_waiting: 16,
        ..BatchingConfig::default()
    };
    // 40 long requests at once: 256 blocks of 16 tokens hold 4096 tokens, far less than needed.
    let arrivals = (0..40).map(|id| (Duration::ZERO, request(id, 200, 600)));
    let sim = Simulation::run_open_loop(engine(config), arrivals);
    let refused = sim
        .timelines()
        .iter()
        .filter(|t| t.rejected.is_some())
        .count();
    let preemptions: u32 = sim.timelines().iter().map(|t| t.preemptions).sum();
    assert!(refused > 0, "the bounded queue refuses the excess");
    assert!(preemptions > 0, "decode growth preempts");
    let completed = sim
        .timelines()
        .iter()
        .filter(|t| t.finished.is_some())
        .count();
    assert_eq!(completed + refused, 40, "everything admitted completes");
    assert_eq!(
        sim.engine().stats().preemptions_total,
        u64::from(preemptions)
    );
}

#[test]
fn by_default_the_waiting_queue_takes_every_request_as_vllm_does() {
    // 3,000 requests at once (trtllm-bench and `--request-rate inf` send thousands): the
    // engines the simulator mimics queue them all; none is refused.
    let arrivals = (0..3_000).map(|id| (Duration::ZERO, request(id, 16, 2)));
    let sim = Simulation::run_open_loop(engine(BatchingConfig::default()), arrivals);
    let refused = sim.timelines().iter().filter(|t| t.rejected.is_some());
    assert_eq!(refused.count(), 0);
    let finished = sim.timelines().iter().filter(|t| t.finished.is_some());
    assert_eq!(finished.count(), 3_000);
}

/// Worst gap between token deliveries of decoding requests while a long prompt arrives.
fn worst_itl_with_long_prefill(chunked: bool) -> Duration {
    let config = BatchingConfig {
        chunked_prefill: chunked,
        max_num_batched_tokens: Some(512),
        ..BatchingConfig::default()
    };
    let mut arrivals: Vec<(Duration, EngineRequest)> = (0..8)
        .map(|id| (Duration::ZERO, request(id, 64, 400)))
        .collect();
    arrivals.push((Duration::from_millis(300), request(100, 8000, 4)));
    let sim = Simulation::run_open_loop(engine(config), arrivals);
    (0..8)
        .flat_map(|id| {
            sim.timeline(id)
                .unwrap()
                .delivery_gaps()
                .collect::<Vec<_>>()
        })
        .max()
        .unwrap()
}

#[test]
fn a_long_prefill_spikes_itl_and_chunked_prefill_shrinks_the_spike() {
    let whole = worst_itl_with_long_prefill(false);
    let chunked = worst_itl_with_long_prefill(true);
    assert!(
        whole > Duration::from_millis(200),
        "an 8k-token prefill step stalls decodes: {whole:?}"
    );
    assert!(
        chunked < whole / 4,
        "chunked {chunked:?} vs whole {whole:?}"
    );
}

fn mean_ttft_with_shared_prefix(prefix_caching: bool) -> Duration {
    let config = BatchingConfig {
        prefix_caching,
        ..BatchingConfig::default()
    };
    // 2048-token shared system prompt (128 blocks) + a 64-token unique tail.
    let shared: Vec<u64> = (0..128).map(|i| 0xabc0_0000 + i).collect();
    let arrivals = (0..20).map(|id| {
        let mut hashes = shared.clone();
        hashes.extend((0..4).map(|j| id * 1000 + j));
        let request = EngineRequest {
            id,
            prompt_tokens: 2048 + 64,
            block_hashes: hashes,
            max_output_tokens: 16,
            stop_after_tokens: 16,
        };
        (Duration::from_millis(200 * id), request)
    });
    let sim = Simulation::run_open_loop(engine(config), arrivals);
    let later: Vec<Duration> = sim.timelines()[1..]
        .iter()
        .map(|t| t.ttft().unwrap())
        .collect();
    later.iter().sum::<Duration>() / later.len() as u32
}

#[test]
fn shared_prefixes_lower_ttft_with_prefix_caching() {
    let cached = mean_ttft_with_shared_prefix(true);
    let uncached = mean_ttft_with_shared_prefix(false);
    assert!(
        cached * 3 < uncached,
        "cached {cached:?} vs uncached {uncached:?}"
    );
}

#[test]
fn speculative_decoding_raises_tokens_per_step_by_the_expected_factor() {
    let speculative = SpeculativeConfig {
        acceptance: vec![0.8, 0.6, 0.4],
        draft_cost_ratio: 0.05,
    };
    let expected = speculative.expected_tokens_per_step();
    let config = BatchingConfig {
        speculative: Some(speculative),
        ..BatchingConfig::default()
    };
    let arrivals = (0..16).map(|id| (Duration::ZERO, request(id, 32, 4000)));
    let sim = Simulation::run_open_loop(Box::new(BatchingEngine::new(config, 11)), arrivals);
    let mut tokens = 0u32;
    let mut steps = 0u32;
    for timeline in sim.timelines() {
        // Skip the prefill's token and the last delivery (clamped at the output limit).
        let decode = &timeline.deliveries[1..timeline.deliveries.len() - 1];
        tokens += decode.iter().map(|(_, count)| count).sum::<u32>();
        steps += u32::try_from(decode.len()).unwrap();
    }
    let mean = f64::from(tokens) / f64::from(steps);
    assert!(
        (mean - expected).abs() < 0.03,
        "mean {mean} vs expected {expected}"
    );
    let stats = sim.engine().stats().speculative;
    let per_draft = stats.accepted_tokens as f64 / stats.drafts as f64;
    assert!((per_draft + 1.0 - expected).abs() < 0.03, "{stats:?}");
}

/// Preemptions and completions of 20 long requests on a 256-block cache under `policy`.
fn preemptions_under(policy: EnginePolicy) -> (u32, usize) {
    let config = BatchingConfig {
        kv_blocks_override: Some(256),
        policy,
        ..BatchingConfig::default()
    };
    let arrivals = (0..20).map(|id| (Duration::ZERO, request(id, 200, 600)));
    let sim = Simulation::run_open_loop(engine(config), arrivals);
    let preemptions = sim.timelines().iter().map(|t| t.preemptions).sum();
    let completed = sim
        .timelines()
        .iter()
        .filter(|t| t.finished.is_some())
        .count();
    (preemptions, completed)
}

#[test]
fn no_evict_admission_never_preempts_where_vllm_preempts_and_recomputes() {
    let (vllm, vllm_done) = preemptions_under(EnginePolicy::Vllm);
    let (trt, trt_done) = preemptions_under(EnginePolicy::TensorrtLlm);
    assert!(vllm > 0, "on-demand allocation overcommits and preempts");
    assert_eq!(trt, 0, "reserving the whole answer never evicts");
    assert_eq!((vllm_done, trt_done), (20, 20));
}

#[test]
fn the_frontend_latency_adds_to_ttft_without_taking_engine_time() {
    let config = BatchingConfig::default();
    let frontend = Duration::from_secs_f64(config.effective_overheads().frontend_us * 1e-6);
    let sim = Simulation::run_open_loop(engine(config), [(Duration::ZERO, request(1, 128, 4))]);
    let timeline = sim.timeline(1).unwrap();
    assert_eq!(timeline.queue_time(), Some(frontend));
    let step = sim.steps()[0];
    assert_eq!(timeline.ttft(), Some(frontend + step.duration));
}

#[test]
fn requests_reaching_an_idle_engine_together_share_their_first_step() {
    for frontend_us in [0.0, 4000.0] {
        let mut config = BatchingConfig::default();
        let mut overheads = config.effective_overheads();
        overheads.frontend_us = frontend_us;
        config.overheads = Some(overheads);
        let mut sim = Simulation::new(engine(config));
        for id in 0..2 {
            sim.submit(Duration::ZERO, request(id, 512, 4));
        }
        sim.submit(Duration::from_micros(1), request(2, 512, 4));
        while !sim.run_next().is_empty() {}
        let ttfts: Vec<Duration> = sim.timelines().iter().map(|t| t.ttft().unwrap()).collect();
        // One step for the two sent together (as a server batches what is queued when its
        // loop wakes); the one a microsecond later waits for that step to end.
        assert_eq!(ttfts[0], ttfts[1], "frontend {frontend_us} µs: {ttfts:?}");
        assert!(
            ttfts[2] > ttfts[0] + Duration::from_millis(5),
            "frontend {frontend_us} µs: {ttfts:?}"
        );
    }
}

/// A server `k` times as fast serves every request in `1 / k` of the time: at speed 2 every
/// median of a closed loop mixing prompts with decodes halves and the throughput doubles, for
/// the roofline engine (with its overheads and a tensor-parallel all-reduce) and fixed timing.
#[test]
fn a_configuration_at_twice_the_speed_takes_half_the_time() {
    use goodput_sim::calibrate::{ProbeShape, predict};
    use goodput_sim::config::FixedTimingConfig;
    let shape = ProbeShape {
        concurrency: 6,
        prompt_tokens: 700,
        output_tokens: 40,
        requests: 18,
    };
    let batching = |tensor_parallel| {
        EngineConfig::Batching(BatchingConfig {
            tensor_parallel,
            max_num_seqs: Some(4),
            ..BatchingConfig::default()
        })
    };
    let engines = [
        batching(1),
        batching(2),
        EngineConfig::Fixed(FixedTimingConfig {
            slots: 4,
            ..FixedTimingConfig::default()
        }),
    ];
    for engine in engines {
        let config = SimConfig {
            engine,
            ..SimConfig::default()
        };
        let fast = config.at_speed(2.0).unwrap();
        fast.validate().unwrap();
        let (slow, fast) = (predict(&config, &shape), predict(&fast, &shape));
        let close = |a: f64, b: f64| (a / b - 1.0).abs() < 1e-6;
        for (name, s, f) in [
            ("ttft", slow.ttft, fast.ttft),
            ("tpot", slow.tpot, fast.tpot),
            ("e2e", slow.e2e, fast.e2e),
        ] {
            assert!(
                s > 0.0 && close(f * 2.0, s),
                "{name}: {s} at speed 1, {f} at 2"
            );
        }
        assert!(close(fast.requests_per_sec, 2.0 * slow.requests_per_sec));
    }
    let config = SimConfig::default();
    for factor in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(config.at_speed(factor).is_none(), "{factor}");
    }
}

/// TPOT of each round of a closed loop of 3 clients re-sending at once (identical requests,
/// no frontend delay), on 4 sequence slots with or without llama.cpp's micro-batches by slot.
fn round_tpots(slot_ubatch_tokens: Option<u32>) -> Vec<Duration> {
    let config = BatchingConfig {
        slot_ubatch_tokens,
        ..BatchingConfig::default()
    };
    rounds_of(config, 64)
}

/// TPOT of each round of 3 clients of `prompt_tokens` → 32 re-sending at once on `config`
/// with 4 sequence slots and no frontend delay.
fn rounds_of(mut config: BatchingConfig, prompt_tokens: u32) -> Vec<Duration> {
    config.max_num_seqs = Some(4);
    let mut overheads = config.effective_overheads();
    overheads.frontend_us = 0.0;
    config.overheads = Some(overheads);
    let mut sim = Simulation::new(engine(config));
    let mut next = 0;
    let mut rounds = Vec::new();
    while rounds.len() < 6 {
        for _ in 0..3 {
            sim.submit(sim.now(), request(next, prompt_tokens, 32));
            next += 1;
        }
        sim.run_until_idle();
        let tpots: Vec<Duration> = (next - 3..next)
            .map(|id| sim.timeline(id).unwrap().tpot().unwrap())
            .collect();
        assert!(tpots.iter().all(|t| *t == tpots[0]), "{tpots:?}");
        rounds.push(tpots[0]);
    }
    rounds
}

/// llama.cpp gives each request the slot released longest ago: three clients on four slots
/// take slots {1, 2, 3}, {0, 1, 2}, then {0, 1, 3} and {0, 1, 2} by turns, and decodes in
/// slots that are not consecutive run as two micro-batches, each reading the weights (on the
/// real server, two decoders in slots 0 and 1: TPOT 19.5 ms; in slots 0 and 2: 27.1 ms).
#[test]
fn decodes_in_slots_with_a_gap_take_two_micro_batches_by_turns() {
    let one_batch = round_tpots(None);
    assert!(
        one_batch.iter().all(|t| *t == one_batch[0]),
        "{one_batch:?}"
    );
    let by_slot = round_tpots(Some(512));
    let (together, split) = (by_slot[1], by_slot[2]);
    assert_eq!(by_slot[0], together, "{by_slot:?}");
    assert!(
        split.as_secs_f64() > 1.5 * together.as_secs_f64(),
        "{by_slot:?}"
    );
    assert_eq!(&by_slot[3..], &[together, split, together], "{by_slot:?}");
    assert_eq!(together, one_batch[0]);
}

/// llama.cpp gives a prompt sharing more than `--slot-prompt-similarity` of itself with a free
/// slot's last prompt that slot (the lowest such), before the one released longest ago: short
/// prompts sharing the template's header return to the slots just released and keep decoding
/// as one micro-batch; long ones share too small a fraction and go by age, by turns.
#[test]
fn short_prompts_return_to_the_slots_just_released() {
    let similar = BatchingConfig {
        slot_ubatch_tokens: Some(512),
        slot_prompt_similarity: Some(SlotPromptSimilarity {
            threshold: 0.1,
            shared_prefix_tokens: 10,
        }),
        ..BatchingConfig::default()
    };
    let short = rounds_of(similar.clone(), 64);
    assert!(short.iter().all(|t| *t == short[0]), "{short:?}");
    assert_eq!(short[0], round_tpots(Some(512))[0]);
    let long = rounds_of(similar, 200);
    assert!(
        long[2].as_secs_f64() > 1.5 * long[1].as_secs_f64(),
        "{long:?}"
    );
}

/// The steps of a closed loop of 5 clients of 256 → 24 re-sending the instant their answers end
/// (no frontend delay) on 4 sequence slots, 24 requests, and every request's TPOT.
fn five_clients_on_four_slots(launch_window_us: Option<f64>) -> (Vec<StepSummary>, Vec<Duration>) {
    let mut overheads = BatchingConfig::default().effective_overheads();
    overheads.frontend_us = 0.0;
    let config = BatchingConfig {
        max_num_seqs: Some(4),
        overheads: Some(overheads),
        launch_window_us,
        ..BatchingConfig::default()
    };
    let mut sim = Simulation::new(engine(config));
    let (mut next, total) = (0, 24);
    while next < 5 {
        sim.submit(Duration::ZERO, request(next, 256, 24));
        next += 1;
    }
    let mut steps = Vec::new();
    loop {
        let events = sim.run_next();
        if events.is_empty() {
            break;
        }
        for event in events {
            match event {
                EngineEvent::Step(summary) => steps.push(summary),
                EngineEvent::Tokens {
                    finished: Some(_), ..
                } if next < total => {
                    sim.submit(sim.now(), request(next, 256, 24));
                    next += 1;
                }
                _ => {}
            }
        }
    }
    let tpots = (0..total)
        .map(|id| sim.timeline(id).unwrap().tpot().unwrap())
        .collect();
    (steps, tpots)
}

/// Beyond its slots llama-server holds the batch of a step that launches a waiting request
/// open while it launches it, and clients re-sending at once join it: every round is four
/// prompts in one step, then decode steps of four, and every TPOT is that decode step. Without
/// the window a request arriving as the launching step starts waits for the next one, and a
/// prompt rides in the others' decode steps from the second round on.
#[test]
fn a_launch_window_keeps_clients_beyond_the_slots_in_step() {
    let window = Duration::from_micros(500);
    let (steps, tpots) = five_clients_on_four_slots(Some(500.0));
    let mixed = |s: &StepSummary| s.prefill_tokens > 0 && s.prefill_tokens < s.batched_tokens;
    assert!(!steps.iter().any(mixed), "{steps:?}");
    let prompt_steps: Vec<&StepSummary> = steps.iter().filter(|s| s.prefill_tokens > 0).collect();
    assert!(
        prompt_steps.iter().all(|s| s.prefill_tokens == 4 * 256),
        "{prompt_steps:?}"
    );
    assert_eq!(prompt_steps.len(), 6);
    // Every TPOT is the first round's 23 decode steps of four, one after the other.
    let round: Vec<&StepSummary> = steps[1..24].iter().collect();
    assert!(
        round
            .iter()
            .all(|s| s.prefill_tokens == 0 && s.sequences == 4)
    );
    let in_step = round.iter().map(|s| s.duration).sum::<Duration>() / 23;
    assert!(tpots.iter().all(|t| *t == in_step), "{tpots:?}");
    // A step launching the waiting requests starts one window after the step before it ends.
    for pair in steps.windows(2) {
        let gap = pair[1].started - (pair[0].started + pair[0].duration);
        let launches = pair[1].prefill_tokens > 0;
        let expected = if launches { window } else { Duration::ZERO };
        assert_eq!(gap, expected, "{pair:?}");
    }
    let (steps, tpots) = five_clients_on_four_slots(None);
    assert!(steps.iter().any(mixed), "{steps:?}");
    assert!(
        tpots.iter().filter(|t| **t > in_step).count() >= tpots.len() / 2,
        "{tpots:?}"
    );
}
