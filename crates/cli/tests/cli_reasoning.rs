//! `goodput run` with a reasoning, tool-calling simulator and agentic sessions: the report's
//! reasoning, tool-call, session and prefix-reuse sections are filled, valid against the schema
//! and rebuilt exactly from the journal; flags that cannot apply are refused with exit 2.
#![allow(clippy::unwrap_used)]

mod support;

use serde_json::Value;
use support::{goodput, ok, read_json, validate_against_schema};

#[test]
fn an_agentic_run_reports_reasoning_tools_sessions_and_prefix_reuse() {
    let dir = tempfile::tempdir().unwrap();
    let sim = dir.path().join("sim.json");
    std::fs::write(
        &sim,
        r#"{"engine": {"kind": "batching"}, "time_scale": 20,
            "agent": {"reasoning_tokens": 8, "tool_call_probability": 0.5,
                      "prompt_tokens_details": true}}"#,
    )
    .unwrap();
    let out = dir.path().join("run");
    ok(goodput()
        .args(["run", "--quiet", "--sim-config", sim.to_str().unwrap()])
        .args(["--turns", "3", "--agent", "tool-prob=0.5,tool-latency=20ms,result-tokens=64"])
        .args(["--concurrency", "2", "--requests", "12", "--warmup", "0"])
        .args(["--input-tokens", "64", "--output-tokens", "24", "--slo", "ttfat=5s"])
        .args(["--extra-body", r#"{"tools": [{"type": "function", "function": {"name": "lookup", "parameters": {}}}]}"#])
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap());
    let report = read_json(&out.join("report.json"));
    validate_against_schema(&report);
    let step = &report["steps"][0];
    assert_eq!(
        step["reasoning"]["reasoning_tokens_per_request"]["mean"],
        8.0
    );
    assert!(
        step["tool_calls"]["ended_in_tool_call"].as_u64().unwrap() > 0,
        "{step}"
    );
    assert_eq!(step["sessions"]["turns"], 12);
    assert!(step["prefix_reuse"]["cached_fraction"].as_f64().unwrap() > 0.0);
    let rebuilt = goodput()
        .args(["report", out.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(rebuilt.status.success());
    let rebuilt: Value = serde_json::from_slice(&rebuilt.stdout).unwrap();
    for key in [
        "reasoning",
        "tool_calls",
        "sessions",
        "prefix_reuse",
        "goodput",
    ] {
        assert_eq!(
            rebuilt["steps"][0][key], step[key],
            "{key} rebuilt from the journal"
        );
    }
}

#[test]
fn flags_that_cannot_apply_are_refused_with_status_2() {
    for (args, needle) in [
        (
            vec![
                "run",
                "--agent",
                "tool-prob=0.5,tool-latency=1s,result-tokens=5",
            ],
            "--turns",
        ),
        (
            vec![
                "run",
                "--turns",
                "2",
                "--agent",
                "tool-prob=3,tool-latency=1s,result-tokens=5",
            ],
            "between 0 and 1",
        ),
        (vec!["run", "--api", "responses"], "--target"),
        (
            vec!["sim", "--reasoning-format", "xml"],
            "unknown reasoning format",
        ),
        (
            vec!["sim", "--tool-call-probability", "1.5", "--explain"],
            "between 0 and 1",
        ),
        (vec!["run", "--slo", "ttfat=fast"], "ttfat"),
        (
            vec![
                "capacity",
                "--virtual-time",
                "--sim-reasoning-tokens",
                "10",
                "--slo",
                "ttft=1s",
            ],
            "does not emulate reasoning",
        ),
    ] {
        let requests: &[&str] = if args[0] != "run" {
            &[]
        } else {
            &["--requests", "1"]
        };
        let output = goodput().args(&args).args(requests).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}
