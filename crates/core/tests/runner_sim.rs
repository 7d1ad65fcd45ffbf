//! The runner against the simulator's fixed-timing engine over in-memory connections in
//! virtual time: measured TTFT, TPOT, ITL, E2E, token counts and throughput must equal the
//! configured values, and open-loop latency must be measured from the scheduled send.
#![allow(clippy::unwrap_used)]

mod support;

use goodput_core::config::{Arrival, LoadSpec, RunConfig, Warmup};
use goodput_core::metrics::Slo;
use goodput_core::record::TokenSource;
use support::{assert_ms, fixed, run_sim};

fn closed(concurrency: u32, requests: u64) -> RunConfig {
    RunConfig {
        load: LoadSpec::Closed { concurrency },
        max_requests: Some(requests),
        warmup: Warmup::None,
        ..RunConfig::default()
    }
}

fn open(rate: f64, requests: u64, max_concurrency: Option<u32>) -> RunConfig {
    RunConfig {
        load: LoadSpec::Open {
            rate_per_sec: rate,
            arrival: Arrival::Constant,
            max_concurrency,
        },
        max_requests: Some(requests),
        warmup: Warmup::None,
        ..RunConfig::default()
    }
}

#[tokio::test(start_paused = true)]
async fn fixed_timing_is_measured_exactly() {
    // TTFT 200 ms, ITL 10 ms, 11 tokens → E2E 300 ms; 4 slots, closed loop of 4; the first
    // round is warmup, so the interval starts in steady state.
    let mut config = closed(4, 44);
    config.warmup = Warmup::Requests(4);
    let result = run_sim(fixed(200, 10, 4), config, 64, 11).await;
    let step = &result.step;
    assert_eq!(step.requests.completed, 40, "{:?}", step.requests);
    for record in &result.records {
        assert_eq!(record.output_tokens, 11);
        assert_eq!(record.output_tokens_source, TokenSource::Usage);
        assert_eq!(record.chunks.iter().map(|c| c[1]).sum::<u64>(), 11);
    }
    let latency = &step.latency_ms;
    assert_ms(latency.ttft.p50, 200.0, 1.0);
    assert_ms(latency.ttft.p99, 200.0, 1.0);
    assert_ms(latency.ttft.max, 200.0, 1.0);
    assert_ms(latency.tpot.p50, 10.0, 0.1);
    assert_ms(latency.itl.p99, 10.0, 0.1);
    assert_eq!(latency.itl.count, 400, "10 gaps per request");
    assert_ms(latency.e2e.mean, 300.0, 1.0);
    assert_ms(latency.e2e.p99, 300.0, 1.0);
    // Closed loop of 4 on 4 slots with 300 ms service: 4 / 0.3 s = 13.33 req/s.
    let throughput = &step.throughput;
    assert!(
        (throughput.requests_per_sec - 4.0 / 0.3).abs() / (4.0 / 0.3) < 0.01,
        "{throughput:?}"
    );
    assert!((throughput.output_tokens_per_sec - 11.0 * 4.0 / 0.3).abs() / (44.0 / 0.3) < 0.01);
    let prompt = result.records[0].input_tokens.unwrap() as f64;
    assert!(prompt >= 64.0, "the server counts the chat template too");
    assert!(
        (throughput.input_tokens_per_sec - prompt * 4.0 / 0.3).abs() / (prompt * 4.0 / 0.3) < 0.01
    );
}

#[tokio::test(start_paused = true)]
async fn coordinated_omission_is_measured_from_the_schedule() {
    // vllm#54101: one slot, 500 ms service, 10 req/s for 8 requests, client cap of 1.
    let result = run_sim(fixed(500, 10, 1), open(10.0, 8, Some(1)), 16, 1).await;
    let step = &result.step;
    assert_eq!(step.requests.completed, 8);
    // From the schedule, request k waits 0.4·k s more: 0.5 … 3.3 s.
    assert_ms(step.latency_ms.e2e.max, 3300.0, 2.0);
    assert_ms(step.latency_ms.e2e.p99, 3300.0, 4.0);
    assert_ms(step.latency_ms.e2e.mean, 1900.0, 2.0);
    // From the actual send every request takes its 0.5 s of service.
    assert_ms(step.latency_from_send_ms.e2e.max, 500.0, 2.0);
    assert_ms(step.latency_from_send_ms.e2e.p50, 500.0, 2.0);
    assert_ms(step.latency_ms.client_queue_wait.max, 2800.0, 2.0);
}

#[tokio::test(start_paused = true)]
async fn multi_token_chunks_count_tokens_not_chunks() {
    let mut sim = fixed(100, 10, 2);
    if let goodput_sim::config::EngineConfig::Fixed(engine) = &mut sim.engine {
        engine.tokens_per_chunk = 4;
    }
    let result = run_sim(sim, closed(1, 5), 16, 16).await;
    for record in &result.records {
        assert_eq!(record.output_tokens, 16);
        assert_eq!(record.chunks.len(), 4);
        assert!(
            record.chunks.iter().all(|c| c[1] == 4),
            "{:?}",
            record.chunks
        );
    }
    let latency = &result.step.latency_ms;
    // Each 4-token chunk arrives 40 ms after the previous one: 4 gaps of 10 ms each.
    assert_eq!(latency.itl.count, 5 * 12);
    assert_ms(latency.itl.p50, 10.0, 0.1);
    assert_ms(latency.itl.max, 10.0, 0.1);
    // The first chunk brings 4 tokens at once: (120 ms) / 15 = 8 ms.
    assert_ms(latency.tpot.p50, 8.0, 0.1);
}

#[tokio::test(start_paused = true)]
async fn worked_example_twenty_requests_per_second_with_150_tokens() {
    // Seed 000: 20 req/s completed × 150 output tokens = 3,000 output tokens/s.
    let mut config = open(20.0, 400, None);
    config.warmup = Warmup::Requests(40);
    let result = run_sim(fixed(100, 2, 64), config, 100, 150).await;
    let t = &result.step.throughput;
    assert!((t.requests_per_sec - 20.0).abs() < 0.05, "{t:?}");
    assert!((t.output_tokens_per_sec - 3000.0).abs() < 10.0, "{t:?}");
    let prompt = result.records[0].input_tokens.unwrap() as f64;
    assert!(
        (t.input_tokens_per_sec - 20.0 * prompt).abs() < 10.0,
        "input and output apart: {t:?}"
    );
    assert!((t.offered_requests_per_sec.unwrap() - 20.0).abs() < 1e-6);
    assert!(result.step.stability.stable, "{:?}", result.step.stability);
}

#[tokio::test(start_paused = true)]
async fn overload_reports_capacity_not_arrivals() {
    // Capacity 22 req/s (22 slots × 1 s service), arrivals 30 req/s: completed ≈ 22/s,
    // offered 30/s, unstable, SLO failed.
    let mut config = open(30.0, 900, None);
    config.warmup = Warmup::Requests(60);
    config.slo = Some(Slo::parse("ttft=2s").unwrap());
    let result = run_sim(fixed(1000, 1, 22), config, 16, 1).await;
    let step = &result.step;
    let t = &step.throughput;
    assert!((t.requests_per_sec - 22.0).abs() < 0.5, "{t:?}");
    assert!((t.offered_requests_per_sec.unwrap() - 30.0).abs() < 1e-6);
    assert!(!step.stability.stable, "{:?}", step.stability);
    assert!(
        step.stability.queue_growth_per_sec.unwrap() > 6.0,
        "{:?}",
        step.stability
    );
    assert!(
        step.goodput.attained_fraction.unwrap() < 0.5,
        "{:?}",
        step.goodput
    );
}

#[tokio::test(start_paused = true)]
async fn warmup_requests_are_journaled_but_not_measured() {
    let mut config = closed(2, 20);
    config.warmup = Warmup::Requests(6);
    let result = run_sim(fixed(50, 5, 2), config, 8, 4).await;
    assert_eq!(result.records.len(), 20);
    assert_eq!(result.step.requests.warmup, 6);
    assert_eq!(result.step.requests.scheduled, 14);
    assert_eq!(result.step.latency_ms.ttft.count, 14);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_real_loopback_tcp_latency_is_never_below_the_configured_timing() {
    // Real sockets and real time: only the lower bounds are exact; the upper bounds are loose
    // because the test shares two cores with everything else.
    let running = goodput_sim::spawn(fixed(50, 5, 4), ([127, 0, 0, 1], 0).into())
        .await
        .unwrap();
    let target = goodput_core::http::Target::parse(&running.base_url()).unwrap();
    let client = goodput_core::http::HttpClient::tcp(target, Default::default());
    let workload = std::sync::Arc::new(goodput_core::workload::SyntheticWorkload {
        input_tokens: 16,
        output_tokens: Some(6),
        seed: 1,
    });
    let model = running.server().model_name().to_string();
    let cancel = tokio_util::sync::CancellationToken::new();
    let result = support::run_with(
        closed(2, 8),
        client,
        support::openai(&model),
        workload,
        cancel,
    )
    .await;
    let latency = &result.step.latency_ms;
    assert_eq!(result.step.requests.completed, 8);
    // TTFT and E2E cannot be shorter than the server's timing; TPOT can, when the first token
    // is delivered late and the rest on time, so it is only bounded loosely.
    let ttft = latency.ttft.min.unwrap();
    let e2e = latency.e2e.min.unwrap();
    let tpot = latency.tpot.p50.unwrap();
    assert!((50.0..300.0).contains(&ttft), "ttft {ttft}");
    assert!((75.0..400.0).contains(&e2e), "e2e {e2e}");
    assert!((1.0..30.0).contains(&tpot), "tpot {tpot}");
    assert!(result.records.iter().all(|r| r.output_tokens == 6));
    running.shutdown_and_wait().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_sped_up_target_is_measured_in_its_own_time() {
    // The simulator runs 4× faster than real time; goodput schedules and reports in its time.
    let mut sim = fixed(200, 10, 4);
    sim.time_scale = 4.0;
    let mut config = open(8.0, 40, None);
    config.time_scale = 4.0;
    config.warmup = Warmup::Requests(8);
    let started = tokio::time::Instant::now();
    let result = run_sim(sim, config, 16, 11).await;
    let step = &result.step;
    assert_ms(step.latency_ms.ttft.p50, 200.0, 4.0);
    assert_ms(step.latency_ms.tpot.p50, 10.0, 0.4);
    assert!((step.throughput.offered_requests_per_sec.unwrap() - 8.0).abs() < 1e-6);
    assert!(
        (step.throughput.requests_per_sec - 8.0).abs() < 0.3,
        "{:?}",
        step.throughput
    );
    // 40 arrivals at 8/s of target time take 39/8 s of target time, a quarter of that really.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}
