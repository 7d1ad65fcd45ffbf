//! Virtual-time runs checked against arithmetic: a fixed-timing engine's exact TTFT and ITL
//! give every request's times from first principles, whatever the workload shape.
#![allow(clippy::unwrap_used)]
use goodput_core::config::{Arrival, Warmup};
use goodput_core::metrics::Slo;
use goodput_sim::config::{EngineConfig, FixedTimingConfig};

use super::*;
use goodput_core::config::LoadSpec;
use std::time::Duration;

fn llama_8b_on(gpu: &str) -> VirtualTarget {
    let engine = goodput_sim::config::BatchingConfig {
        gpu: goodput_protocol::hardware::GpuSpec::preset(gpu).unwrap(),
        ..Default::default()
    };
    let sim = SimConfig {
        engine: EngineConfig::Batching(engine),
        ..SimConfig::default()
    };
    VirtualTarget {
        sim,
        requests: crate::VirtualRequests::fixed(512, 128, 0),
    }
}

fn plan(slo: &str) -> ProbePlan {
    let criteria = goodput_core::decide::capacity::Criteria {
        slo: Slo::parse(slo).unwrap(),
        attainment: 0.95,
        confidence: 0.95,
    };
    ProbePlan {
        base: RunConfig::default(),
        dimension: goodput_core::decide::capacity::Dimension::Rate,
        arrival: Arrival::Poisson,
        max_concurrency: None,
        measured_requests: goodput_core::decide::capacity::early_stopping::probe_requests(
            0.95, 0.95,
        ),
        warmup: Duration::from_secs(10),
        min_duration: Duration::from_secs(30),
        max_probe_duration: Duration::from_secs(600),
        criteria,
    }
}

#[test]
fn h200_serves_more_than_h100_under_the_same_slo() {
    let search = SearchConfig {
        start: 4.0,
        min: 0.5,
        max: 1000.0,
        tolerance: 0.1,
        max_probes: 16,
        integer: false,
        budget_secs: None,
        ceiling: None,
    };
    // A TPOT target near the bandwidth floor: how big a batch stays under it is set by
    // memory bandwidth (3.35 vs 4.8 TB/s), compute being equal.
    let plan = plan("ttft=1s,tpot=12ms");
    let h100 = virtual_capacity(&llama_8b_on("h100"), &plan, search, |_| {}).0;
    let h200 = virtual_capacity(&llama_8b_on("h200"), &plan, search, |_| {}).0;
    let (h100, h200) = (h100.lower_bound.unwrap(), h200.lower_bound.unwrap());
    assert!(h200 > h100 * 1.15, "H200 {h200} vs H100 {h100} req/s");
}

#[test]
fn virtual_fixed_timing_matches_the_configuration_exactly() {
    let sim = SimConfig {
        engine: EngineConfig::Fixed(FixedTimingConfig {
            ttft: Duration::from_millis(200),
            itl: Duration::from_millis(10),
            slots: 4,
            ..FixedTimingConfig::default()
        }),
        ..SimConfig::default()
    };
    let target = VirtualTarget {
        sim,
        requests: crate::VirtualRequests::fixed(32, 11, 0),
    };
    let config = RunConfig {
        load: LoadSpec::Open {
            rate_per_sec: 10.0,
            arrival: Arrival::Constant,
            max_concurrency: None,
        },
        max_requests: Some(220),
        warmup: Warmup::Requests(20),
        slo: Some(Slo::parse("ttft=250ms").unwrap()),
        ..RunConfig::default()
    };
    let (step, compliance) = target.probe(&config).unwrap();
    assert_eq!(step.requests.completed, 200);
    assert_eq!(step.latency_ms.ttft.max, Some(200.0));
    assert_eq!(step.latency_ms.e2e.p50, Some(300.0));
    assert!(
        (step.throughput.requests_per_sec - 10.0).abs() < 1e-6,
        "{:?}",
        step.throughput
    );
    assert_eq!(compliance.compliant, 200);
}

/// A fixed-timing simulator (TTFT 200 ms, ITL 10 ms) counting words.
fn fixed_sim(slots: u32) -> SimConfig {
    SimConfig {
        engine: EngineConfig::Fixed(FixedTimingConfig {
            ttft: Duration::from_millis(200),
            itl: Duration::from_millis(10),
            slots,
            ..FixedTimingConfig::default()
        }),
        prompt_tokenizer: goodput_sim::config::PromptTokenizer::Words,
        ..SimConfig::default()
    }
}

fn open(rate: f64, requests: u64) -> RunConfig {
    RunConfig {
        load: LoadSpec::Open {
            rate_per_sec: rate,
            arrival: Arrival::Constant,
            max_concurrency: None,
        },
        max_requests: Some(requests),
        warmup: Warmup::None,
        ..RunConfig::default()
    }
}

fn with_workload(
    sim: SimConfig,
    workload: impl goodput_core::workload::Workload + 'static,
) -> VirtualTarget {
    let mut requests = VirtualRequests::fixed(1, 1, 0);
    requests.workload = std::sync::Arc::new(workload);
    VirtualTarget { sim, requests }
}

fn vocabulary() -> std::sync::Arc<goodput_core::workload::PromptVocabulary> {
    std::sync::Arc::new(goodput_core::workload::PromptVocabulary::cl100k())
}

fn e2e_ms(record: &RequestRecord) -> f64 {
    (record.end_us - record.scheduled_us) as f64 / 1000.0
}

#[test]
fn distributed_answer_lengths_are_served_token_for_token() {
    let workload = goodput_core::workload::GeneratedWorkload {
        input: "uniform:10..200".parse().unwrap(),
        output: Some("uniform:1..64".parse().unwrap()),
        prefix: None,
        vocabulary: vocabulary(),
        seed: 7,
    };
    let target = with_workload(fixed_sim(1000), workload);
    let records = target.records(&open(20.0, 200)).unwrap();
    assert_eq!(records.len(), 200);
    let mut lengths = std::collections::BTreeSet::new();
    for record in &records {
        let asked = record.requested_output_tokens.unwrap();
        assert_eq!(record.output_tokens, asked, "{record:?}");
        lengths.insert(asked);
        // No queueing (1,000 slots): TTFT 200 ms, then 10 ms per further token.
        let expected = 200.0 + 10.0 * (asked as f64 - 1.0);
        assert!((e2e_ms(record) - expected).abs() < 1e-6, "{record:?}");
        // The server counts the prompt with its chat template (role and 6 marks).
        let prompt = record.expected_input_tokens.unwrap();
        assert_eq!(record.input_tokens, Some(prompt + 7));
    }
    assert!(lengths.len() > 30, "lengths drawn: {lengths:?}");
}

#[test]
fn sessions_send_each_turn_a_think_time_after_the_reply_with_the_history() {
    let workload = goodput_core::workload::SyntheticConversations {
        turns: "3".parse().unwrap(),
        user_tokens: "20".parse().unwrap(),
        output_tokens: Some("5".parse().unwrap()),
        think_time: goodput_core::workload::ThinkTime::Fixed(Duration::from_secs(1)),
        prefix: None,
        agent: None,
        vocabulary: vocabulary(),
        seed: 3,
    };
    let target = with_workload(fixed_sim(100), workload);
    let config = RunConfig {
        load: LoadSpec::Closed { concurrency: 2 },
        max_requests: Some(12),
        warmup: Warmup::None,
        ..RunConfig::default()
    };
    let records = target.records(&config).unwrap();
    assert_eq!(records.len(), 12);
    // Each turn lasts 200 + 4 × 10 = 240 ms; the next is sent 1 s after it ends.
    let mut by_session: std::collections::BTreeMap<u64, Vec<&RequestRecord>> = Default::default();
    for record in &records {
        assert!((e2e_ms(record) - 240.0).abs() < 1e-6);
        by_session
            .entry(record.session.unwrap())
            .or_default()
            .push(record);
    }
    assert_eq!(by_session.len(), 4, "2 workers × 2 sessions of 3 turns");
    for turns in by_session.values() {
        assert_eq!(turns.len(), 3);
        for pair in turns.windows(2) {
            assert_eq!(pair[1].scheduled_us, pair[0].end_us + 1_000_000);
            // The history grows by the reply (5 words) and the new message (20 words), each
            // message with its role and three template marks.
            let grown = pair[1].input_tokens.unwrap() - pair[0].input_tokens.unwrap();
            assert_eq!(grown, 5 + 4 + 20 + 4);
            assert!(pair[1].expected_prefix_tokens.unwrap() > 0);
        }
    }
}

#[test]
fn a_client_side_cap_holds_requests_and_latency_counts_from_the_schedule() {
    let workload = goodput_core::workload::GeneratedWorkload {
        input: "10".parse().unwrap(),
        output: Some("1".parse().unwrap()),
        prefix: None,
        vocabulary: vocabulary(),
        seed: 1,
    };
    let target = with_workload(fixed_sim(100), workload);
    let mut config = open(10.0, 5);
    config.load = LoadSpec::Open {
        rate_per_sec: 10.0,
        arrival: Arrival::Constant,
        max_concurrency: Some(1),
    };
    let mut records = target.records(&config).unwrap();
    records.sort_by_key(|r| r.index);
    // Scheduled every 100 ms, served one at a time for 200 ms each.
    for (i, record) in records.iter().enumerate() {
        let i = i as u64;
        assert_eq!(record.scheduled_us, i * 100_000);
        assert_eq!(record.sent_us, Some(i * 200_000));
        assert_eq!(record.end_us, (i + 1) * 200_000);
    }
}

#[test]
fn requests_that_outlive_the_timeout_fail_as_timeouts() {
    let target = VirtualTarget {
        sim: fixed_sim(1),
        requests: VirtualRequests::fixed(10, 1, 0),
    };
    let mut config = open(100.0, 4);
    config.request_timeout = Duration::from_millis(500);
    let mut records = target.records(&config).unwrap();
    records.sort_by_key(|r| r.index);
    // One slot, 200 ms each, all sent within 30 ms: the first two finish by 400 ms, the third
    // would end at 600 ms > 20 ms + 500 ms.
    let kinds: Vec<_> = records
        .iter()
        .map(|r| r.failure.as_ref().map(|f| f.kind))
        .collect();
    use goodput_core::record::OutcomeKind;
    assert_eq!(
        kinds,
        [
            None,
            None,
            Some(OutcomeKind::Timeout),
            Some(OutcomeKind::Timeout)
        ]
    );
    assert_eq!(records[2].end_us, 520_000);
}

#[test]
fn replicas_multiply_a_closed_loops_throughput() {
    let config = RunConfig {
        load: LoadSpec::Closed { concurrency: 4 },
        max_requests: Some(400),
        warmup: Warmup::None,
        ..RunConfig::default()
    };
    let throughput = |replicas: u32| {
        let sim = SimConfig {
            replicas,
            routing: goodput_sim::config::Routing::LeastLoaded,
            ..fixed_sim(1)
        };
        let target = VirtualTarget {
            sim,
            requests: VirtualRequests::fixed(10, 11, 0),
        };
        target.probe(&config).unwrap().0.throughput.requests_per_sec
    };
    // 300 ms per request on one slot per replica.
    for replicas in [1u32, 2, 4] {
        let expected = f64::from(replicas) / 0.3;
        let measured = throughput(replicas);
        assert!(
            (measured / expected - 1.0).abs() < 0.01,
            "{replicas}: {measured} vs {expected}"
        );
    }
}

#[test]
fn shared_prefixes_hit_the_batching_engines_prefix_cache() {
    let workload = goodput_core::workload::GeneratedWorkload {
        input: "64".parse().unwrap(),
        output: Some("8".parse().unwrap()),
        prefix: Some(goodput_core::workload::SharedPrefix {
            groups: 1,
            tokens: 1024,
        }),
        vocabulary: vocabulary(),
        seed: 5,
    };
    let mut sim = SimConfig::default();
    sim.agent.prompt_tokens_details = true;
    let target = with_workload(sim, workload);
    let mut records = target.records(&open(2.0, 20)).unwrap();
    records.sort_by_key(|r| r.index);
    assert_eq!(records[0].cached_input_tokens, Some(0));
    // The workload's expected shareable prefix stands beside the server's hits, as live.
    assert!(
        records
            .iter()
            .all(|r| r.expected_prefix_tokens == Some(1024))
    );
    for record in &records[1..] {
        let cached = record.cached_input_tokens.unwrap();
        // Every full block of the shared system prompt (its template marks included) hits.
        assert!((1008..=1040).contains(&cached), "{cached}: {record:?}");
    }
}

#[test]
fn a_closed_loop_against_a_server_refusing_at_once_still_ends() {
    let mut sim = fixed_sim(1);
    if let EngineConfig::Fixed(fixed) = &mut sim.engine {
        fixed.max_waiting = 0;
    }
    let target = VirtualTarget {
        sim,
        requests: VirtualRequests::fixed(10, 11, 0),
    };
    let config = RunConfig {
        load: LoadSpec::Closed { concurrency: 3 },
        duration: Some(Duration::from_secs(1)),
        max_requests: None,
        warmup: Warmup::None,
        ..RunConfig::default()
    };
    let records = target.records(&config).unwrap();
    // One slot serves 300 ms requests; the two other workers are refused (429) and retry a
    // round trip (1 ms) later, for the whole second.
    let served = records.iter().filter(|r| r.is_ok()).count();
    let refused = records.iter().filter(|r| r.status == Some(429)).count();
    assert_eq!(served, 4, "requests started at 0, 300, 600 and 900 ms");
    assert!((1_900..=2_100).contains(&refused), "{refused} refusals");
}

#[test]
fn a_closed_loops_first_requests_share_the_engines_first_step() {
    // Sent at the same instant, they reach the engine together (as on llama-server, whose
    // loop batches every request queued when it wakes), not one step apart.
    let mut engine = goodput_sim::config::BatchingConfig::default();
    let mut overheads = engine.effective_overheads();
    overheads.frontend_us = 0.0;
    engine.overheads = Some(overheads);
    let target = VirtualTarget {
        sim: SimConfig {
            engine: EngineConfig::Batching(engine),
            ..SimConfig::default()
        },
        requests: VirtualRequests::fixed(512, 4, 0),
    };
    let config = RunConfig {
        load: LoadSpec::Closed { concurrency: 3 },
        max_requests: Some(3),
        warmup: Warmup::None,
        ..RunConfig::default()
    };
    let records = target.records(&config).unwrap();
    let ttfts: Vec<u64> = records
        .iter()
        .map(|r| r.first_token_us.unwrap() - r.sent_us.unwrap())
        .collect();
    assert_eq!(ttfts.len(), 3);
    assert!(ttfts.iter().all(|t| *t == ttfts[0]), "{ttfts:?}");
}

#[test]
fn a_request_ending_at_its_deadline_has_ended() {
    // 200 ms + 10 × 10 ms = 300 ms each, and a 300-ms timeout: the engine's last token comes
    // before the client's deadline at the same instant.
    let target = VirtualTarget {
        sim: fixed_sim(1),
        requests: VirtualRequests::fixed(10, 11, 0),
    };
    let mut config = RunConfig {
        load: LoadSpec::Closed { concurrency: 1 },
        max_requests: Some(3),
        warmup: Warmup::None,
        ..RunConfig::default()
    };
    config.request_timeout = Duration::from_millis(300);
    let records = target.records(&config).unwrap();
    assert_eq!(records.len(), 3);
    assert!(records.iter().all(|r| r.failure.is_none()), "{records:?}");
    assert!(records.iter().all(|r| e2e_ms(r) == 300.0));
}

#[test]
fn an_extended_probe_draws_fresh_arrivals_for_each_run() {
    // 20 s at 2 req/s: about 40 arrivals, too few to decide, so the probe is extended; each
    // extension capped at the same 20 s would, on the first run's seed, be that run again.
    let mut plan = plan("ttft=1s,tpot=50ms");
    plan.max_probe_duration = Duration::from_secs(20);
    plan.min_duration = Duration::from_secs(10);
    let search = SearchConfig {
        start: 2.0,
        min: 0.5,
        max: 1000.0,
        tolerance: 0.1,
        max_probes: 2,
        integer: false,
        budget_secs: None,
        ceiling: None,
    };
    let mut runs = Vec::new();
    let (_, steps) = virtual_capacity(&llama_8b_on("h100"), &plan, search, |probe| {
        runs.push((probe.load, probe.runs));
    });
    assert_eq!(runs[..2], [(2.0, 1), (2.0, 2)], "{runs:?}");
    let arrivals = |step: &StepReport| (step.interval.last_arrival_secs, step.requests.sent);
    assert_ne!(arrivals(&steps[0]), arrivals(&steps[1]));
}

#[test]
fn every_record_reads_the_simulators_nanosecond_truncated_to_the_microsecond() {
    // TTFT and ITL with fractions of a microsecond: one request at a time, each sent the
    // instant the previous ended, so request k starts at k × (TTFT + 10 × ITL) exactly and
    // every timestamp is that arithmetic in nanoseconds, truncated to the microsecond (a
    // timer tick of a simulated microsecond put them up to 1 µs late).
    let (ttft, itl) = (200_000_457_u64, 10_000_333_u64);
    let target = VirtualTarget {
        sim: SimConfig {
            engine: EngineConfig::Fixed(FixedTimingConfig {
                ttft: Duration::from_nanos(ttft),
                itl: Duration::from_nanos(itl),
                slots: 1,
                ..FixedTimingConfig::default()
            }),
            ..SimConfig::default()
        },
        requests: VirtualRequests::fixed(10, 11, 0),
    };
    let config = RunConfig {
        load: LoadSpec::Closed { concurrency: 1 },
        max_requests: Some(40),
        warmup: Warmup::None,
        ..RunConfig::default()
    };
    let mut records = target.records(&config).unwrap();
    records.sort_by_key(|r| r.index);
    assert_eq!(records.len(), 40);
    for (k, record) in (0u64..).zip(&records) {
        let start = k * (ttft + 10 * itl);
        assert_eq!(record.sent_us, Some(start / 1000), "{record:?}");
        let chunks: Vec<u64> = record.chunks.iter().map(|c| c[0]).collect();
        let expected: Vec<u64> = (0..11).map(|j| (start + ttft + j * itl) / 1000).collect();
        assert_eq!(chunks, expected, "request {k}");
        assert_eq!(record.end_us, expected[10], "request {k}");
    }
}
