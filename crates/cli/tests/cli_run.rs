//! `goodput run` / `goodput report` end to end against the embedded simulator: files, schema,
//! journal rebuild, exit codes, secrets, Ctrl-C.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{goodput, read_json, validate_against_schema};

/// A simulator config file with the fixed-timing engine and optional faults.
fn fixed_sim(dir: &Path, ttft_ms: u64, faults: &str) -> String {
    let path = dir.join("sim.json");
    let text = format!(
        r#"{{"engine": {{"kind": "fixed", "ttft": {ttft_ms}, "itl": 2, "slots": 16}},
            "prompt_tokenizer": "words", "faults": {{{faults}}}}}"#
    );
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn run_writes_journal_manifest_and_a_schema_valid_report_that_rebuilds_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let sim = fixed_sim(dir.path(), 20, "");
    let output = goodput()
        .args([
            "run",
            "--quiet",
            "--rate",
            "40",
            "--requests",
            "60",
            "--warmup",
            "10",
        ])
        .args([
            "--input-tokens",
            "32",
            "--output-tokens",
            "8",
            "--seed",
            "7",
            "--tag",
            "gpu=none",
        ])
        .args(["--sim-config", &sim, "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("Throughput") && stdout.contains("TTFT"),
        "{stdout}"
    );

    let journal = std::fs::read_to_string(out.join("requests.jsonl")).unwrap();
    assert_eq!(journal.lines().count(), 60);
    let report = read_json(&out.join("report.json"));
    validate_against_schema(&report);
    let step = &report["steps"][0];
    assert_eq!(step["requests"]["scheduled"], 50);
    assert_eq!(step["requests"]["warmup"], 10);
    assert_eq!(step["requests"]["completed"], 50);
    assert_eq!(report["run"]["seed"], 7);
    assert_eq!(report["run"]["tags"]["gpu"], "none");
    assert_eq!(report["run"]["end_reason"], "completed");
    assert!(read_json(&out.join("run.json"))["config"]["slo"].is_object());

    assert_rebuilds_from_the_journal(&out, &report);
}

/// `goodput report DIR` gives the same steps as the live run.
fn assert_rebuilds_from_the_journal(out: &Path, report: &Value) {
    let rebuilt = goodput()
        .args(["report", out.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(
        rebuilt.status.success(),
        "{}",
        String::from_utf8_lossy(&rebuilt.stderr)
    );
    let rebuilt: Value = serde_json::from_slice(&rebuilt.stdout).unwrap();
    validate_against_schema(&rebuilt);
    assert_eq!(
        rebuilt["steps"], report["steps"],
        "the journal rebuilds the same figures"
    );
}

#[test]
fn bad_flags_exit_2_and_name_the_flag() {
    for (args, needle) in [
        (vec!["--rate", "0"], "--rate"),
        (vec!["--concurrency", "0"], "--concurrency"),
        (vec!["--warmup", "lots"], "--warmup"),
        (vec!["--slo", "ttft=5"], "unit"),
        (vec!["--extra-body", "[1]"], "--extra-body"),
        (vec!["--arrival", "gamma"], "--burstiness"),
        (vec!["--target", "ftp://example.com"], "ftp"),
    ] {
        let output = goodput().arg("run").args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

#[test]
fn a_run_where_every_request_fails_exits_1_and_counts_them() {
    let dir = tempfile::tempdir().unwrap();
    let sim = fixed_sim(dir.path(), 5, r#""http_500": 1.0"#);
    let output = goodput()
        .args([
            "run",
            "--quiet",
            "--json",
            "--concurrency",
            "2",
            "--requests",
            "10",
            "--warmup",
            "0",
        ])
        .args(["--sim-config", &sim])
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["steps"][0]["requests"]["failed_by_kind"]["http"], 10);
    assert_eq!(
        report["steps"][0]["requests"]["failed_by_status"]["500"],
        10
    );
}

#[test]
fn max_error_rate_turns_failures_into_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let sim = fixed_sim(dir.path(), 5, r#""http_429": 0.3"#);
    let run = |max: &str| {
        goodput()
            .args([
                "run",
                "--quiet",
                "--concurrency",
                "4",
                "--requests",
                "60",
                "--warmup",
                "0",
                "--seed",
                "3",
            ])
            .args(["--sim-config", &sim, "--max-error-rate", max])
            .output()
            .unwrap()
    };
    assert_eq!(run("0.05").status.code(), Some(1));
    assert_eq!(run("0.9").status.code(), Some(0));
}

#[test]
fn the_api_key_never_appears_in_any_output() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let sim = fixed_sim(dir.path(), 5, r#""http_500": 0.3, "error_mid_stream": 0.3"#);
    let secret = "sk-goodput-test-7f3a9c";
    let output = goodput()
        .args([
            "run",
            "--concurrency",
            "2",
            "--requests",
            "20",
            "--api-key",
            secret,
        ])
        .args([
            "--header",
            &format!("X-Api-Key: {secret}"),
            "--sim-config",
            &sim,
        ])
        .args(["--out", out.to_str().unwrap()])
        .env("GOODPUT_API_KEY", secret)
        .output()
        .unwrap();
    let mut everything = String::from_utf8_lossy(&output.stdout).to_string();
    everything.push_str(&String::from_utf8_lossy(&output.stderr));
    for file in ["requests.jsonl", "report.json", "run.json"] {
        everything.push_str(&std::fs::read_to_string(out.join(file)).unwrap());
    }
    assert!(!everything.contains(secret), "the key leaked");
    assert!(everything.contains("***"), "the redaction is visible");
}

#[cfg(unix)]
#[test]
fn ctrl_c_keeps_every_finished_request_and_writes_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let sim = fixed_sim(dir.path(), 300, "");
    let mut child = goodput()
        .args([
            "run",
            "--quiet",
            "--concurrency",
            "4",
            "--duration",
            "60s",
            "--warmup",
            "0",
        ])
        .args(["--sim-config", &sim, "--out", out.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let journal = out.join("requests.jsonl");
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&journal).map_or(0, |t| t.lines().count()) < 8 {
        assert!(Instant::now() < deadline, "no requests finished");
        std::thread::sleep(Duration::from_millis(50));
    }
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let exit = child.wait().unwrap();
    assert_eq!(exit.code(), Some(130));
    let lines = std::fs::read_to_string(&journal).unwrap().lines().count() as u64;
    let report = read_json(&out.join("report.json"));
    validate_against_schema(&report);
    assert_eq!(report["run"]["end_reason"], "interrupted");
    let requests = &report["steps"][0]["requests"];
    assert_eq!(
        requests["scheduled"].as_u64().unwrap(),
        lines,
        "every scheduled request is journaled"
    );
    assert!(requests["failed_by_kind"]["cancelled"].as_u64().unwrap() >= 1);
    assert!(requests["completed"].as_u64().unwrap() >= 8);
}

#[test]
fn the_schema_rejects_a_report_that_breaks_the_contract() {
    let schema: Value =
        serde_json::from_str(include_str!("../../../schema/report.v1.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(!validator.is_valid(&serde_json::json!({"schema_version": 1})));
    assert!(!validator.is_valid(&serde_json::json!({
        "schema_version": 2, "tool": {}, "run": {}, "steps": [], "warnings": []
    })));
}

#[test]
fn an_external_target_is_benchmarked_with_its_model_discovered() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let simulator = runtime.block_on(async {
        let config: goodput_sim::SimConfig = serde_json::from_str(
            r#"{"engine": {"kind": "fixed", "ttft": 10, "itl": 1, "slots": 4},
                "served_model_name": "tiny-test-model", "prompt_tokenizer": "words"}"#,
        )
        .unwrap();
        goodput_sim::spawn(config, ([127, 0, 0, 1], 0).into())
            .await
            .unwrap()
    });
    let target = format!("http://{}/v1", simulator.addr());
    let output = goodput()
        .args([
            "run",
            "--quiet",
            "--json",
            "--target",
            &target,
            "--concurrency",
            "2",
        ])
        .args(["--requests", "8", "--warmup", "0", "--output-tokens", "4"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["run"]["model"], "tiny-test-model");
    assert_eq!(report["steps"][0]["requests"]["completed"], 8);
    assert_eq!(report["steps"][0]["tokens"]["output_total"], 32);
    runtime.block_on(simulator.shutdown_and_wait()).unwrap();
}

#[test]
fn non_streamed_runs_measure_e2e_but_no_first_token() {
    let dir = tempfile::tempdir().unwrap();
    let sim = fixed_sim(dir.path(), 20, "");
    let output = goodput()
        .args([
            "run",
            "--quiet",
            "--json",
            "--no-stream",
            "--concurrency",
            "2",
            "--requests",
            "6",
        ])
        .args([
            "--warmup",
            "0",
            "--output-tokens",
            "5",
            "--sim-config",
            &sim,
        ])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let latency = &report["steps"][0]["latency_ms"];
    assert_eq!(latency["ttft"]["count"], 0);
    assert_eq!(latency["e2e"]["count"], 6);
    assert!(
        latency["e2e"]["p50"].as_f64().unwrap() >= 28.0,
        "ttft 20 ms + 4 × 2 ms"
    );
    assert_eq!(report["steps"][0]["tokens"]["output_total"], 30);
    // No first token, so the default SLO is the encoders' `e2e=2s`: a TTFT threshold would
    // count every one of these 30 ms answers a miss.
    let goodput = &report["steps"][0]["goodput"];
    assert_eq!(goodput["slo"], "e2e=2s");
    assert_eq!(goodput["attained_fraction"], 1.0);
    assert_eq!(goodput["compliant"], 6);
}
