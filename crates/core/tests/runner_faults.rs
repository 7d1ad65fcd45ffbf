//! Every fault the simulator injects ends up counted under the right kind, in the records and
//! the report; stalls end at their timeout; a dead server ends the run at the no-progress
//! deadline; cancelling keeps every finished request. Virtual time, in-memory connections.
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use goodput_core::config::{LoadSpec, RunConfig, Warmup};
use goodput_core::record::OutcomeKind;
use goodput_core::runner::EndReason;
use goodput_core::workload::SyntheticWorkload;
use goodput_sim::SimServer;
use goodput_sim::config::FaultConfig;
use support::{fixed, in_memory_client, openai, run_sim, run_with};
use tokio_util::sync::CancellationToken;

fn closed(requests: u64) -> RunConfig {
    RunConfig {
        load: LoadSpec::Closed { concurrency: 2 },
        max_requests: Some(requests),
        warmup: Warmup::None,
        request_timeout: Duration::from_secs(5),
        ..RunConfig::default()
    }
}

async fn run_with_faults(faults: FaultConfig, requests: u64) -> support::RunResult {
    let mut sim = fixed(20, 5, 2);
    sim.faults = faults;
    run_sim(sim, closed(requests), 8, 8).await
}

fn only(kind: &str, rate: f64) -> FaultConfig {
    let mut faults = FaultConfig::default();
    match kind {
        "http_500" => faults.http_500 = rate,
        "http_429" => faults.http_429 = rate,
        "reset" => faults.reset_mid_stream = rate,
        "stall" => faults.stall_mid_stream = rate,
        "malformed" => faults.malformed_sse = rate,
        "error" => faults.error_mid_stream = rate,
        other => panic!("unknown fault {other}"),
    }
    faults
}

#[tokio::test(start_paused = true)]
async fn each_fault_is_counted_under_its_kind() {
    let cases = [
        ("http_500", OutcomeKind::Http, Some(500)),
        ("http_429", OutcomeKind::Http, Some(429)),
        ("reset", OutcomeKind::Transport, None),
        ("stall", OutcomeKind::Timeout, None),
        ("malformed", OutcomeKind::Protocol, None),
        ("error", OutcomeKind::StreamError, None),
    ];
    for (fault, kind, status) in cases {
        let result = run_with_faults(only(fault, 1.0), 4).await;
        assert_eq!(
            result.records.len(),
            4,
            "{fault}: every request is recorded"
        );
        for record in &result.records {
            let failure = record
                .failure
                .as_ref()
                .unwrap_or_else(|| panic!("{fault}: should fail"));
            assert_eq!(failure.kind, kind, "{fault}: {failure:?}");
            if let Some(status) = status {
                assert_eq!(failure.status, Some(status));
            }
        }
        let step = &result.step;
        assert_eq!(step.requests.failed, 4, "{fault}");
        assert_eq!(
            step.requests.failed_by_kind.get(kind.as_str()),
            Some(&4),
            "{fault}"
        );
        assert_eq!(step.requests.completed, 0);
        assert_eq!(result.outcome.end_reason, EndReason::Completed);
    }
}

#[tokio::test(start_paused = true)]
async fn a_stalled_stream_ends_at_the_request_timeout_and_keeps_its_tokens() {
    let result = run_with_faults(only("stall", 1.0), 2).await;
    for record in &result.records {
        let elapsed = record.end_us - record.dequeued_us;
        assert!(
            (5_000_000..5_010_000).contains(&elapsed),
            "ended after {elapsed} µs"
        );
        assert!(
            !record.chunks.is_empty(),
            "tokens before the stall are kept"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn mixed_faults_leave_successes_measured_and_failures_counted() {
    let faults = FaultConfig {
        http_500: 0.1,
        reset_mid_stream: 0.1,
        error_mid_stream: 0.1,
        ..FaultConfig::default()
    };
    let result = run_with_faults(faults, 200).await;
    let step = &result.step;
    assert_eq!(step.requests.completed + step.requests.failed, 200);
    assert!(
        step.requests.failed > 30 && step.requests.failed < 90,
        "{:?}",
        step.requests
    );
    assert_eq!(
        step.latency_ms.ttft.count, step.requests.completed,
        "latency covers successes"
    );
    let by_kind: u64 = step.requests.failed_by_kind.values().sum();
    assert_eq!(by_kind, step.requests.failed);
}

#[tokio::test(start_paused = true)]
async fn a_dead_server_ends_the_run_at_the_no_progress_deadline() {
    let mut sim = fixed(20, 5, 2);
    sim.faults = only("stall", 1.0);
    let server = SimServer::new(sim).unwrap();
    let config = RunConfig {
        request_timeout: Duration::from_secs(3600),
        no_progress_timeout: Duration::from_secs(10),
        ..closed(10)
    };
    let workload = Arc::new(SyntheticWorkload {
        input_tokens: 8,
        output_tokens: Some(8),
        seed: 1,
    });
    let started = tokio::time::Instant::now();
    let result = run_with(
        config,
        in_memory_client(&server),
        openai(server.model_name()),
        workload,
        CancellationToken::new(),
    )
    .await;
    assert_eq!(result.outcome.end_reason, EndReason::NoProgress);
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        result.records.len(),
        2,
        "the two in-flight requests are recorded"
    );
    for record in &result.records {
        let failure = record.failure.as_ref().unwrap();
        assert_eq!(failure.kind, OutcomeKind::Timeout);
        assert!(failure.message.contains("abandoned"), "{}", failure.message);
    }
}

#[tokio::test(start_paused = true)]
async fn cancelling_records_every_request_it_started() {
    let server = SimServer::new(fixed(100, 10, 4)).unwrap();
    let config = RunConfig {
        max_requests: None,
        duration: Some(Duration::from_secs(60)),
        ..closed(0)
    };
    let config = RunConfig {
        load: LoadSpec::Closed { concurrency: 4 },
        ..config
    };
    let workload = Arc::new(SyntheticWorkload {
        input_tokens: 8,
        output_tokens: Some(20),
        seed: 1,
    });
    let cancel = CancellationToken::new();
    let stopper = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(1_150)).await;
        stopper.cancel();
    });
    let result = run_with(
        config,
        in_memory_client(&server),
        openai(server.model_name()),
        workload,
        cancel,
    )
    .await;
    assert_eq!(result.outcome.end_reason, EndReason::Interrupted);
    let cancelled = result
        .records
        .iter()
        .filter(|r| r.outcome() == OutcomeKind::Cancelled)
        .count();
    let completed = result.records.iter().filter(|r| r.is_ok()).count();
    // 300 ms per request on 4 slots: 3 full rounds done, the 4th round in flight.
    assert_eq!(completed, 12);
    assert_eq!(cancelled, 4);
    for record in result.records.iter().filter(|r| !r.is_ok()) {
        assert!(!record.chunks.is_empty(), "partial answers are kept");
    }
}
