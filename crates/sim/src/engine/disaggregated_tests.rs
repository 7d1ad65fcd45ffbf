//! Disaggregated fleets of fixed-timing engines against arithmetic: every figure below is
//! worked out by hand (or by a few lines of FIFO-queue arithmetic) from the engines' constant
//! timings, the link and the arrival times — never from the simulator.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use super::*;
use crate::config::{BatchingConfig, FixedTimingConfig};
use crate::engine::batching::BatchingEngine;
use crate::engine::fixed::FixedTimingEngine;
use crate::engine::replicas::Routing;
use crate::virtual_time::Simulation;

const MS: Duration = Duration::from_millis(1);

fn fixed(ttft_ms: u64, itl_ms: u64, slots: u32) -> Box<dyn Engine> {
    Box::new(FixedTimingEngine::new(FixedTimingConfig {
        ttft: MS * ttft_ms as u32,
        itl: MS * itl_ms as u32,
        slots,
        ..FixedTimingConfig::default()
    }))
}

/// `p` prefill replicas (100 ms a prompt, one slot each) and `d` decode replicas (10 ms a
/// token, `decode_slots` each), round-robin both; the link sends 1000 B/token at 1 GB/s
/// (1 ms for a 1000-token prompt) with 5 ms latency.
fn fleet(p: usize, d: usize, decode_slots: u32, link: KvLink) -> Box<dyn Engine> {
    let prefill = Replicated::new(
        (0..p).map(|_| fixed(100, 10, 1)).collect(),
        Routing::RoundRobin,
    );
    let decode = Replicated::new(
        (0..d).map(|_| fixed(100, 10, decode_slots)).collect(),
        Routing::RoundRobin,
    );
    Box::new(Disaggregated::new(prefill, decode, link))
}

const LINK: KvLink = KvLink {
    bytes_per_token: 1000.0,
    bytes_per_second: 1e9,
    latency: Duration::from_millis(5),
};

fn request(id: u64, output: u32) -> EngineRequest {
    EngineRequest {
        id,
        prompt_tokens: 1000,
        block_hashes: Vec::new(),
        max_output_tokens: output,
        stop_after_tokens: output,
    }
}

/// One request alone: first token after the 100 ms prefill; the KV lands 1 + 5 ms later; the
/// ten further tokens come 10 ms apart from there.
#[test]
fn one_request_crosses_the_link_once() {
    let sim = Simulation::run_open_loop(fleet(1, 1, 1, LINK), [(Duration::ZERO, request(0, 11))]);
    let timeline = &sim.timelines()[0];
    let times: Vec<Duration> = timeline.deliveries.iter().map(|(at, _)| *at).collect();
    let expected: Vec<Duration> = std::iter::once(MS * 100)
        .chain((1..=10).map(|j| MS * 106 + MS * 10 * j))
        .collect();
    assert_eq!(times, expected);
    assert_eq!(timeline.scheduled, Some(Duration::ZERO));
    assert_eq!(timeline.output_tokens(), 11);
    assert!(timeline.finished.is_some());
}

/// 2P+2D at 25 requests/s, above the prefill pool's 20/s: request k goes to prefill replica
/// k mod 2 as its j = k div 2-th, starts at 100·j + 40·(k mod 2) ms, so its TTFT is
/// 100 + 20·j ms; decode keeps up exactly (each decode replica receives one request every
/// 100 ms and holds it 100 ms), so every TPOT is (6 + 100) / 10 = 10.6 ms. Under TTFT ≤ 150 ms
/// the good requests are j ≤ 2 on each prefill replica: 6 of 20.
#[test]
fn two_plus_two_fixed_fleet_goodput_is_exact() {
    let arrivals = (0..20u64).map(|k| (MS * 40 * k as u32, request(k, 11)));
    let sim = Simulation::run_open_loop(fleet(2, 2, 1, LINK), arrivals);
    let mut good = 0;
    for timeline in sim.timelines() {
        let j = (timeline.id / 2) as u32;
        assert_eq!(
            timeline.ttft(),
            Some(MS * 100 + MS * 20 * j),
            "{}",
            timeline.id
        );
        assert_eq!(
            timeline.e2e(),
            Some(MS * 206 + MS * 20 * j),
            "{}",
            timeline.id
        );
        assert_eq!(timeline.tpot(), Some(Duration::from_micros(10_600)));
        good += usize::from(timeline.ttft().unwrap() <= MS * 150);
    }
    assert_eq!(good, 6);
}

/// 2P+1D: the one decode replica (one slot, 100 ms a request) is the bottleneck; its queue is
/// a FIFO single server fed by the transfers' landing times, computed here directly.
#[test]
fn a_short_decode_pool_queues_requests_in_landing_order() {
    let arrivals: Vec<_> = (0..8u64)
        .map(|k| (MS * 40 * k as u32, request(k, 11)))
        .collect();
    let sim = Simulation::run_open_loop(fleet(2, 1, 1, LINK), arrivals);
    // Prefill ends (from the exact 2P timing above) and landing = end + 6 ms.
    let mut landings: Vec<(Duration, u64)> = (0..8u64)
        .map(|k| {
            let (j, p) = ((k / 2) as u32, (k % 2) as u32);
            (MS * 100 * (j + 1) + MS * 40 * p + MS * 6, k)
        })
        .collect();
    landings.sort();
    let mut free = Duration::ZERO;
    for (lands, k) in landings {
        let start = lands.max(free);
        free = start + MS * 100;
        let timeline = sim.timeline(k).unwrap();
        assert_eq!(timeline.finished.unwrap().0, free, "request {k}");
    }
}

/// Two prompts end together on one prefill replica: their transfers share its link, 30 ms
/// each, so they land at 100 + 30 + 5 and 100 + 60 + 5 ms.
#[test]
fn transfers_from_one_prefill_replica_share_its_link() {
    let slow = KvLink {
        bytes_per_token: 30_000.0,
        ..LINK
    };
    let prefill = Replicated::new(vec![fixed(100, 10, 2)], Routing::RoundRobin);
    let decode = Replicated::new(vec![fixed(100, 10, 2)], Routing::RoundRobin);
    let engine = Box::new(Disaggregated::new(prefill, decode, slow));
    let arrivals = (0..2u64).map(|k| (Duration::ZERO, request(k, 2)));
    let sim = Simulation::run_open_loop(engine, arrivals);
    let ends: Vec<Duration> = sim
        .timelines()
        .iter()
        .map(|t| t.finished.unwrap().0)
        .collect();
    assert_eq!(ends, [MS * 145, MS * 175]);
    let Some(engine) = sim.engine().replica_stats().first().cloned() else {
        panic!("replica stats")
    };
    assert_eq!(engine.running, 0);
}

/// A one-token answer ends at the prefill replica: nothing crosses the link.
#[test]
fn a_one_token_answer_never_reaches_the_decode_pool() {
    let sim = Simulation::run_open_loop(fleet(1, 1, 1, LINK), [(Duration::ZERO, request(0, 1))]);
    let timeline = &sim.timelines()[0];
    assert_eq!(timeline.finished.map(|(at, _)| at), Some(MS * 100));
    assert_eq!(timeline.output_tokens(), 1);
}

/// A batching decode replica admits a transferred request without computing its prompt:
/// no step carries prefill tokens, and it generates the answer's remaining tokens.
#[test]
fn a_batching_decode_replica_skips_the_prompt() {
    let mut engine = BatchingEngine::new(BatchingConfig::default(), 0);
    engine
        .submit_prefilled(Duration::ZERO, request(0, 5))
        .unwrap();
    let mut sim = Simulation::new(Box::new(engine));
    sim.run_until_idle();
    let mut alone = Simulation::new(Box::new(BatchingEngine::new(BatchingConfig::default(), 0)));
    alone.submit(Duration::ZERO, request(1, 5));
    alone.run_until_idle();
    assert_eq!(sim.steps().len(), 4);
    assert!(sim.steps().iter().all(|step| step.prefill_tokens == 0));
    assert_eq!(alone.steps()[0].prefill_tokens, 1000);
    // Its decode steps cost what the same request's decode steps cost after its own prefill.
    assert_eq!(sim.steps()[0].duration, alone.steps()[1].duration);
}
