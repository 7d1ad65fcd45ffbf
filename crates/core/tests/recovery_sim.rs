//! Stability over time against the fixed-timing simulator (C = 8 slots, S = 0.5 s, so a
//! capacity of 16 req/s) in virtual time: overload at 1.3 × capacity is unstable with a
//! positive queue-growth slope, and after an overload phase the queue drains in about
//! backlog / (capacity − nominal).
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use goodput_core::config::{Arrival, LoadSpec, RunConfig, Warmup};
use goodput_core::metrics::Slo;
use goodput_core::profile::parse_phases;
use support::{fixed, run_sim};

const CAPACITY: f64 = 16.0;

#[tokio::test(start_paused = true)]
async fn overload_at_1_3_times_capacity_is_unstable_with_a_growing_queue() {
    let config = RunConfig {
        load: LoadSpec::Open {
            rate_per_sec: 1.3 * CAPACITY,
            arrival: Arrival::Poisson,
            max_concurrency: None,
        },
        max_requests: None,
        duration: Some(Duration::from_secs(60)),
        warmup: Warmup::Duration(Duration::from_secs(5)),
        ..RunConfig::default()
    };
    let step = run_sim(fixed(400, 10, 8), config, 16, 11).await.step;
    assert!(!step.stability.stable, "{:?}", step.stability);
    let growth = step.stability.queue_growth_per_sec.unwrap();
    assert!(
        (growth - 0.3 * CAPACITY).abs() < 1.5,
        "grows at arrivals − capacity = 4.8/s, measured {growth}"
    );
    assert!(
        (step.throughput.requests_per_sec - CAPACITY).abs() < 0.5,
        "{:?}",
        step.throughput
    );
}

#[tokio::test(start_paused = true)]
async fn after_overload_the_queue_drains_in_backlog_over_spare_capacity() {
    let nominal = 0.5 * CAPACITY;
    let phases = parse_phases(&format!(
        "nominal={nominal}:30s,overload={}:20s,recovery={nominal}:60s",
        1.3 * CAPACITY
    ))
    .unwrap();
    let config = RunConfig {
        load: LoadSpec::Profile {
            phases,
            arrival: Arrival::Constant,
            max_concurrency: None,
        },
        max_requests: None,
        duration: Some(Duration::from_secs(110)),
        warmup: Warmup::Duration(Duration::from_secs(5)),
        slo: Some(Slo::parse("ttft=600ms").unwrap()),
        ..RunConfig::default()
    };
    let step = run_sim(fixed(400, 10, 8), config, 16, 11).await.step;
    let recovery = step.recovery.unwrap();
    assert_eq!(recovery.overload_phase, "overload");
    // (20.8 − 16) req/s × 20 s ≈ 96 requests of backlog.
    assert!(
        (recovery.backlog_requests - 96.0).abs() < 10.0,
        "{recovery:?}"
    );
    let expected = recovery.backlog_requests / (CAPACITY - nominal);
    let drain = recovery.drain_secs.unwrap();
    assert!(
        (drain - expected).abs() <= 0.2 * expected + 1.0,
        "drained in {drain} s, expected {expected} s"
    );
    let slo = recovery.slo_recovery_secs.unwrap();
    assert!(
        slo <= drain + 1.0 && slo >= 0.5 * expected,
        "back within SLO after {slo} s"
    );
}
