//! Capacity searches in virtual time against servers whose capacity is known by arithmetic:
//! the fixed-timing engine with C slots and a constant service time S under constant arrivals
//! serves exactly C/S requests a second (below it no request waits; above it the queue grows
//! without bound). The search must bracket C/S; each probe decided far from it ends after a
//! fraction of the fixed-sample probe length.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use goodput_core::config::{Arrival, RunConfig};
use goodput_core::decide::capacity::early_stopping::probe_requests;
use goodput_core::decide::capacity::{
    CapacityReport, Criteria, Dimension, Outcome, ProbePlan, SearchConfig, sequential,
};
use goodput_core::metrics::Slo;
use goodput_core::report::StepReport;
use goodput_sim::SimConfig;
use goodput_sim::config::{EngineConfig, FixedTimingConfig};
use goodput_virtual::{VirtualRequests, VirtualTarget, virtual_capacity};

/// `slots` slots of `ttft_ms` + 10 × `itl_ms` (11 output tokens).
fn target(slots: u32, ttft_ms: u64, itl_ms: u64) -> VirtualTarget {
    let sim = SimConfig {
        engine: EngineConfig::Fixed(FixedTimingConfig {
            ttft: Duration::from_millis(ttft_ms),
            itl: Duration::from_millis(itl_ms),
            slots,
            ..FixedTimingConfig::default()
        }),
        prompt_tokenizer: goodput_sim::config::PromptTokenizer::Words,
        ..SimConfig::default()
    };
    VirtualTarget {
        sim,
        requests: VirtualRequests::fixed(16, 11, 0),
    }
}

/// 99 % attainment of `slo` at 99 % confidence.
fn criteria(slo: &str) -> Criteria {
    Criteria {
        slo: Slo::parse(slo).unwrap(),
        attainment: 0.99,
        confidence: 0.99,
    }
}

/// A rate search at 99 % attainment and 99 % confidence, constant arrivals.
fn search(target: &VirtualTarget, slo: &str, start: f64) -> (CapacityReport, Vec<StepReport>) {
    let criteria = criteria(slo);
    let plan = ProbePlan {
        base: RunConfig::default(),
        dimension: Dimension::Rate,
        arrival: Arrival::Constant,
        max_concurrency: None,
        measured_requests: probe_requests(0.99, 0.99),
        warmup: Duration::from_secs(10),
        min_duration: Duration::from_secs(30),
        max_probe_duration: Duration::from_secs(3600),
        criteria,
    };
    let search = SearchConfig {
        start,
        min: 0.1,
        max: 1000.0,
        tolerance: 0.05,
        max_probes: 20,
        integer: false,
        budget_secs: None,
        ceiling: None,
    };
    virtual_capacity(target, &plan, search, |_| {})
}

/// Every passing probe is proven after the sequential test's fewest requests without a miss
/// at its share of the error budget (nothing misses below C/S), every failing one refuted
/// within `fail_within` requests.
fn decided_early(report: &CapacityReport, fail_within: u64) {
    let early = 1.0 - criteria("ttft=1s").running_error();
    let fewest = sequential::fewest_requests(0.99, early);
    assert!(2 * fewest < probe_requests(0.99, 0.99));
    for probe in &report.probes {
        assert_eq!(probe.fixed_sample_minimum, Some(459));
        match probe.outcome {
            Outcome::Pass => assert_eq!(probe.decided_after, Some(fewest), "{probe:?}"),
            Outcome::Fail => assert!(probe.measured <= fail_within, "{probe:?}"),
            Outcome::Inconclusive => panic!("undecided: {probe:?}"),
        }
    }
}

/// Prints every probe; returns the requests sent (warm-up included) per probe.
fn sent(report: &CapacityReport, steps: &[StepReport]) -> Vec<u64> {
    let mut sent = Vec::new();
    for (probe, step) in report.probes.iter().zip(steps) {
        let n = step.requests.scheduled + step.requests.warmup;
        sent.push(n);
        eprintln!(
            "load {:>7.3}: {:?} judged {:>5} sent {:>5} ({:.1} s) — {}",
            probe.load, probe.outcome, probe.measured, n, step.interval.last_end_secs, probe.reason
        );
    }
    eprintln!(
        "bounds [{:?}, {:?}] {:?}: {} probes, {} requests, {:.0} s of target time",
        report.lower_bound,
        report.upper_bound,
        report.conclusion,
        report.probes.len(),
        sent.iter().sum::<u64>(),
        report.spent_secs
    );
    sent
}

#[test]
fn four_slots_of_400_ms_serve_10_per_second() {
    // The server: 4 slots × (300 ms + 10 × 10 ms) → exactly 10 req/s.
    let (report, steps) = search(&target(4, 300, 10), "ttft=500ms", 2.0);
    let sent = sent(&report, &steps);
    let (lower, upper) = (report.lower_bound.unwrap(), report.upper_bound.unwrap());
    assert!(lower <= 10.0 && 10.0 < upper, "[{lower}, {upper}]");
    decided_early(&report, 30);
    // Before the sequential test: 13,503 requests, 2,286 s of target time (3,773 and 794 s
    // now): at most 30 % and 40 % of those.
    let total: u64 = sent.iter().sum();
    assert!(
        total < 13_503 * 3 / 10 && report.spent_secs < 2286.0 * 0.4,
        "{total}, {}",
        report.spent_secs
    );
}

#[test]
fn four_slots_of_2_5_s_serve_1_6_per_second() {
    // A llama-server-like 4 slots × (2.4 s + 10 × 10 ms) = 2.5 s → 1.6 req/s.
    let capacity = 1.6;
    let (report, steps) = search(&target(4, 2400, 10), "ttft=3s", 0.5);
    let sent = sent(&report, &steps);
    let (lower, upper) = (report.lower_bound.unwrap(), report.upper_bound.unwrap());
    assert!(lower <= capacity && capacity < upper, "[{lower}, {upper}]");
    // A queue growing steadily looks serially correlated (its design effect is large), so
    // refuting it takes longer, still a quarter of the fixed-sample probe.
    decided_early(&report, 450);
    // Before the sequential test: 11,312 requests, 10,000 s of target time (3,394 and
    // 3,423 s now): at most 35 % and 40 % of those.
    let total: u64 = sent.iter().sum();
    assert!(
        total < 11_312 * 35 / 100 && report.spent_secs < 10_000.0 * 0.4,
        "{total}, {}",
        report.spent_secs
    );
}
