//! The capacity search against the simulator in virtual time: with C slots and service time S
//! the capacity found is within [0.8, 1.0] × C/S, never above it, and its bounds cover C/S.
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use goodput_core::backend::openai::OpenAiBackend;
use goodput_core::config::{Arrival, RunConfig};
use goodput_core::decide::capacity::early_stopping::probe_requests;
use goodput_core::decide::capacity::{
    CapacityReport, Criteria, Dimension, Outcome, ProbePlan, Prober, SearchConfig, find_capacity,
};
use goodput_core::metrics::Slo;
use goodput_core::tokens::Tiktoken;
use goodput_core::workload::SyntheticWorkload;
use goodput_sim::{SimConfig, SimServer};
use support::{fixed, in_memory_client, openai};
use tokio_util::sync::CancellationToken;

fn prober(
    server: &SimServer,
    dimension: Dimension,
    arrival: Arrival,
    criteria: Criteria,
    output: u32,
) -> Prober {
    let backend =
        OpenAiBackend::new(openai(server.model_name()), in_memory_client(server)).unwrap();
    let plan = ProbePlan {
        base: RunConfig::default(),
        dimension,
        arrival,
        max_concurrency: None,
        measured_requests: probe_requests(criteria.attainment, criteria.confidence),
        warmup: Duration::from_secs(5),
        min_duration: Duration::from_secs(30),
        max_probe_duration: Duration::from_secs(600),
        criteria,
    };
    Prober {
        plan,
        backend: Arc::new(backend),
        workload: Arc::new(SyntheticWorkload {
            input_tokens: 16,
            output_tokens: Some(output),
            seed: 1,
        }),
        counter: Arc::new(Tiktoken::cl100k()),
        streamed: true,
    }
}

async fn search(
    sim: SimConfig,
    dimension: Dimension,
    arrival: Arrival,
    slo: &str,
    output: u32,
    start: f64,
) -> CapacityReport {
    let server = SimServer::new(sim).unwrap();
    let criteria = Criteria {
        slo: Slo::parse(slo).unwrap(),
        attainment: 0.99,
        confidence: 0.99,
    };
    let prober = prober(&server, dimension, arrival, criteria.clone(), output);
    let measured = prober.plan.measured_requests;
    let integer = dimension == Dimension::Concurrency;
    let search = SearchConfig {
        start,
        min: 0.5,
        max: 4096.0,
        tolerance: 0.05,
        max_probes: 20,
        integer,
        budget_secs: None,
        ceiling: None,
    };
    let cancel = CancellationToken::new();
    let (report, steps) = find_capacity(
        dimension,
        search,
        &criteria,
        measured,
        |call| {
            let (prober, cancel) = (&prober, &cancel);
            async move { prober.probe(call, None, cancel).await }
        },
        |probe| {
            eprintln!(
                "probe {:>2} load {:>8.3}: {:?} — {}",
                probe.index, probe.load, probe.outcome, probe.reason
            )
        },
    )
    .await;
    assert_eq!(steps.len(), report.probes.len());
    report
}

#[tokio::test(start_paused = true)]
async fn capacity_of_c_slots_with_service_s_is_c_over_s_at_most() {
    // 8 slots, TTFT 400 ms + 10 × 10 ms → S = 0.5 s, so C/S = 16 req/s. The SLO admits 200 ms
    // of queueing in TTFT.
    let capacity = 16.0;
    let report = search(
        fixed(400, 10, 8),
        Dimension::Rate,
        Arrival::Constant,
        "ttft=600ms",
        11,
        4.0,
    )
    .await;
    let found = report.max_sustainable_rate_per_sec.unwrap();
    let upper = report.upper_bound.unwrap();
    assert!(found <= capacity + 1e-9, "never above C/S: {found}");
    assert!(found >= 0.8 * capacity, "within 0.8 × C/S: {found}");
    assert!(
        capacity < upper,
        "bounds [{found}, {upper}] cover {capacity}"
    );
    assert!(
        report.probes.iter().any(|p| p.outcome == Outcome::Fail),
        "{:?}",
        report.probes
    );
    assert!(report.requests_per_probe >= 459);
    assert!(report.distserve_goodput_per_sec.unwrap() >= found);
}

#[tokio::test(start_paused = true)]
async fn poisson_arrivals_need_headroom_below_c_over_s() {
    let report = search(
        fixed(400, 10, 8),
        Dimension::Rate,
        Arrival::Poisson,
        "ttft=900ms",
        11,
        4.0,
    )
    .await;
    let found = report.max_sustainable_rate_per_sec.unwrap();
    assert!((0.6 * 16.0..16.0).contains(&found), "{found}");
}

#[tokio::test(start_paused = true)]
async fn concurrency_capacity_is_the_slot_count_under_a_ttft_slo() {
    // Closed loop: beyond 8 in flight, requests queue for a whole service time.
    let report = search(
        fixed(400, 10, 8),
        Dimension::Concurrency,
        Arrival::Constant,
        "ttft=600ms",
        11,
        1.0,
    )
    .await;
    assert_eq!(report.max_sustainable_concurrency, Some(8));
    assert_eq!(report.upper_bound, Some(9.0));
}
