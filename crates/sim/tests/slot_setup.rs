//! A slot's setup (`slot_setup_us`): a request holds its sequence slot for a fixed time before
//! its first step, as a server whose handler waits inside its slot, against the same delay
//! before the queue (`frontend_us`) — equal for a request that finds a slot free, a setup
//! later for one that queued.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use support::engine_request as request;

use goodput_sim::build_engine;
use goodput_sim::config::{BatchingConfig, EngineConfig, SimConfig};
use goodput_sim::engine::StepSummary;
use goodput_sim::virtual_time::Simulation;

const DELAY: Duration = Duration::from_millis(100);

/// `slots` sequence slots with the delay in the slot (`in_slot`) or before the queue.
fn simulation(slots: u32, in_slot: bool) -> Simulation {
    let mut overheads = BatchingConfig::default().effective_overheads();
    overheads.frontend_us = if in_slot { 0.0 } else { 100_000.0 };
    let config = SimConfig {
        engine: EngineConfig::Batching(BatchingConfig {
            max_num_seqs: Some(slots),
            overheads: Some(overheads),
            slot_setup_us: in_slot.then_some(100_000.0),
            ..BatchingConfig::default()
        }),
        ..SimConfig::default()
    };
    config.validate().unwrap();
    Simulation::new(build_engine(&config))
}

/// Eight requests of 16 → 32 sent together to 4 slots: every TTFT, and the steps.
fn wave(in_slot: bool) -> (Vec<Duration>, Vec<StepSummary>) {
    let mut sim = simulation(4, in_slot);
    for id in 0..8 {
        sim.submit(Duration::ZERO, request(id, 16, 32));
    }
    sim.run_until_idle();
    let ttfts = (0..8).map(|id| sim.timeline(id).unwrap().ttft().unwrap());
    (ttfts.collect(), sim.steps().to_vec())
}

#[test]
fn a_queued_request_waits_for_the_setup_after_a_slot_frees() {
    let (in_slot, steps) = wave(true);
    let (before, _) = wave(false);
    // The four that found a slot: the delay, then their prompt step, either way.
    assert_eq!(steps[0].started, DELAY);
    assert_eq!(steps[0].sequences, 4);
    assert_eq!(in_slot[..4], before[..4]);
    // The four that queued: their slots free as the first four end, with the step before
    // their prompt step; the engine idles through their setup.
    let relaunch = steps.iter().rposition(|s| s.prefill_tokens > 0).unwrap();
    let (ended, next) = (&steps[relaunch - 1], &steps[relaunch]);
    assert_eq!(next.prefill_tokens, 4 * 16, "{steps:?}");
    assert_eq!(
        next.started,
        ended.started + ended.duration + DELAY,
        "{steps:?}"
    );
    for k in 4..8 {
        assert_eq!(
            in_slot[k],
            before[k] + DELAY,
            "request {k}: {in_slot:?} {before:?}"
        );
    }
}

#[test]
fn a_setup_holds_a_slot_without_slowing_the_others() {
    let mut sim = simulation(2, true);
    sim.submit(Duration::ZERO, request(0, 16, 40));
    sim.submit(Duration::from_millis(200), request(1, 16, 4));
    sim.run_until_idle();
    let steps = sim.steps();
    // While the second request holds its slot (200–300 ms) the first decodes alone, at its
    // own pace; the second's prompt joins the first step after its setup.
    let joined = steps
        .iter()
        .find(|s| s.prefill_tokens > 0 && s.started > DELAY)
        .unwrap();
    assert!(joined.started >= Duration::from_millis(300), "{steps:?}");
    let alone: Vec<&StepSummary> = steps
        .iter()
        .filter(|s| s.started < joined.started && s.started > DELAY)
        .collect();
    assert!(alone.len() > 20 && alone.iter().all(|s| s.sequences == 1));
    // Each decode step a little longer than the one before (its context grows), no more.
    for pair in alone[1..].windows(2) {
        let (a, b) = (
            pair[0].duration.as_secs_f64(),
            pair[1].duration.as_secs_f64(),
        );
        assert!(b >= a && b < a * 1.001, "{pair:?}");
    }
    // And it took the slot when it arrived: a third request arriving meanwhile waits for
    // one to end.
    let mut sim = simulation(2, true);
    sim.submit(Duration::ZERO, request(0, 16, 40));
    sim.submit(Duration::from_millis(200), request(1, 16, 4));
    sim.submit(Duration::from_millis(210), request(2, 16, 4));
    sim.run_until_idle();
    let first_end = sim.timeline(1).unwrap().finished.unwrap().0;
    let third = sim.timeline(2).unwrap();
    assert!(third.scheduled.unwrap() >= first_end + DELAY, "{third:?}");
}

/// A request cancelled while it holds its slot for the setup gives the slot to the next one
/// waiting, which starts its own setup then.
#[test]
fn a_request_cancelled_in_its_setup_frees_the_slot() {
    let mut sim = simulation(1, true);
    sim.submit(Duration::ZERO, request(0, 16, 4));
    sim.submit(Duration::ZERO, request(1, 16, 4));
    sim.run_until(Duration::from_millis(40));
    assert_eq!(sim.engine().stats().running, 1, "the first holds the slot");
    assert_eq!(sim.engine().stats().waiting, 1, "the second waits for it");
    sim.cancel(0);
    sim.run_until_idle();
    let second = sim.timeline(1).unwrap();
    assert_eq!(
        second.scheduled.unwrap(),
        Duration::from_millis(40) + DELAY,
        "{second:?}"
    );
}
