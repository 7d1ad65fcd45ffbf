//! Open-loop pacing on a multi-threaded runtime (the precise pacer thread, real time): every
//! request is scheduled exactly on its arrival, none is sent before it, every one is recorded,
//! and a run stops scheduling at its duration. Only lower bounds are asserted on timing.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use goodput_core::config::{Arrival, LoadSpec, RunConfig, Warmup};
use goodput_core::runner::EndReason;
use support::{fixed, run_sim};

fn open(rate: f64) -> RunConfig {
    RunConfig {
        load: LoadSpec::Open {
            rate_per_sec: rate,
            arrival: Arrival::Constant,
            max_concurrency: None,
        },
        max_requests: Some(60),
        warmup: Warmup::None,
        ..RunConfig::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arrivals_are_scheduled_exactly_and_never_sent_early() {
    let result = run_sim(fixed(5, 1, 64), open(200.0), 8, 4).await;
    assert_eq!(result.outcome.end_reason, EndReason::Completed);
    assert_eq!(result.records.len(), 60);
    let mut records = result.records.clone();
    records.sort_by_key(|r| r.index);
    let first = records[0].scheduled_us;
    for record in &records {
        // Constant arrivals 5 ms apart, to the microsecond.
        assert_eq!(record.scheduled_us - first, 5_000 * record.index);
        assert!(
            record.sent_us.unwrap() >= record.scheduled_us,
            "never early"
        );
        assert!(record.is_ok(), "{:?}", record.failure);
    }
    assert_eq!(result.step.requests.completed, 60);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duration_stops_the_pacer() {
    let config = RunConfig {
        max_requests: None,
        duration: Some(Duration::from_millis(300)),
        ..open(100.0)
    };
    let started = std::time::Instant::now();
    let result = run_sim(fixed(5, 1, 64), config, 8, 4).await;
    assert_eq!(result.records.len(), 30, "arrivals at 0, 10, …, 290 ms");
    assert!(started.elapsed() >= Duration::from_millis(290));
}
