//! Headline figures against the fixed-timing simulator, whose answer is known exactly:
//! closed-loop throughput in synchronized waves (any run length, any phase of the edges),
//! short overloads judged unstable with the server's steady completion rate, and a balanced
//! load judged stable.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use goodput_core::config::{Arrival, LoadSpec, RunConfig, Warmup};
use goodput_core::metrics::stability::Verdict;
use goodput_core::report::ThroughputMethod;
use support::{fixed, run_sim};

/// TTFT 100 ms + 63 × ITL 10 ms: every request lives 730 ms.
const E2E_SECS: f64 = 0.73;

fn closed_for(concurrency: u32, duration: Duration, warmup: Warmup) -> RunConfig {
    RunConfig {
        load: LoadSpec::Closed { concurrency },
        duration: Some(duration),
        max_requests: None,
        warmup,
        ..RunConfig::default()
    }
}

#[tokio::test(start_paused = true)]
async fn synchronized_waves_give_concurrency_over_e2e_whatever_the_run_length() {
    for concurrency in [1u32, 2, 3, 5, 8, 64] {
        for periods in [2.0, 2.5, 3.3, 5.0, 7.7, 12.2, 20.0] {
            for warmup in [Warmup::None, Warmup::Duration(Duration::from_millis(1_100))] {
                let secs = periods * E2E_SECS + if warmup == Warmup::None { 0.0 } else { 1.1 };
                let config = closed_for(concurrency, Duration::from_secs_f64(secs), warmup);
                let result = run_sim(fixed(100, 10, 64), config, 16, 64).await;
                let step = &result.step;
                let truth = f64::from(concurrency) / E2E_SECS;
                let t = &step.throughput;
                let error = (t.requests_per_sec - truth).abs() / truth;
                assert!(
                    error < 0.01,
                    "C={concurrency}, {periods} periods, warmup {warmup:?}: {:.3} req/s, truth \
                     {truth:.3} ({:.2} %); interval {:?}",
                    t.requests_per_sec,
                    error * 100.0,
                    step.interval
                );
                let tokens = (t.output_tokens_per_sec - 64.0 * truth).abs() / (64.0 * truth);
                assert!(tokens < 0.01, "output tokens/s {t:?}");
                assert_ne!(step.stability.verdict, Verdict::Unstable);
            }
        }
    }
}

fn overload(rate: f64, secs: u64, arrival: Arrival) -> RunConfig {
    RunConfig {
        load: LoadSpec::Open {
            rate_per_sec: rate,
            arrival,
            max_concurrency: None,
        },
        duration: Some(Duration::from_secs(secs)),
        max_requests: None,
        warmup: Warmup::Fraction(0.1),
        ..RunConfig::default()
    }
}

#[tokio::test(start_paused = true)]
async fn seed_000_overload_is_unstable_at_any_length_and_reads_the_completion_rate() {
    // 22 slots × 1 s: the server completes 22/s. 30 arrive per second.
    for secs in [5u64, 10, 60] {
        let config = overload(30.0, secs, Arrival::Poisson);
        let result = run_sim(fixed(1000, 1, 22), config, 16, 1).await;
        let step = &result.step;
        let s = &step.stability;
        assert_eq!(s.verdict, Verdict::Unstable, "{secs} s: {s:?}");
        assert!(!s.stable);
        assert!(
            s.reason.contains("grew") || s.reason.contains("fell behind"),
            "{s:?}"
        );
        let growth = s.queue_growth_per_sec.unwrap();
        assert!(growth > 5.0, "{secs} s: growth {growth}");
        let t = &step.throughput;
        assert!(
            (t.requests_per_sec - 22.0).abs() < 0.5,
            "{secs} s: {:.2} req/s; interval {:?} {:?}",
            t.requests_per_sec,
            step.interval,
            step.requests
        );
        assert_eq!(step.interval.method, ThroughputMethod::Completions);
        assert!(step.interval.drain_secs > 0.0 && step.interval.completed_after > 0);
    }
}

#[tokio::test(start_paused = true)]
async fn balanced_load_is_stable_and_reads_the_arrival_rate() {
    // 22 arrivals per second, evenly spaced, against 22 slots × 1 s.
    for secs in [10u64, 60] {
        let config = overload(22.0, secs, Arrival::Constant);
        let result = run_sim(fixed(1000, 1, 22), config, 16, 1).await;
        let step = &result.step;
        let s = &step.stability;
        assert_eq!(s.verdict, Verdict::Stable, "{secs} s: {s:?}");
        assert!(s.reason.contains("did not grow"), "{s:?}");
        let t = &step.throughput;
        assert!(
            (t.requests_per_sec - 22.0).abs() < 0.22,
            "{secs} s: {t:?} {:?}",
            step.interval
        );
        assert_eq!(step.interval.method, ThroughputMethod::LifeFraction);
        // No warm-up completes before the first measured arrival at 10 s: the first second
        // of the interval is start-up, stated apart.
        assert!(step.interval.startup_secs >= 0.0);
    }
}

#[tokio::test(start_paused = true)]
async fn a_run_too_short_to_judge_is_inconclusive_not_stable() {
    let config = overload(30.0, 2, Arrival::Poisson);
    let result = run_sim(fixed(1000, 1, 22), config, 16, 1).await;
    let s = &result.step.stability;
    assert_ne!(s.verdict, Verdict::Stable, "{s:?}");
}

#[tokio::test(start_paused = true)]
async fn a_closed_loop_is_stable_by_construction_however_short() {
    // One wave of 8 at concurrency 8 against 4 slots: nothing arrives after start-up, which
    // leaves an open loop's verdict undecided; a closed loop cannot queue more than its
    // concurrency, so it is stable.
    for (concurrency, requests) in [(8u32, 8u64), (8, 12), (64, 64)] {
        let config = RunConfig {
            load: LoadSpec::Closed { concurrency },
            duration: None,
            max_requests: Some(requests),
            warmup: Warmup::None,
            ..RunConfig::default()
        };
        let result = run_sim(fixed(100, 10, 4), config, 16, 64).await;
        let s = &result.step.stability;
        assert_eq!(s.verdict, Verdict::Stable, "C={concurrency}: {s:?}");
        assert!(s.reason.starts_with("closed loop"), "{s:?}");
        assert_eq!(result.step.requests.completed, requests);
    }
}
