//! `--api v2 --grpc` (KServe v2 / Triton over gRPC) end to end against a tonic server written
//! in the test (`support/grpc_server.rs`, its own messages from `grpc_service.proto`, exact
//! timing): `ModelInfer` answered after 30 ms (items = rows, E2E ≥ 30 ms), `ModelStreamInfer`
//! answered with 10 responses 20 ms apart after 50 ms (TTFT 50 ms, TPOT 20 ms, 10 tokens per
//! request), a gRPC status error and a stream `error_message` as failures with the server's
//! message; the server's own counts equal what goodput sent; the embedded simulator serving
//! both methods (a fixed-timing engine: TTFT and TPOT as configured); flags refused where they
//! cannot apply.
#![allow(clippy::unwrap_used)]

#[path = "support/grpc_server.rs"]
mod grpc_server;
mod support;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use grpc_server::{Script, start};
use serde_json::Value;
use support::{goodput, read_json, validate_against_schema};

fn script() -> Arc<Script> {
    Arc::new(Script {
        delay: Duration::from_millis(30),
        first: Duration::from_millis(50),
        gap: Duration::from_millis(20),
        responses: 10,
        ..Script::default()
    })
}

/// `goodput run` against `port` with `args`; its exit status, stderr and report.
fn run(port: u16, args: &[&str]) -> (bool, String, Value) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let target = format!("http://127.0.0.1:{port}");
    let output = goodput()
        .args(["run", "--quiet", "--api", "v2", "--target", &target])
        .args(["--warmup", "0", "--out", out.to_str().unwrap()])
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    let report = std::fs::read_to_string(out.join("report.json"))
        .map(|_| read_json(&out.join("report.json")))
        .unwrap_or(Value::Null);
    (output.status.success(), stderr, report)
}

fn ms(value: &Value) -> f64 {
    value.as_f64().unwrap()
}

#[test]
fn model_infer_counts_rows_and_the_server_saw_every_request() {
    let script = script();
    let port = start(Arc::clone(&script));
    let args = ["--grpc", "unary", "--model", "m", "--tensor-shape", "4x8"];
    let (ok, stderr, report) = run(
        port,
        &[&args[..], &["--concurrency", "2", "--requests", "12"]].concat(),
    );
    assert!(ok, "{stderr}");
    validate_against_schema(&report);
    let step = &report["steps"][0];
    assert_eq!(step["requests"]["completed"], 12, "{}", step["requests"]);
    assert_eq!(script.unary.load(Ordering::SeqCst), 12);
    assert_eq!(script.rows.load(Ordering::SeqCst), 48);
    let t = &step["throughput"];
    let ratio = ms(&t["items_per_sec"]) / ms(&t["requests_per_sec"]);
    assert!((ratio - 4.0).abs() < 1e-9, "{t}");
    let e2e = &step["latency_ms"]["e2e"];
    assert!(ms(&e2e["min"]) >= 30.0, "{e2e}");
    assert!(ms(&e2e["mean"]) < 30.0 + 100.0, "{e2e}");
}

#[test]
fn model_stream_infer_times_each_response_as_a_token() {
    let script = script();
    let port = start(Arc::clone(&script));
    let args = ["--grpc", "stream", "--model", "m", "--tensor-shape", "1x8"];
    let (ok, stderr, report) = run(
        port,
        &[&args[..], &["--concurrency", "2", "--requests", "8"]].concat(),
    );
    assert!(ok, "{stderr}");
    validate_against_schema(&report);
    let step = &report["steps"][0];
    assert_eq!(step["requests"]["completed"], 8, "{}", step["requests"]);
    assert_eq!(script.streamed.load(Ordering::SeqCst), 8);
    let latency = &step["latency_ms"];
    // The first response 50 ms after the request, then one every 20 ms: TTFT 50 ms, TPOT 20 ms
    // (the server keeps exact offsets from the request's arrival; loopback adds little).
    let (ttft, tpot) = (&latency["ttft"], &latency["tpot"]);
    assert!(
        ms(&ttft["min"]) >= 50.0 && ms(&ttft["p50"]) < 50.0 + 25.0,
        "{ttft}"
    );
    assert!((ms(&tpot["p50"]) - 20.0).abs() < 2.5, "{tpot}");
    assert!((ms(&tpot["mean"]) - 20.0).abs() < 3.0, "{tpot}");
    let e2e = &latency["e2e"];
    assert!(ms(&e2e["min"]) >= 50.0 + 9.0 * 20.0, "{e2e}");
    // Ten tokens per request, every one a response.
    let tokens = &step["tokens"];
    assert_eq!(tokens["output_total"], 80, "{tokens}");
}

#[test]
fn grpc_status_errors_and_stream_errors_are_failures_with_the_servers_message() {
    let script = script();
    let port = start(Arc::clone(&script));
    let unary = [
        "--grpc",
        "unary",
        "--model",
        "missing",
        "--requests",
        "3",
        "--concurrency",
        "1",
    ];
    let (_, stderr, report) = run(port, &unary);
    let requests = &report["steps"][0]["requests"];
    assert_eq!(requests["failed"], 3, "{requests} {stderr}");
    let examples = requests["failure_examples"].to_string();
    assert!(
        examples.contains("model 'missing' is not found"),
        "{examples}"
    );
    assert!(examples.contains("NotFound"), "{examples}");
    assert_eq!(script.unary.load(Ordering::SeqCst), 3);
    let stream = [
        "--grpc",
        "stream",
        "--model",
        "broken",
        "--requests",
        "2",
        "--concurrency",
        "1",
    ];
    let (_, stderr, report) = run(port, &stream);
    let requests = &report["steps"][0]["requests"];
    assert_eq!(
        requests["failed_by_kind"]["stream_error"], 2,
        "{requests} {stderr}"
    );
    let examples = requests["failure_examples"].to_string();
    assert!(examples.contains("ran out of KV blocks"), "{examples}");
}

#[test]
fn the_embedded_simulator_serves_model_stream_infer() {
    // A fixed-timing simulator: 40 ms to the first token, then 10 ms per token; 6 tokens.
    let dir = tempfile::tempdir().unwrap();
    let sim = support::fixed_sim(dir.path(), "fixed", 40, 10);
    let out = dir.path().join("out");
    let output = goodput()
        .args([
            "run",
            "--quiet",
            "--api",
            "v2",
            "--grpc",
            "stream",
            "--tensor-dtype",
            "BYTES",
        ])
        .args([
            "--sim-config",
            sim.to_str().unwrap(),
            "--output-tokens",
            "6",
        ])
        .args(["--requests", "6", "--concurrency", "2", "--warmup", "0"])
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = read_json(&out.join("report.json"));
    let step = &report["steps"][0];
    assert_eq!(step["requests"]["completed"], 6, "{}", step["requests"]);
    assert_eq!(step["tokens"]["output_total"], 36, "{}", step["tokens"]);
    let latency = &step["latency_ms"];
    let (ttft, tpot) = (&latency["ttft"], &latency["tpot"]);
    assert!(
        ms(&ttft["min"]) >= 40.0 && ms(&ttft["p50"]) < 40.0 + 25.0,
        "{ttft}"
    );
    assert!((ms(&tpot["p50"]) - 10.0).abs() < 2.5, "{tpot}");
}

#[test]
fn the_embedded_simulator_serves_model_infer() {
    let dir = tempfile::tempdir().unwrap();
    let sim = support::fixed_sim(dir.path(), "fixed", 40, 10);
    // ModelInfer: rows as over HTTP.
    let out = dir.path().join("unary");
    let output = goodput()
        .args([
            "run",
            "--quiet",
            "--api",
            "v2",
            "--grpc",
            "unary",
            "--tensor-shape",
            "4x8",
        ])
        .args(["--sim-config", sim.to_str().unwrap()])
        .args(["--requests", "5", "--concurrency", "1", "--warmup", "0"])
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = read_json(&out.join("report.json"));
    let t = &report["steps"][0]["throughput"];
    let ratio = ms(&t["items_per_sec"]) / ms(&t["requests_per_sec"]);
    assert!((ratio - 4.0).abs() < 1e-9, "{t}");
}

#[test]
fn grpc_is_refused_where_it_cannot_apply() {
    let refused = |args: &[&str], words: &str| {
        let output = goodput()
            .args(["run", "--quiet"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(words), "{args:?}: {stderr}");
    };
    refused(&["--api", "chat", "--grpc", "unary"], "go with --api v2");
}

#[test]
fn model_stream_infer_runs_in_virtual_time_exactly_as_the_engine_times_it() {
    // The same fixed engine (40 ms to the first token, 10 ms per token, 64 slots) in virtual
    // time: gRPC's HTTP/2 over the in-memory pipes, so every first token is 40 ms after its
    // send and every gap 10 ms, exactly (to the virtual clock's microsecond).
    let dir = tempfile::tempdir().unwrap();
    let sim = support::fixed_sim(dir.path(), "fixed", 40, 10);
    let out = dir.path().join("out");
    let output = goodput()
        .args(["run", "--quiet", "--virtual-time", "--api", "v2"])
        .args(["--grpc", "stream", "--tensor-dtype", "BYTES"])
        .args([
            "--sim-config",
            sim.to_str().unwrap(),
            "--output-tokens",
            "6",
        ])
        .args(["--requests", "6", "--concurrency", "2", "--warmup", "0"])
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let report = read_json(&out.join("report.json"));
    let step = &report["steps"][0];
    assert_eq!(step["requests"]["completed"], 6, "{}", step["requests"]);
    assert_eq!(step["tokens"]["output_total"], 36, "{}", step["tokens"]);
    let latency = &step["latency_ms"];
    for (figure, exact) in [("ttft", 40.0), ("tpot", 10.0)] {
        for at in ["min", "p50", "max"] {
            let got = ms(&latency[figure][at]);
            assert!(
                (got - exact).abs() < 0.01,
                "{figure} {at}: {}",
                latency[figure]
            );
        }
    }
}
