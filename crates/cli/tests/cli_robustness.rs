//! The real process under signals and the client section of its report: SIGTERM stops a run
//! like Ctrl-C (every request journaled, report written, exit 130); a second Ctrl-C exits at
//! once even when the clean stop is stuck; every report states the client's own overhead.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{goodput, read_json, validate_against_schema};

fn fixed_sim(dir: &Path, ttft_ms: u64, itl_ms: u64) -> String {
    let path = dir.join("sim.json");
    let text = format!(
        r#"{{"engine": {{"kind": "fixed", "ttft": {ttft_ms}, "itl": {itl_ms}, "slots": 64}},
            "prompt_tokenizer": "words"}}"#
    );
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn signal(child: &Child, name: &str) {
    let status = Command::new("kill")
        .args([&format!("-{name}"), &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits for the child to exit, at most `limit`; `None` if it is still running.
fn wait_at_most(child: &mut Child, limit: Duration) -> Option<i32> {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
}

#[cfg(unix)]
#[test]
fn sigterm_stops_a_run_like_ctrl_c() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let sim = fixed_sim(dir.path(), 300, 2);
    let mut child = goodput()
        .args(["run", "--quiet", "--concurrency", "4", "--duration", "60s"])
        .args(["--warmup", "0", "--sim-config", &sim])
        .args(["--out", out.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let journal = out.join("requests.jsonl");
    let deadline = Instant::now() + Duration::from_secs(30);
    while lines(&journal) < 8 {
        assert!(Instant::now() < deadline, "no requests finished");
        std::thread::sleep(Duration::from_millis(50));
    }
    signal(&child, "TERM");
    let code = wait_at_most(&mut child, Duration::from_secs(30));
    assert_eq!(code, Some(130));
    let report = read_json(&out.join("report.json"));
    validate_against_schema(&report);
    assert_eq!(report["run"]["end_reason"], "interrupted");
    let requests = &report["steps"][0]["requests"];
    assert_eq!(
        requests["scheduled"].as_u64().unwrap(),
        lines(&journal) as u64
    );
    assert!(requests["failed_by_kind"]["cancelled"].as_u64().unwrap() >= 1);
}

/// The journal is a FIFO nobody reads: once the pipe is full the clean stop cannot finish
/// (a journal on a hung disk), so only the second Ctrl-C can end the process — at once.
#[cfg(unix)]
#[test]
fn a_second_ctrl_c_exits_at_once_when_the_clean_stop_is_stuck() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let journal = out.join("requests.jsonl");
    let made = Command::new("mkfifo").arg(&journal).status().unwrap();
    assert!(made.success());
    // Holding both ends (Linux opens a FIFO read-write without blocking) gives goodput a
    // reader that never reads.
    let _held_open = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&journal)
        .unwrap();
    let sim = fixed_sim(dir.path(), 1, 1);
    let mut child = goodput()
        .args(["run", "--quiet", "--concurrency", "8", "--duration", "120s"])
        .args([
            "--warmup",
            "0",
            "--output-tokens",
            "4",
            "--sim-config",
            &sim,
        ])
        .args(["--out", out.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // A few hundred requests fill the 64 KiB pipe within moments.
    std::thread::sleep(Duration::from_secs(2));
    signal(&child, "INT");
    assert_eq!(
        wait_at_most(&mut child, Duration::from_secs(2)),
        None,
        "the clean stop is stuck writing the journal"
    );
    let second = Instant::now();
    signal(&child, "INT");
    let code = wait_at_most(&mut child, Duration::from_secs(10));
    if code.is_none() {
        let _ = child.kill();
    }
    assert_eq!(code, Some(130), "the second Ctrl-C exits");
    assert!(second.elapsed() < Duration::from_secs(10));
}

#[test]
fn every_report_states_the_client_overhead() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let sim = fixed_sim(dir.path(), 5, 1);
    let output = goodput()
        .args([
            "run",
            "--json",
            "--quiet",
            "--rate",
            "50",
            "--requests",
            "40",
        ])
        .args([
            "--warmup",
            "0",
            "--output-tokens",
            "4",
            "--sim-config",
            &sim,
        ])
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    validate_against_schema(&report);
    let client = &report["client"];
    assert_eq!(client["dispatch_lag_ms"]["count"], 40);
    assert!(client["dispatch_lag_ms"]["p99"].as_f64().unwrap() >= 0.0);
    assert_eq!(client["includes_simulator"], true);
    assert_eq!(
        client["trustworthy"],
        !client["bottleneck"].as_bool().unwrap()
    );
    if cfg!(target_os = "linux") {
        assert!(client["cpu_secs"].as_f64().is_some());
        assert!(client["cpu_utilization"].as_f64().unwrap() >= 0.0);
    }
    assert_rebuilt_client_section(&out, client);
}

/// `goodput report` rebuilds the lags from the journal (not the CPU use) and prints them.
fn assert_rebuilt_client_section(out: &Path, client: &Value) {
    // The journal alone rebuilds the lags, not the CPU use.
    let rebuilt = goodput()
        .args(["report", out.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let rebuilt: Value = serde_json::from_slice(&rebuilt.stdout).unwrap();
    validate_against_schema(&rebuilt);
    assert_eq!(
        rebuilt["client"]["dispatch_lag_ms"],
        client["dispatch_lag_ms"]
    );
    assert!(rebuilt["client"]["cpu_secs"].is_null());
    // And the terminal summary says it too.
    let table = goodput()
        .args(["report", out.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("Client overhead: dispatch lag p50"), "{text}");
}
