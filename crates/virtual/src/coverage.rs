//! The capacity search's interval against a queue whose answer the test computes exactly: the
//! fixed-timing simulator with 4 slots × 400 ms (TTFT 100 ms) under Poisson arrivals is an
//! M/D/4 queue; `ttft_p99=300ms` holds while fewer than 1 % of requests wait over 200 ms. The
//! rate where that happens is found by simulating the queue directly; the reported interval
//! `[lower_bound, upper_bound]` must cover it for at least 95 % of seeds. The answers are not
//! streamed: every request's E2E is its wait + 400 ms, so `e2e_p99=600ms` is the TTFT target's
//! twin, and the searches' hundreds of thousands of requests cost one response each instead of
//! 31 chunks.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use goodput_core::config::{Arrival, RunConfig};
use goodput_core::decide::capacity::early_stopping::probe_requests;
use goodput_core::decide::capacity::{Conclusion, Criteria, Dimension, ProbePlan, SearchConfig};
use goodput_core::metrics::Slo;
use goodput_sim::SimConfig;
use goodput_sim::config::{EngineConfig, FixedTimingConfig};
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

use super::{VirtualTarget, virtual_capacity};

const SLOTS: usize = 4;
const SERVICE_US: u64 = 400_000;
const TTFT_US: u64 = 100_000;
const TTFT_TARGET_US: u64 = 300_000;

/// Fraction of requests whose TTFT exceeds the target in an M/D/4 queue at `rate`, from
/// 400,000 simulated arrivals (FIFO, earliest free slot).
fn miss_rate(rate: f64) -> f64 {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    let mut free_at = [0f64; SLOTS];
    let (mut t, mut misses, n) = (0.0f64, 0u64, 400_000u64);
    for _ in 0..n {
        t += -rng.random::<f64>().max(1e-12).ln() / rate;
        let slot = (0..SLOTS)
            .min_by(|&a, &b| free_at[a].total_cmp(&free_at[b]))
            .unwrap();
        let start = free_at[slot].max(t);
        free_at[slot] = start + SERVICE_US as f64 / 1e6;
        let ttft = start - t + TTFT_US as f64 / 1e6;
        misses += u64::from(ttft > TTFT_TARGET_US as f64 / 1e6);
    }
    misses as f64 / n as f64
}

/// The rate at which 1 % of requests miss the TTFT target.
fn exact_capacity() -> f64 {
    let (mut low, mut high) = (1.0, SLOTS as f64 / (SERVICE_US as f64 / 1e6));
    for _ in 0..30 {
        let mid = (low + high) / 2.0;
        if miss_rate(mid) <= 0.01 {
            low = mid;
        } else {
            high = mid;
        }
    }
    low
}

fn target() -> VirtualTarget {
    let sim = SimConfig {
        engine: EngineConfig::Fixed(FixedTimingConfig {
            ttft: Duration::from_micros(TTFT_US),
            itl: Duration::from_millis(10),
            slots: SLOTS as u32,
            ..FixedTimingConfig::default()
        }),
        ..SimConfig::default()
    };
    // 31 tokens: 100 ms + 30 × 10 ms = 400 ms per request.
    let workload = goodput_core::workload::GeneratedWorkload {
        input: goodput_core::workload::LengthDistribution::Fixed(16),
        output: Some(goodput_core::workload::LengthDistribution::Fixed(31)),
        prefix: None,
        vocabulary: std::sync::Arc::new(goodput_core::workload::PromptVocabulary::cl100k()),
        seed: 0,
    };
    let openai = goodput_core::backend::openai::OpenAiConfig {
        ignore_eos: true,
        stream: false,
        ..Default::default()
    };
    VirtualTarget {
        sim,
        requests: crate::VirtualRequests::openai(std::sync::Arc::new(workload), openai),
    }
}

fn plan(seed: u64) -> ProbePlan {
    let criteria = Criteria {
        slo: Slo::parse(&format!(
            "e2e_p99={}ms",
            (TTFT_TARGET_US - TTFT_US + SERVICE_US) / 1000
        ))
        .unwrap(),
        attainment: 0.99,
        confidence: 0.99,
    };
    ProbePlan {
        base: RunConfig {
            seed,
            ..RunConfig::default()
        },
        dimension: Dimension::Rate,
        arrival: Arrival::Poisson,
        max_concurrency: None,
        measured_requests: probe_requests(0.99, 0.99),
        warmup: Duration::from_secs(10),
        min_duration: Duration::from_secs(30),
        max_probe_duration: Duration::from_secs(3600),
        criteria,
    }
}

#[test]
fn the_reported_interval_covers_the_exact_capacity_for_95_percent_of_seeds() {
    let exact = exact_capacity();
    assert!((3.0..5.0).contains(&exact), "M/D/4 capacity {exact}");
    let search = SearchConfig {
        start: 2.0,
        min: 0.1,
        max: 100.0,
        tolerance: 0.05,
        max_probes: 20,
        integer: false,
        budget_secs: Some(4.0 * 3600.0),
        ceiling: None,
    };
    let seeds = 20u64;
    // The seeds' searches are independent: as many threads as the machine has cores (two
    // here), each its own runtime.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4)) as u64;
    let intervals: Vec<(u64, f64, f64, Conclusion)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                scope.spawn(move || {
                    (1..=seeds)
                        .filter(|seed| seed % threads == thread)
                        .map(|seed| interval(seed, search))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|handle| handle.join().unwrap())
            .collect()
    });
    let mut covered = 0;
    let mut failures = Vec::new();
    for (seed, lower, upper, conclusion) in intervals {
        if lower <= exact && exact <= upper {
            covered += 1;
        } else {
            failures.push((seed, lower, upper, conclusion));
        }
    }
    eprintln!("exact {exact:.3} req/s: covered by {covered} of {seeds}");
    assert!(
        covered * 100 >= seeds * 95,
        "exact {exact:.3} req/s covered by {covered} of {seeds} searches; misses {failures:?}"
    );
}

/// One seed's search: its interval and conclusion, its invariants checked.
fn interval(seed: u64, search: SearchConfig) -> (u64, f64, f64, Conclusion) {
    let (report, _) = virtual_capacity(&target(), &plan(seed), search, |_| {});
    let lower = report.lower_bound.unwrap_or(0.0);
    let upper = report.upper_bound.unwrap_or(f64::INFINITY);
    assert!(report.spent_secs <= 4.0 * 3600.0 + 3600.0, "{report:?}");
    assert_ne!(report.conclusion, Conclusion::Aborted);
    // No undecided load is ever a bound.
    assert!(
        report
            .undecided_loads
            .iter()
            .all(|l| *l > lower && *l < upper)
    );
    eprintln!(
        "seed {seed}: [{lower:.3}, {upper:.3}] {:?}, {} runs, {:.0} s of target time, undecided {:?}",
        report.conclusion,
        report.probes.len(),
        report.spent_secs,
        report.undecided_loads
    );
    (seed, lower, upper, report.conclusion)
}
