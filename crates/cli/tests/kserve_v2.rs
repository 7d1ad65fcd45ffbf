//! goodput against a real KServe v2 (Open Inference Protocol) server: the PyPI `kserve`
//! package's ModelServer with a NumPy model (`scripts/kserve-numpy-model.py`), started here on
//! a loopback port. Built only with `--features kserve`; `scripts/kserve-server.sh env` sets
//! the variables, and the test fails — never skips — when they are missing. `--api v2` sends
//! generated FP32 tensors (and a shape the model rejects, counted as failures with the
//! server's message); `--api http` sends batches of texts as a BYTES tensor through a
//! template. goodput's requests and items are checked against the server's own counts
//! (`request_predict_seconds_count` of its `/metrics`, the output shape).
#![allow(clippy::unwrap_used)]

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::{goodput, read_json};

/// The model server; killed on drop.
struct Server {
    child: Child,
    port: u16,
    grpc_port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn variable(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run `eval \"$(scripts/kserve-server.sh env)\"` first")
    })
}

/// `GET path`: status and body.
fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split(' ').nth(1)?.parse().ok()?;
    Some((status, response.split_once("\r\n\r\n")?.1.to_string()))
}

/// A free loopback port (the server binds it just after).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start() -> Server {
    let (port, grpc_port) = (free_port(), free_port());
    let child = Command::new(variable("GOODPUT_KSERVE_PYTHON"))
        .arg(variable("GOODPUT_KSERVE_MODEL"))
        .args(["--http_port", &port.to_string()])
        .args(["--grpc_port", &grpc_port.to_string()])
        .args(["--workers", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = Server {
        child,
        port,
        grpc_port,
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    let grpc_listens = || TcpStream::connect(("127.0.0.1", grpc_port)).is_ok();
    while get(port, "/v2/models/linear/ready").map(|r| r.0) != Some(200) || !grpc_listens() {
        assert!(
            Instant::now() < deadline,
            "the KServe server did not become ready"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    server
}

/// `request_predict_seconds_{count,sum}` of the model.
fn predicted(port: u16) -> (f64, f64) {
    let (_, body) = get(port, "/metrics").unwrap();
    let value = |name: &str| {
        body.lines()
            .find(|line| line.starts_with(name))
            .and_then(|line| line.rsplit(' ').next()?.parse().ok())
            .unwrap_or(0.0)
    };
    (
        value("request_predict_seconds_count"),
        value("request_predict_seconds_sum"),
    )
}

/// Runs goodput with `args` (split at spaces); its report.json.
fn run(dir: &std::path::Path, name: &str, args: &str) -> (std::process::Output, serde_json::Value) {
    let out = dir.join(name);
    let output = goodput()
        .args([
            "run",
            "--quiet",
            "--warmup",
            "0",
            "--out",
            out.to_str().unwrap(),
        ])
        .args(args.split(' '))
        .output()
        .unwrap();
    let report = read_json(&out.join("report.json"));
    (output, report)
}

#[test]
fn kserve_v2_api_rows_and_requests_match_the_server() {
    let server = start();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{}", server.port);
    let (before, before_secs) = predicted(server.port);
    let args = format!(
        "--api v2 --target {url} --model linear --tensor-shape 8x16 --concurrency 2 --requests 40"
    );
    let (output, report) = run(dir.path(), "fp32", &args);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let step = &report["steps"][0];
    assert_eq!(step["requests"]["completed"], 40, "{}", step["requests"]);
    assert_eq!(report["run"]["item_unit"], "rows");
    let (after, after_secs) = predicted(server.port);
    // The server predicted exactly the requests goodput sent; each answered 8 rows.
    assert_eq!(after - before, 40.0);
    let t = &step["throughput"];
    let ratio = t["items_per_sec"].as_f64().unwrap() / t["requests_per_sec"].as_f64().unwrap();
    assert!((ratio - 8.0).abs() < 1e-9, "{t}");
    let predict_ms = (after_secs - before_secs) / 40.0 * 1e3;
    let e2e_ms = step["latency_ms"]["e2e"]["mean"].as_f64().unwrap();
    assert!(
        e2e_ms >= predict_ms,
        "E2E {e2e_ms} ms < predict {predict_ms} ms"
    );
}

#[test]
fn kserve_v2_over_grpc_rows_and_requests_match_the_server() {
    let server = start();
    let dir = tempfile::tempdir().unwrap();
    // The server's gRPC port (`--grpc_port`), the v2 protocol's `GRPCInferenceService`.
    let url = format!("http://127.0.0.1:{}", server.grpc_port);
    let (before, before_secs) = predicted(server.port);
    let args = format!(
        "--api v2 --grpc unary --target {url} --model linear --tensor-shape 8x16 --concurrency 2 --requests 40"
    );
    let (output, report) = run(dir.path(), "grpc", &args);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let step = &report["steps"][0];
    assert_eq!(step["requests"]["completed"], 40, "{}", step["requests"]);
    let (after, after_secs) = predicted(server.port);
    // The server predicted exactly the requests goodput sent over gRPC; each answered 8 rows.
    assert_eq!(after - before, 40.0);
    let t = &step["throughput"];
    let ratio = t["items_per_sec"].as_f64().unwrap() / t["requests_per_sec"].as_f64().unwrap();
    assert!((ratio - 8.0).abs() < 1e-9, "{t}");
    let predict_ms = (after_secs - before_secs) / 40.0 * 1e3;
    let e2e_ms = step["latency_ms"]["e2e"]["mean"].as_f64().unwrap();
    assert!(
        e2e_ms >= predict_ms,
        "E2E {e2e_ms} ms < predict {predict_ms} ms"
    );
    // A shape the model rejects: a gRPC status error per request, with the server's message
    // (over gRPC, KServe says only INTERNAL "Internal server error").
    let args = format!(
        "--api v2 --grpc unary --target {url} --model linear --tensor-shape 4x32 --concurrency 1 --requests 3"
    );
    let (_, report) = run(dir.path(), "grpc-rejected", &args);
    let requests = &report["steps"][0]["requests"];
    assert_eq!(requests["failed"], 3, "{requests}");
    assert_eq!(requests["failed_by_kind"]["http"], 3, "{requests}");
    let examples = requests["failure_examples"].to_string();
    assert!(examples.contains("gRPC status Internal"), "{examples}");
    assert_eq!(
        predicted(server.port).0 - after,
        3.0,
        "the server saw all three"
    );
}

#[test]
fn kserve_v2_refuses_a_shape_the_model_rejects() {
    let server = start();
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{}", server.port);
    let (before, _) = predicted(server.port);
    // 32 features for a model of 16: the server refuses every request; each is a counted
    // failure carrying the server's message, never a success with zero rows.
    let args = format!(
        "--api v2 --target {url} --model linear --tensor-shape 4x32 --concurrency 1 --requests 3"
    );
    let (_, report) = run(dir.path(), "rejected", &args);
    let requests = &report["steps"][0]["requests"];
    assert_eq!(requests["failed"], 3, "{requests}");
    assert_eq!(requests["completed"], 0, "{requests}");
    let example = requests["failure_examples"]["http"].as_str().unwrap();
    assert!(example.contains("matmul"), "{example}");
    assert_eq!(
        predicted(server.port).0 - before,
        3.0,
        "the server saw all three"
    );
}

#[test]
fn kserve_v2_items_and_requests_match_the_server() {
    let server = start();
    let dir = tempfile::tempdir().unwrap();
    let template = dir.path().join("infer.json");
    std::fs::write(
        &template,
        r#"{"inputs": [{"name": "text", "shape": ["{{batch_size}}"], "datatype": "BYTES", "data": "{{prompts}}"}]}"#,
    )
    .unwrap();
    let out = dir.path().join("out");
    let (before, before_secs) = predicted(server.port);
    let url = format!("http://127.0.0.1:{}/v2/models/linear/infer", server.port);
    let output = goodput()
        .args(["run", "--quiet", "--api", "http", "--target", &url])
        .args(["--request-template", template.to_str().unwrap()])
        .args(["--items-path", "$.outputs[0].shape[0]", "--batch-size", "8"])
        .args(["--concurrency", "2", "--requests", "40", "--warmup", "0"])
        .args(["--input-tokens", "32", "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = read_json(&out.join("report.json"));
    let step = &report["steps"][0];
    assert_eq!(step["requests"]["completed"], 40);
    let (after, after_secs) = predicted(server.port);
    // The server predicted exactly the requests goodput sent, 8 rows each.
    assert_eq!(after - before, 40.0);
    let t = &step["throughput"];
    let ratio = t["items_per_sec"].as_f64().unwrap() / t["requests_per_sec"].as_f64().unwrap();
    assert!((ratio - 8.0).abs() < 1e-9, "{t}");
    // A request's E2E includes the server's predict time.
    let predict_ms = (after_secs - before_secs) / 40.0 * 1e3;
    let e2e_ms = step["latency_ms"]["e2e"]["mean"].as_f64().unwrap();
    assert!(
        e2e_ms >= predict_ms,
        "E2E {e2e_ms} ms < predict {predict_ms} ms"
    );
}
