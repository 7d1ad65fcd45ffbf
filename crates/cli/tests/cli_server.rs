//! Server-side figures end to end: `goodput run` scrapes the embedded simulator and derives
//! utilisation and cost (schema-valid, rebuilt identically by `goodput report`), a dead
//! `--metrics-url` is a warning, `goodput plan` prints the worked example, `goodput monitor`
//! watches a live simulator and stops by itself.
#![allow(clippy::unwrap_used)]

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{goodput, read_json, validate_against_schema};

fn run_ok(command: &mut Command) -> (String, String) {
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    (stdout, stderr)
}

#[test]
fn a_run_against_the_embedded_simulator_reports_server_utilisation_and_cost() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let (stdout, _) = run_ok(
        goodput()
            .args([
                "run",
                "--quiet",
                "--details",
                "--rate",
                "4",
                "--duration",
                "3s",
            ])
            .args([
                "--warmup",
                "0",
                "--input-tokens",
                "64",
                "--output-tokens",
                "16",
            ])
            .args([
                "--seed",
                "3",
                "--metrics-interval",
                "250ms",
                "--gpu-hour-cost",
                "2.5",
            ])
            .args(["--watts", "700", "--out", out.to_str().unwrap()]),
    );
    for section in [
        "Server side (vllm metrics",
        "Utilisation (llama-3.1-8b on 1 × H100",
        "Cost and energy",
    ] {
        assert!(stdout.contains(section), "{section}: {stdout}");
    }
    assert!(out.join("server_metrics.jsonl").exists() && out.join("analysis.json").exists());
    let report = read_json(&out.join("report.json"));
    validate_against_schema(&report);
    assert_server_side(&report["steps"][0]);

    // `goodput report` rebuilds the same server-side sections from the files.
    let (rebuilt, _) = run_ok(goodput().args(["report", out.to_str().unwrap(), "--json"]));
    let rebuilt: Value = serde_json::from_str(&rebuilt).unwrap();
    validate_against_schema(&rebuilt);
    assert_eq!(rebuilt["steps"], report["steps"]);
}

/// The server-side, utilisation and cost sections of a step of the embedded simulator.
fn assert_server_side(step: &Value) {
    let server = &step["server"];
    assert_eq!(server["flavour"], "vllm");
    assert!(server["scrapes"].as_u64().unwrap() >= 6, "{server}");
    assert_eq!(server["agreement"]["output_ratio"], 1.0);
    assert_eq!(server["agreement"]["input_ratio"], 1.0);
    assert_eq!(
        step["utilisation"]["kv_bytes_per_token"]["value"],
        131_072.0
    );
    assert_eq!(
        step["utilisation"]["kv_capacity_tokens"]["value"],
        421_007.0
    );
    assert_eq!(step["cost"]["power_watts"]["value"], 700.0);
    assert!(step["speculative_decoding"].is_null());
}

#[test]
fn an_unreachable_metrics_url_is_a_warning_not_a_failure() {
    let output = goodput()
        .args([
            "run",
            "--quiet",
            "--json",
            "--concurrency",
            "2",
            "--requests",
            "6",
        ])
        .args([
            "--warmup",
            "0",
            "--output-tokens",
            "4",
            "--metrics-interval",
            "200ms",
        ])
        .args(["--metrics-url", "http://127.0.0.1:9/metrics"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("--metrics-url"), "{stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    validate_against_schema(&report);
    assert_eq!(report["steps"][0]["server"]["scrapes"], 0);
    let codes: Vec<&str> = report["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["code"].as_str().unwrap())
        .collect();
    assert!(codes.contains(&"server_metrics_failed"), "{codes:?}");
}

#[test]
fn plan_reproduces_the_worked_example_and_the_n_minus_one_case() {
    let (stdout, _) = run_ok(goodput().args(["plan", "--peak-rps", "180", "--capacity", "40"]));
    assert!(stdout.contains("Devices needed now: 6"), "{stdout}");
    assert!(
        stdout.contains("180 req/s × safety 1.3 = 234 req/s"),
        "{stdout}"
    );
    assert!(
        stdout.contains("⌈234 / 40 per device⌉ = ⌈5.85⌉ = 6"),
        "{stdout}"
    );
    assert!(
        stdout.contains("after losing 1 of 6: 5 × 40 = 200 req/s"),
        "{stdout}"
    );

    let (json, _) = run_ok(goodput().args([
        "plan",
        "--peak-rps",
        "180",
        "--capacity",
        "40",
        "--failures",
        "1",
        "--growth",
        "5%",
        "--horizon",
        "6",
        "--gpu-hour-cost",
        "2",
        "--json",
    ]));
    let plan: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(plan["devices_now"], 7);
    assert_eq!(plan["failure_check"]["devices_left"], 6);
    assert_eq!(plan["failure_check"]["capacity"], 240.0);
    assert_eq!(plan["failure_check"]["meets_safety_factor"], true);
    assert_eq!(plan["months"].as_array().unwrap().len(), 7);
    assert_eq!(plan["months"][0]["cost_per_month"], 7.0 * 2.0 * 730.0);
}

#[test]
fn bad_server_side_and_plan_flags_exit_2_and_name_the_flag() {
    for (args, needle) in [
        (vec!["run", "--model-spec", "llama-3.1-8b"], "--gpu"),
        (
            vec!["run", "--model-spec", "gpt-9", "--gpu", "h100"],
            "--model-spec",
        ),
        (
            vec!["run", "--model-spec", "llama-3.1-70b", "--gpu", "h100"],
            "tensor_parallel",
        ),
        (vec!["run", "--watts=-5"], "--watts"),
        (
            vec!["plan", "--peak-rps", "0", "--capacity", "40"],
            "--peak-rps",
        ),
        (
            vec![
                "plan",
                "--peak-rps",
                "10",
                "--capacity",
                "40",
                "--growth",
                "10",
            ],
            "--growth",
        ),
        (
            vec![
                "plan",
                "--peak-rps",
                "10",
                "--capacity",
                "4",
                "--safety-factor",
                "0.5",
            ],
            "--safety-factor",
        ),
        (
            vec![
                "monitor",
                "--metrics-url",
                "http://h/metrics",
                "--trend-windows",
                "1",
            ],
            "--trend-windows",
        ),
    ] {
        let output = goodput().args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

/// A fixed-timing simulator on 127.0.0.1:0.
async fn fixed_simulator() -> goodput_sim::RunningSim {
    let config: goodput_sim::SimConfig = serde_json::from_str(
        r#"{"engine": {"kind": "fixed", "ttft": 20, "itl": 5, "slots": 4},
            "prompt_tokenizer": "words"}"#,
    )
    .unwrap();
    goodput_sim::spawn(config, ([127, 0, 0, 1], 0).into())
        .await
        .unwrap()
}

#[test]
fn monitor_watches_a_live_simulator_and_stops_by_itself() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let simulator = runtime.block_on(fixed_simulator());
    let target = format!("http://{}/v1", simulator.addr());
    let dir = tempfile::tempdir().unwrap();
    let rows_path = dir.path().join("rows.jsonl");
    let mut load = goodput()
        .args([
            "run",
            "--quiet",
            "--no-metrics",
            "--target",
            &target,
            "--rate",
            "20",
        ])
        .args(["--duration", "3s", "--output-tokens", "8"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let (stdout, _) = run_ok(goodput().args([
        "monitor",
        "--target",
        &target,
        "--interval",
        "100ms",
        "--window",
        "500ms",
        "--duration",
        "2500ms",
        "--jsonl",
        rows_path.to_str().unwrap(),
    ]));
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(2500), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(30), "{elapsed:?}");
    assert!(stdout.contains("arrive/s"), "{stdout}");
    let rows: Vec<Value> = std::fs::read_to_string(&rows_path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(rows.len(), 5, "2.5 s in rows of 0.5 s: {rows:?}");
    let completions: f64 = rows
        .iter()
        .filter_map(|r| r["completions_per_sec"].as_f64())
        .sum();
    assert!(completions > 0.0, "{rows:?}");
    assert!(load.wait().unwrap().success());
    runtime.block_on(simulator.shutdown_and_wait()).unwrap();
}
