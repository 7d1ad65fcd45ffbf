//! `--push-gateway` against the real Prometheus Pushgateway, when one is installed: opt in
//! with `GOODPUT_PUSHGATEWAY=/usr/bin/prometheus-pushgateway` (Debian's package
//! `prometheus-pushgateway`). The test starts it on a free loopback port, pushes a run, and
//! reads back through the Pushgateway's own API the group (job and run id) and every value,
//! which must equal `report.json`'s. Without the variable it does nothing (the package takes
//! about a minute to install, so the test suite does not install it).
#![allow(clippy::unwrap_used)]

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{goodput, read_json};

/// The Pushgateway process, stopped when dropped.
struct Gateway(Child);

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A GET (HTTP/1.0: the answer unchunked) on loopback `port`: the body, or `None` when nothing answers yet.
fn get(port: u16, path: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nhost: localhost\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    let (head, body) = answer.split_once("\r\n\r\n")?;
    (head.split(' ').nth(1) == Some("200")).then(|| body.to_string())
}

/// Starts the Pushgateway on a free loopback port, persisting into `dir` (Debian's build
/// otherwise keeps what earlier instances held in its system-wide file).
fn start(binary: &str, dir: &std::path::Path) -> (Gateway, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(binary)
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg(format!(
            "--persistence.file={}",
            dir.join("pushgateway.data").display()
        ))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let gateway = Gateway(child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while get(port, "/-/ready").is_none() {
        assert!(Instant::now() < deadline, "the Pushgateway did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    (gateway, port)
}

/// A two-step virtual-time sweep into `out`, pushed to the Pushgateway on `port`.
fn sweep(out: &std::path::Path, port: u16) {
    let output = goodput()
        .args([
            "sweep",
            "--quiet",
            "--virtual-time",
            "--concurrency-steps",
            "1,4",
        ])
        .args([
            "--requests",
            "24",
            "--slo",
            "ttft=60ms",
            "--tag",
            "team=infra",
        ])
        .arg("--out")
        .arg(out)
        .args(["--push-gateway", &format!("http://127.0.0.1:{port}")])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn the_real_pushgateway_holds_the_reports_figures() {
    let Ok(binary) = std::env::var("GOODPUT_PUSHGATEWAY") else {
        eprintln!("GOODPUT_PUSHGATEWAY is not set: the real Pushgateway test is skipped");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_gateway, port) = start(&binary, dir.path());
    let out = dir.path().join("run");
    sweep(&out, port);
    let report = read_json(&out.join("report.json"));
    let groups: Value = serde_json::from_str(&get(port, "/api/v1/metrics").unwrap()).unwrap();
    let groups = groups["data"].as_array().unwrap();
    assert_eq!(groups.len(), 1);
    let group = &groups[0];
    assert_eq!(group["labels"]["job"], "goodput");
    assert_eq!(group["labels"]["run_id"], report["run"]["started_at"]);
    let value = |family: &str, step: usize, quantile: Option<&str>| -> f64 {
        let metrics = group[family]["metrics"].as_array().unwrap();
        let found = metrics
            .iter()
            .find(|m| {
                m["labels"]["step"] == step.to_string().as_str()
                    && quantile.is_none_or(|q| m["labels"]["quantile"] == q)
            })
            .unwrap();
        assert_eq!(found["labels"]["tag_team"], "infra");
        found["value"].as_str().unwrap().parse().unwrap()
    };
    for step in 0..2 {
        let s = &report["steps"][step];
        let rate = s["throughput"]["requests_per_sec"].as_f64().unwrap();
        assert_eq!(value("goodput_requests_per_second", step, None), rate);
        let p99 = s["latency_ms"]["ttft"]["p99"].as_f64().unwrap();
        assert_eq!(
            value("goodput_ttft_seconds", step, Some("0.99")),
            p99 / 1000.0
        );
    }
}
