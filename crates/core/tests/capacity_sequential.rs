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
    CapacityReport, Criteria, Dimension, Outcome, ProbePlan, Prober, SearchConfig, find_capacity,
    sequential,
};
use goodput_core::metrics::Slo;
use goodput_core::report::StepReport;
use goodput_core::tokens::Tiktoken;
use goodput_core::workload::SyntheticWorkload;
use goodput_sim::SimServer;
use support::{fixed, in_memory_client, openai};
use tokio_util::sync::CancellationToken;

/// A rate search at 99 % attainment, 99 % confidence against `slots` slots of `ttft_ms` +
/// 10 × 10 ms (11 output tokens), constant arrivals, starting at `start` req/s.
async fn search(
    slots: u32,
    ttft_ms: u64,
    slo: &str,
    start: f64,
) -> (CapacityReport, Vec<StepReport>) {
    let server = SimServer::new(fixed(ttft_ms, 10, slots)).unwrap();
    let criteria = Criteria {
        slo: Slo::parse(slo).unwrap(),
        attainment: 0.99,
        confidence: 0.99,
    };
    let backend =
        OpenAiBackend::new(openai(server.model_name()), in_memory_client(&server)).unwrap();
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
        backend: Arc::new(backend),
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
    };
    let cancel = CancellationToken::new();
    find_capacity(
        Dimension::Rate,
        search,
        &criteria,
        measured,
        |call| {
            let (prober, cancel) = (&prober, &cancel);
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
    let (report, steps) = search(4, 300, "ttft=500ms", 2.0).await;
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
