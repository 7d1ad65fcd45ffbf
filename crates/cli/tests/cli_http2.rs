//! `--http2` through the binary: against `goodput sim` (it serves the HTTP API on HTTP/2 with
//! prior knowledge beside gRPC) behind a proxy written here that counts connections, every
//! request completes and 8 requests at a concurrency of 4 (and the model discovery) open one
//! connection; refused (exit 2) where it
//! cannot work: virtual time, realtime sessions, gRPC.
#![allow(clippy::unwrap_used)]

mod support;

use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;
use support::{goodput, validate_against_schema};

/// A TCP proxy to `upstream` on a loopback port that counts the connections it accepts.
fn counting_proxy(upstream: std::net::SocketAddr) -> (String, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let count = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&count);
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            counted.fetch_add(1, Ordering::SeqCst);
            let server = TcpStream::connect(upstream).unwrap();
            for (mut from, mut to) in [
                (client.try_clone().unwrap(), server.try_clone().unwrap()),
                (server, client),
            ] {
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut from, &mut to);
                    let _ = to.shutdown(std::net::Shutdown::Write);
                });
            }
        }
    });
    (format!("http://{address}/v1"), count)
}

#[test]
fn http2_runs_every_request_over_one_connection() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sim.toml");
    std::fs::write(&config, "").unwrap();
    let sim = support::sim_process::Sim::start(&config, &[]);
    let authority = sim.url.trim_start_matches("http://");
    let upstream = authority.split('/').next().unwrap().parse().unwrap();
    let (url, connections) = counting_proxy(upstream);
    let output = goodput()
        .args([
            "run",
            "--json",
            "--http2",
            "--warmup",
            "0",
            "--requests",
            "8",
            "--concurrency",
            "4",
            "--input-tokens",
            "16",
            "--output-tokens",
            "8",
            "--no-metrics",
            "--target",
            &url,
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    validate_against_schema(&report);
    let step = &report["steps"][0];
    assert_eq!(step["requests"]["completed"], 8, "{step}");
    assert_eq!(
        step["throughput"]["output_tokens_per_sec"]
            .as_f64()
            .map(|v| v > 0.0),
        Some(true)
    );
    assert!(step["latency_ms"]["ttft"]["p50"].as_f64().unwrap() > 0.0);
    // The model list and the run's requests: streams of one HTTP/2 connection.
    assert_eq!(
        connections.load(Ordering::SeqCst),
        1,
        "connections for 8 requests"
    );
}

#[test]
fn http2_is_refused_where_it_cannot_work() {
    for (args, words) in [
        ("run --http2 --virtual-time --requests 1", "--http2"),
        ("run --http2 --api realtime --requests 1", "WebSocket"),
        (
            "run --http2 --api v2 --grpc unary --requests 1",
            "gRPC speaks HTTP/2 already",
        ),
    ] {
        let output = goodput().args(args.split_whitespace()).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args}: {stderr}");
        assert!(stderr.contains(words), "{args}: {stderr}");
    }
}
