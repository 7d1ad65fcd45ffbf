//! The fault matrix: every way a server can misbehave, each injected into part of a run. For
//! each: the run finishes (virtual time bounds it; real-TCP cases are bounded by their
//! timeouts), nothing panics, every failed request is counted under its kind and kept in the
//! journal, the report says how many failed and why, latency percentiles cover the successes,
//! and SLO attainment counts the failures as misses.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use goodput_core::config::{Arrival, LoadSpec, RunConfig, Warmup};
use goodput_core::http::{HttpClient, HttpConfig, Target, TcpConnector, TcpOptions};
use goodput_core::methodology::warnings;
use goodput_core::metrics::{Slo, StepAggregator};
use goodput_core::record::{OutcomeKind, RequestRecord};
use goodput_core::report::{LoadReport, StepReport};
use goodput_core::runner::{
    EndReason, JournalWriter, RecordSink, RunOutcome, Runner, read_journal,
};
use goodput_core::tokens::Tiktoken;
use goodput_core::workload::SyntheticWorkload;
use goodput_sim::SimServer;
use goodput_sim::config::FaultConfig;
use support::{Collect, fixed, in_memory_client, openai};
use tokio_util::sync::CancellationToken;

const REQUESTS: u64 = 16;

fn config(load: LoadSpec) -> RunConfig {
    RunConfig {
        load,
        max_requests: Some(REQUESTS),
        warmup: Warmup::None,
        request_timeout: Duration::from_secs(5),
        no_progress_timeout: Duration::from_secs(30),
        // Generous: every successful request complies, so attainment = successes ÷ all.
        slo: Some(Slo::parse("ttft=10s,tpot=1s,ttft_p99=10s").unwrap()),
        ..RunConfig::default()
    }
}

fn closed_loop() -> RunConfig {
    config(LoadSpec::Closed { concurrency: 4 })
}

/// What a run left behind.
struct Outcome {
    outcome: RunOutcome,
    records: Vec<RequestRecord>,
    journal: Vec<RequestRecord>,
    step: StepReport,
    run_config: RunConfig,
}

/// Runs `config` through `client`, journaling to `dir`.
async fn run(config: RunConfig, client: HttpClient, model: &str, dir: &Path) -> Outcome {
    let backend =
        Arc::new(goodput_core::backend::openai::OpenAiBackend::new(openai(model), client).unwrap());
    let workload = Arc::new(SyntheticWorkload {
        input_tokens: 8,
        output_tokens: Some(12),
        seed: 1,
    });
    let runner = Runner::new(
        config.clone(),
        backend,
        workload,
        Arc::new(Tiktoken::cl100k()),
        true,
    );
    let path = dir.join("requests.jsonl");
    let mut journal = JournalWriter::create(&path).unwrap();
    let mut collect = Collect::default();
    let mut aggregator = StepAggregator::new(config.slo.clone(), config.window);
    let outcome = {
        let mut sinks: [&mut dyn RecordSink; 3] = [&mut journal, &mut collect, &mut aggregator];
        runner.run(&mut sinks, CancellationToken::new()).await
    };
    journal.sync().unwrap();
    let journal = read_journal(&path).unwrap();
    assert!(!journal.torn_last_line);
    Outcome {
        outcome,
        records: collect.0,
        journal: journal.records,
        step: aggregator.report(LoadReport::from(&config.load)),
        run_config: config,
    }
}

/// Runs against the in-memory simulator (exact under paused time) with `faults`.
async fn run_sim(faults: FaultConfig) -> Outcome {
    let mut sim = fixed(20, 5, 4);
    sim.faults = faults;
    let server = SimServer::new(sim).unwrap();
    let dir = tempfile::tempdir().unwrap();
    run(
        closed_loop(),
        in_memory_client(&server),
        server.model_name(),
        dir.path(),
    )
    .await
}

/// Everything every fault must satisfy; returns the failed records.
fn assert_accounted(result: &Outcome, kind: OutcomeKind) -> Vec<&RequestRecord> {
    let step = &result.step;
    let requests = &step.requests;
    assert_eq!(result.outcome.end_reason, EndReason::Completed, "{kind}");
    assert_eq!(
        result.records.len() as u64,
        REQUESTS,
        "{kind}: all recorded"
    );
    assert_eq!(
        result.journal.len() as u64,
        REQUESTS,
        "{kind}: all journaled"
    );
    assert_eq!(requests.scheduled, REQUESTS);
    assert_eq!(requests.completed + requests.failed, REQUESTS, "{kind}");
    let failed: Vec<&RequestRecord> = result.records.iter().filter(|r| !r.is_ok()).collect();
    assert!(!failed.is_empty(), "{kind}: the fault struck");
    for record in &failed {
        let failure = record.failure.as_ref().unwrap();
        assert_eq!(failure.kind, kind, "{failure:?}");
        assert!(!failure.message.is_empty());
    }
    assert_eq!(requests.failed, failed.len() as u64);
    assert_eq!(
        requests.failed_by_kind.get(kind.as_str()),
        Some(&requests.failed),
        "{kind}: {:?}",
        requests.failed_by_kind
    );
    assert_eq!(
        step.latency_ms.e2e.count, requests.completed,
        "{kind}: latency describes the successes"
    );
    let attained = step.goodput.attained_fraction.unwrap();
    let expected = requests.completed as f64 / REQUESTS as f64;
    assert!(
        (attained - expected).abs() < 1e-12,
        "{kind}: failures count as misses ({attained} vs {expected})"
    );
    // More than 1 % failed: a p99 objective falls among the failures and fails.
    let objective = &step.goodput.objectives[0];
    assert!(!objective.pass && objective.measured_ms.is_none(), "{kind}");
    assert_says_why(result, kind);
    assert_rebuilds(result);
    failed
}

/// The report's warnings name the number of failures and their kind.
fn assert_says_why(result: &Outcome, kind: OutcomeKind) {
    let warnings = warnings::check(
        &result.run_config,
        std::slice::from_ref(&result.step),
        result.outcome.end_reason,
    );
    let failures = warnings.iter().find(|w| w.code == "failures").unwrap();
    let said = format!("{} {kind}", result.step.requests.failed);
    assert!(failures.message.contains(&said), "{}", failures.message);
    let first = result
        .records
        .iter()
        .filter(|r| r.outcome() == kind)
        .min_by_key(|r| r.index)
        .unwrap();
    let example = &result.step.requests.failure_examples[kind.as_str()];
    assert_eq!(example, &first.failure.as_ref().unwrap().message);
}

/// The journal alone rebuilds the same step report.
fn assert_rebuilds(result: &Outcome) {
    let config = &result.run_config;
    let mut rebuilt = StepAggregator::new(config.slo.clone(), config.window);
    for record in &result.journal {
        rebuilt.add(record);
    }
    assert_eq!(rebuilt.report(LoadReport::from(&config.load)), result.step);
}

fn half(set: impl FnOnce(&mut FaultConfig, f64)) -> FaultConfig {
    let mut faults = FaultConfig::default();
    set(&mut faults, 0.5);
    faults
}

#[tokio::test(start_paused = true)]
async fn http_500() {
    let result = run_sim(half(|f, r| f.http_500 = r)).await;
    for record in assert_accounted(&result, OutcomeKind::Http) {
        assert_eq!(record.status, Some(500));
        assert!(record.failure.as_ref().unwrap().message.contains("500"));
    }
    let by_status = &result.step.requests.failed_by_status;
    assert_eq!(by_status.get("500"), Some(&result.step.requests.failed));
}

#[tokio::test(start_paused = true)]
async fn http_429_with_retry_after_is_counted_and_never_retried() {
    let mut faults = half(|f, r| f.http_429 = r);
    faults.retry_after_secs = 3;
    let mut sim = fixed(20, 5, 4);
    sim.faults = faults;
    let server = SimServer::new(sim).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let result = run(
        closed_loop(),
        in_memory_client(&server),
        server.model_name(),
        dir.path(),
    )
    .await;
    let failed = assert_accounted(&result, OutcomeKind::Http);
    for record in &failed {
        assert_eq!(record.status, Some(429));
        assert_eq!(record.retries, 0, "never re-sent");
        let message = &record.failure.as_ref().unwrap().message;
        assert!(message.contains("retry-after: 3"), "{message}");
        assert!(
            record
                .headers
                .iter()
                .any(|(name, value)| name == "retry-after" && value == "3")
        );
    }
    // The server saw each refused request exactly once.
    let metrics = server.metrics_text();
    let refused = format!("reason=\"injected_http_429\"}} {}", failed.len());
    assert!(metrics.contains(&refused), "{metrics}");
    assert_eq!(
        result.step.requests.failed_by_status.get("429"),
        Some(&(failed.len() as u64))
    );
}

#[tokio::test(start_paused = true)]
async fn http_400() {
    let result = run_sim(half(|f, r| f.http_400 = r)).await;
    for record in assert_accounted(&result, OutcomeKind::Http) {
        assert_eq!(record.status, Some(400));
        let message = &record.failure.as_ref().unwrap().message;
        assert!(message.contains("bad request"), "{message}");
    }
}

#[tokio::test(start_paused = true)]
async fn reset_mid_stream() {
    let result = run_sim(half(|f, r| f.reset_mid_stream = r)).await;
    for record in assert_accounted(&result, OutcomeKind::Transport) {
        assert!(
            !record.chunks.is_empty(),
            "tokens before the reset are kept"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn stall_before_the_first_byte_ends_at_the_request_timeout() {
    let result = run_sim(half(|f, r| f.stall_before_response = r)).await;
    for record in assert_accounted(&result, OutcomeKind::Timeout) {
        assert_eq!(record.response_us, None, "no status line ever came");
        assert_eq!(record.end_us - record.dequeued_us, 5_000_000);
    }
}

#[tokio::test(start_paused = true)]
async fn stall_mid_stream_ends_at_the_request_timeout() {
    let result = run_sim(half(|f, r| f.stall_mid_stream = r)).await;
    for record in assert_accounted(&result, OutcomeKind::Timeout) {
        assert!(
            !record.chunks.is_empty(),
            "tokens before the stall are kept"
        );
        assert_eq!(record.end_us - record.dequeued_us, 5_000_000);
    }
}

#[tokio::test(start_paused = true)]
async fn malformed_sse() {
    let result = run_sim(half(|f, r| f.sse_garbage = r)).await;
    for record in assert_accounted(&result, OutcomeKind::Protocol) {
        let message = &record.failure.as_ref().unwrap().message;
        assert!(message.contains("UTF-8"), "{message}");
    }
    let result = run_sim(half(|f, r| f.malformed_sse = r)).await;
    assert_accounted(&result, OutcomeKind::Protocol);
}

#[tokio::test(start_paused = true)]
async fn invalid_json_in_a_chunk() {
    let result = run_sim(half(|f, r| f.invalid_json_chunk = r)).await;
    for record in assert_accounted(&result, OutcomeKind::Protocol) {
        let message = &record.failure.as_ref().unwrap().message;
        assert!(
            message.contains("invalid JSON in stream chunk"),
            "{message}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn error_object_mid_stream() {
    let result = run_sim(half(|f, r| f.error_mid_stream = r)).await;
    for record in assert_accounted(&result, OutcomeKind::StreamError) {
        let message = &record.failure.as_ref().unwrap().message;
        assert!(message.contains("failed mid-stream"), "{message}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_line_of_many_megabytes_is_refused_without_reading_it_all() {
    let mut faults = half(|f, r| f.oversized_line = r);
    faults.oversized_line_bytes = 12 << 20;
    let result = run_sim(faults).await;
    for record in assert_accounted(&result, OutcomeKind::Protocol) {
        let message = &record.failure.as_ref().unwrap().message;
        assert!(message.contains("oversized stream line"), "{message}");
    }
}

#[tokio::test(start_paused = true)]
async fn a_response_that_never_ends_stops_at_the_request_timeout() {
    let result = run_sim(half(|f, r| f.endless_response = r)).await;
    for record in assert_accounted(&result, OutcomeKind::Timeout) {
        // Keep-alives kept arriving, so only the request timeout could end it.
        assert_eq!(record.end_us - record.dequeued_us, 5_000_000);
        assert!(!record.chunks.is_empty());
    }
}

/// A TCP client whose connect timeout (resolving included) is 2 s.
fn tcp_client(url: &str) -> HttpClient {
    let options = TcpOptions {
        connect_timeout: Duration::from_secs(2),
        ..TcpOptions::default()
    };
    let target = Target::parse(url).unwrap();
    HttpClient::new(
        target,
        Arc::new(TcpConnector::new(options)),
        HttpConfig::default(),
    )
}

/// Every request failed with `kind` and a message containing `needle`; nothing lost.
fn assert_all_failed(result: &Outcome, kind: OutcomeKind, needle: &str) {
    assert_eq!(result.outcome.end_reason, EndReason::Completed);
    assert_eq!(result.journal.len() as u64, REQUESTS);
    let requests = &result.step.requests;
    assert_eq!(requests.failed, REQUESTS);
    assert_eq!(requests.failed_by_kind.get(kind.as_str()), Some(&REQUESTS));
    assert_eq!(requests.sent, 0, "nothing reached a server");
    for record in &result.records {
        let failure = record.failure.as_ref().unwrap();
        assert_eq!(failure.kind, kind);
        assert!(failure.message.contains(needle), "{}", failure.message);
    }
    assert_eq!(result.step.goodput.attained_fraction, Some(0.0));
    assert_says_why(result, kind);
}

#[tokio::test]
async fn connection_refused() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let dir = tempfile::tempdir().unwrap();
    let client = tcp_client(&format!("http://{addr}/v1"));
    let result = run(closed_loop(), client, "m", dir.path()).await;
    assert_all_failed(&result, OutcomeKind::Transport, "refused");
}

#[tokio::test]
async fn dns_failure() {
    // `.invalid` never resolves (RFC 2606); the connect timeout bounds a slow resolver.
    let dir = tempfile::tempdir().unwrap();
    let client = tcp_client("http://goodput-fault-matrix.invalid:8000/v1");
    let started = std::time::Instant::now();
    let result = run(closed_loop(), client, "m", dir.path()).await;
    assert_all_failed(
        &result,
        OutcomeKind::Transport,
        "goodput-fault-matrix.invalid",
    );
    assert!(started.elapsed() < Duration::from_secs(60));
}

/// The server stops listening (and drops its connections) mid-run: requests in flight are cut,
/// later ones are refused; the run finishes and every request is accounted for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_closes_its_listening_socket_mid_run() {
    let sim = goodput_sim::spawn(fixed(20, 5, 64), ([127, 0, 0, 1], 0).into())
        .await
        .unwrap();
    let model = sim.server().model_name().to_string();
    let client = tcp_client(&format!("{}/v1", sim.base_url()));
    let load = LoadSpec::Open {
        rate_per_sec: 20.0,
        arrival: Arrival::Constant,
        max_concurrency: None,
    };
    let killer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(400)).await;
        sim.shutdown_and_wait().await.unwrap();
    });
    let dir = tempfile::tempdir().unwrap();
    let result = run(config(load), client, &model, dir.path()).await;
    killer.await.unwrap();
    assert_eq!(result.outcome.end_reason, EndReason::Completed);
    assert_eq!(result.journal.len() as u64, REQUESTS);
    let requests = &result.step.requests;
    assert!(requests.completed >= 3, "{requests:?}");
    assert!(requests.failed >= 5, "{requests:?}");
    assert_eq!(requests.completed + requests.failed, REQUESTS);
    assert_eq!(
        requests.failed_by_kind.get("transport"),
        Some(&requests.failed),
        "{requests:?}"
    );
    assert!(
        result
            .records
            .iter()
            .filter_map(|r| r.failure.as_ref())
            .any(|f| f.message.contains("refused")),
        "requests after the close are refused"
    );
    assert_says_why(&result, OutcomeKind::Transport);
}
