//! How many requests a capacity search spends, against servers whose capacity is known by
//! arithmetic: the fixed-timing simulator with C slots, constant service time S and constant
//! arrivals has capacity exactly C/S (below it no request ever waits; above it the queue grows
//! without bound). The search must bracket C/S, and each probe decided far from it must end
//! long before the fixed-sample probe length (`probe_requests`) — the sequential test of
//! `decide::capacity::sequential` ends a probe as soon as its verdict holds.
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use goodput_core::backend::openai::OpenAiBackend;
use goodput_core::config::{Arrival, RunConfig};
use goodput_core::decide::capacity::early_stopping::probe_requests;
use goodput_core::decide::capacity::{
    CapacityReport, Criteria, Dimension, Outcome, ProbePlan, Prober, SearchConfig, calibration,
    find_capacity, sequential,
};
use goodput_core::metrics::Slo;
use goodput_core::report::StepReport;
use goodput_core::tokens::Tiktoken;
use goodput_core::workload::SyntheticWorkload;
use goodput_sim::SimServer;
use support::{fixed, in_memory_client, openai, run_sim};
use tokio_util::sync::CancellationToken;

/// A rate search at 99 % attainment, 99 % confidence, `ttft=500ms`, against 4 slots of
/// 300 ms plus 10 × 10 ms (11 output tokens), constant arrivals, starting at `start` req/s under a
/// calibration's `ceiling`.
async fn search(start: f64, ceiling: Option<f64>) -> (CapacityReport, Vec<StepReport>) {
    let server = SimServer::new(fixed(300, 10, 4)).unwrap();
    let criteria = Criteria {
        slo: Slo::parse("ttft=500ms").unwrap(),
        attainment: 0.99,
        confidence: 0.99,
    };
    let backend = OpenAiBackend::new(openai(server.model_name()), in_memory_client(&server));
    let measured = probe_requests(0.99, 0.99);
    let plan = ProbePlan {
        base: RunConfig::default(),
        dimension: Dimension::Rate,
        arrival: Arrival::Constant,
        max_concurrency: None,
        measured_requests: measured,
        warmup: Duration::from_secs(5),
        min_duration: Duration::from_secs(30),
        max_probe_duration: Duration::from_secs(600),
        criteria: criteria.clone(),
    };
    let prober = Prober {
        plan,
        backend: Arc::new(backend.unwrap()),
        workload: Arc::new(SyntheticWorkload {
            input_tokens: 16,
            output_tokens: Some(11),
            seed: 1,
        }),
        counter: Arc::new(Tiktoken::cl100k()),
        streamed: true,
    };
    let search = SearchConfig {
        start,
        min: 0.5,
        max: 4096.0,
        tolerance: 0.05,
        max_probes: 20,
        integer: false,
        budget_secs: None,
        ceiling,
    };
    let cancel = &CancellationToken::new();
    find_capacity(
        Dimension::Rate,
        search,
        &criteria,
        measured,
        |call| {
            let prober = &prober;
            async move { prober.probe(call, None, cancel).await }
        },
        |_| {},
    )
    .await
}

fn summary(report: &CapacityReport, steps: &[StepReport]) -> (u64, f64) {
    let mut total = 0;
    for (probe, step) in report.probes.iter().zip(steps) {
        let sent = step.requests.scheduled + step.requests.warmup;
        total += sent;
        eprintln!(
            "load {:>7.3}: {:?} judged {:>5} sent {:>5} ({:.1} s) — {}",
            probe.load,
            probe.outcome,
            probe.measured,
            sent,
            step.interval.last_end_secs,
            probe.reason
        );
    }
    eprintln!(
        "bounds [{:?}, {:?}] {:?}: {} probes, {total} requests, {:.0} s of target time",
        report.lower_bound,
        report.upper_bound,
        report.conclusion,
        report.probes.len(),
        report.spent_secs
    );
    (total, report.spent_secs)
}

#[tokio::test(start_paused = true)]
async fn four_slots_of_400_ms_serve_10_per_second_and_probes_stop_when_they_know() {
    // 4 slots × (300 ms + 10 × 10 ms) = capacity 10 req/s exactly (the server).
    let capacity = 10.0;
    let (report, steps) = search(2.0, None).await;
    let (total, spent) = summary(&report, &steps);
    let (lower, upper) = (report.lower_bound.unwrap(), report.upper_bound.unwrap());
    assert!(lower <= capacity && capacity < upper, "[{lower}, {upper}]");
    // Nothing ever misses below C/S: every passing probe is proven by the sequential test at
    // its share of the error budget after as many requests without a miss as it needs (693),
    // under half the fixed-sample probe, beside the fixed-sample minimum (459).
    let criteria = Criteria {
        slo: Slo::parse("ttft=500ms").unwrap(),
        attainment: 0.99,
        confidence: 0.99,
    };
    let fewest = sequential::fewest_requests(0.99, 1.0 - criteria.running_error());
    assert_eq!(fewest, 693);
    for probe in &report.probes {
        assert_eq!(probe.fixed_sample_minimum, Some(459));
        match probe.outcome {
            Outcome::Pass => {
                assert_eq!(probe.decided_after, Some(fewest), "{probe:?}");
                assert_eq!(probe.measured, fewest);
            }
            Outcome::Fail => assert!(probe.measured < 100, "{probe:?}"),
            Outcome::Inconclusive => {}
        }
    }
    // Before the sequential test this search measured 6,528 requests in 1,418 s (3,347 and
    // 747 s now): at most 60 % of either.
    assert!(
        total < 6528 * 6 / 10 && spent < 1418.0 * 0.6,
        "{total} requests, {spent} s"
    );
}

#[tokio::test(start_paused = true)]
async fn a_search_from_the_calibration_passes_near_the_capacity_and_ends_within_five_minutes() {
    // The server again (capacity 10 req/s exactly), searched as `goodput capacity`
    // does without --start: a closed-loop calibration at 16 clients, then the first probe just
    // under its throughput. At 99 %/99 % proving a load passes takes 693 requests whatever the
    // load, so a pass at half the capacity costs twice one near it: from half the throughput
    // the search took 290 s (passes at 5 and 10 req/s); it must now stay under 5 minutes of
    // target time, calibration included, and pass at most twice, both above 90 % of C/S.
    let capacity = 10.0;
    let calibration = run_sim(
        fixed(300, 10, 4),
        calibration::calibration_config(&RunConfig::default(), None),
        16,
        11,
    )
    .await;
    let throughput = calibration.step.throughput.requests_per_sec;
    assert!((throughput - capacity).abs() < 0.2, "{throughput} req/s");
    let start = calibration::calibrated_start(throughput).unwrap();
    let (report, steps) = search(start, Some(throughput)).await;
    let (_, spent) = summary(&report, &steps);
    let (lower, upper) = (report.lower_bound.unwrap(), report.upper_bound.unwrap());
    assert!(lower <= capacity && capacity < upper, "[{lower}, {upper}]");
    let passes: Vec<f64> = report
        .probes
        .iter()
        .filter(|p| p.outcome == Outcome::Pass)
        .map(|p| p.load)
        .collect();
    assert!(
        passes.len() <= 2 && passes.iter().all(|l| *l >= 0.9 * capacity),
        "{passes:?}"
    );
    let calibrated = calibration.step.interval.last_end_secs;
    assert!(calibrated + spent < 300.0, "{calibrated} s + {spent} s");
}
