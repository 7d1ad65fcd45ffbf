//! Tests of in-process measurement in paused (virtual) time, where every call's duration is
//! exact, so the figures can be checked against their definitions.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use super::*;
use crate::config::{LoadSpec, Warmup};

fn closed(concurrency: u32, warmup: u64, measured: u64) -> RunConfig {
    RunConfig {
        load: LoadSpec::Closed { concurrency },
        max_requests: Some(warmup + measured),
        warmup: Warmup::Requests(warmup),
        ..RunConfig::default()
    }
}

async fn sleep_ms(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

#[tokio::test(start_paused = true)]
async fn a_call_of_known_cost_gives_exact_latency_and_throughput() {
    let spec = MeasureSpec::new("sleep 10ms").with_batch_size(4);
    let report = measure(
        &closed(1, 5, 200),
        &spec,
        |_| async {
            sleep_ms(10).await;
            Ok(Completion::tokens(30))
        },
        CancellationToken::new(),
    )
    .await
    .unwrap();
    let step = &report.steps[0];
    assert_eq!(step.requests.completed, 200);
    assert_eq!(step.requests.warmup, 5);
    let e2e = &step.latency_ms.e2e;
    assert_eq!((e2e.p50, e2e.max, e2e.count), (Some(10.0), Some(10.0), 200));
    let close = |a: f64, b: f64| (a - b).abs() < 1e-6 * b;
    assert!(close(step.throughput.requests_per_sec, 100.0), "{step:?}");
    assert!(close(step.throughput.items_per_sec, 400.0));
    assert!(close(step.throughput.output_tokens_per_sec, 3000.0));
    assert_eq!(step.tokens.output_total, 200 * 30);
    assert!(step.stability.stable);
    assert_eq!(report.run.end_reason, "completed");
    assert_eq!(report.run.api, "in-process");
    let codes: Vec<&str> = report.warnings.iter().map(|w| w.code.as_str()).collect();
    assert!(!codes.contains(&"no_usage") && !codes.contains(&"usage_disagrees"));
    assert!(codes.contains(&"short_window"), "{codes:?}");
}

#[tokio::test(start_paused = true)]
async fn concurrent_calls_overlap() {
    let report = measure(
        &closed(8, 8, 400),
        &MeasureSpec::new("sleep 20ms"),
        |_| async {
            sleep_ms(20).await;
            Ok(Completion::done())
        },
        CancellationToken::new(),
    )
    .await
    .unwrap();
    let step = &report.steps[0];
    assert_eq!(step.latency_ms.e2e.p99, Some(20.0));
    // Eight calls of 20 ms at a time: 400 per second.
    let rps = step.throughput.requests_per_sec;
    assert!((rps - 400.0).abs() < 4.0, "{rps}");
    assert_eq!(step.tokens.output_total, 0);
}

#[tokio::test(start_paused = true)]
async fn errors_are_failed_requests_of_their_kind() {
    let report = measure(
        &closed(2, 0, 40),
        &MeasureSpec::new("fails on odd calls"),
        |index| async move {
            sleep_ms(5).await;
            if index % 2 == 1 {
                Err(call_error(format!("ValueError: odd input {index}")))
            } else {
                Ok(Completion::done())
            }
        },
        CancellationToken::new(),
    )
    .await
    .unwrap();
    let requests = &report.steps[0].requests;
    assert_eq!((requests.completed, requests.failed), (20, 20));
    assert_eq!(requests.failed_by_kind.get("error"), Some(&20));
    assert_eq!(
        requests.failure_examples.get("error").map(String::as_str),
        Some("ValueError: odd input 1")
    );
    assert!(report.warnings.iter().any(|w| w.code == "failures"));
}

#[tokio::test(start_paused = true)]
async fn cancelling_keeps_what_finished() {
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    tokio::spawn(async move {
        sleep_ms(1005).await;
        stop.cancel();
    });
    let config = RunConfig {
        max_requests: None,
        duration: Some(Duration::from_secs(60)),
        ..closed(1, 0, 0)
    };
    let report = measure(
        &config,
        &MeasureSpec::new("sleep 10ms"),
        |_| async {
            sleep_ms(10).await;
            Ok(Completion::done())
        },
        cancel,
    )
    .await
    .unwrap();
    let requests = &report.steps[0].requests;
    assert_eq!(requests.completed, 100);
    assert_eq!(requests.failed_by_kind.get("cancelled"), Some(&1));
    assert_eq!(report.run.end_reason, "interrupted");
    assert!(report.warnings.iter().any(|w| w.code == "interrupted"));
}

#[tokio::test]
async fn bad_settings_are_refused_before_any_call() {
    let call = |_| async { Ok(Completion::done()) };
    let zero_batch = MeasureSpec::new("x").with_batch_size(0);
    let error = measure(
        &closed(1, 0, 1),
        &zero_batch,
        call,
        CancellationToken::new(),
    )
    .await;
    assert_eq!(error.unwrap_err(), MeasureError::BatchSize);
    let error = measure(
        &closed(0, 0, 1),
        &MeasureSpec::new("x"),
        call,
        CancellationToken::new(),
    )
    .await;
    assert!(error.unwrap_err().to_string().contains("--concurrency"));
}
