//! `--llmd-report FILE`: the run as an llm-d benchmark report. The file is checked against the
//! fields, types and units that version 0.1 of the llm-d benchmark report defines (written
//! here as a JSON Schema from those definitions: required `version`, `scenario.model.name`,
//! `scenario.load.name`, `metrics.time.duration`, `metrics.requests.{total, input_length,
//! output_length}`, `metrics.latency.time_to_first_token`, `metrics.throughput
//! .total_tokens_per_sec`; statistics with `units` and `mean`; the units each figure allows),
//! and its figures against `report.json`.
#![allow(clippy::unwrap_used)]

mod support;

use serde_json::{Value, json};
use support::{goodput, read_json};

/// A statistics object of the llm-d schema whose units are one of `units`.
fn statistics(units: &[&str]) -> Value {
    let number = json!({"type": "number"});
    let mut properties = serde_json::Map::new();
    properties.insert("units".into(), json!({"enum": units}));
    for name in [
        "mean", "mode", "stddev", "min", "p0p1", "p1", "p5", "p10", "p25", "p50", "p75", "p90",
        "p95", "p99", "p99p9", "max",
    ] {
        properties.insert(name.into(), number.clone());
    }
    json!({
        "type": "object",
        "required": ["units", "mean"],
        "properties": properties,
        "additionalProperties": false,
    })
}

/// The llm-d benchmark report v0.1, as its definitions say.
fn llmd_schema() -> Value {
    json!({
        "type": "object",
        "required": ["version", "scenario", "metrics"],
        "properties": {
            "version": {"const": "0.1"},
            "scenario": {
                "type": "object",
                "required": ["model", "load"],
                "properties": {
                    "description": {"type": "string"},
                    "model": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {"name": {"type": "string"}, "quantization": {"type": "string"}},
                    },
                    "load": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {
                            "name": {"type": "string"},
                            "type": {"type": "string"},
                            "args": {"type": "object"},
                        },
                    },
                },
            },
            "metrics": metrics_schema(),
        },
    })
}

/// `metrics` of the llm-d benchmark report v0.1.
fn metrics_schema() -> Value {
    let count = statistics(&["count"]);
    let time = statistics(&["ms", "s"]);
    let per_token = statistics(&["ms/token", "s/token"]);
    let number = json!({"type": "number"});
    let optional_count = json!({"type": "integer", "minimum": 0});
    json!({
        "type": "object",
        "required": ["time", "requests", "latency", "throughput"],
        "properties": {
            "time": {
                "type": "object",
                "required": ["duration"],
                "properties": {"duration": number, "start": number, "stop": number},
            },
            "requests": {
                "type": "object",
                "required": ["total", "input_length", "output_length"],
                "properties": {
                    "total": {"type": "integer", "minimum": 0},
                    "failures": optional_count,
                    "incomplete": optional_count,
                    "input_length": count,
                    "output_length": count,
                },
                "additionalProperties": false,
            },
            "latency": {
                "type": "object",
                "required": ["time_to_first_token"],
                "properties": {
                    "time_to_first_token": time,
                    "normalized_time_per_output_token": per_token,
                    "time_per_output_token": per_token,
                    "inter_token_latency": per_token,
                    "request_latency": time,
                },
                "additionalProperties": false,
            },
            "throughput": {
                "type": "object",
                "required": ["total_tokens_per_sec"],
                "properties": {
                    "input_tokens_per_sec": number,
                    "output_tokens_per_sec": number,
                    "total_tokens_per_sec": number,
                    "requests_per_sec": number,
                },
                "additionalProperties": false,
            },
        },
    })
}

fn validate(file: &Value) {
    let schema = llmd_schema();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(file)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "not an llm-d report v0.1:\n{}",
        errors.join("\n")
    );
}

/// The figures of `file` equal step `step` of `report`.
fn check_figures(file: &Value, report: &Value, step: usize) {
    let s = &report["steps"][step];
    let m = &file["metrics"];
    assert_eq!(file["scenario"]["model"]["name"], report["run"]["model"]);
    assert_eq!(m["time"]["duration"], s["duration_secs"]);
    assert_eq!(m["requests"]["total"], s["requests"]["scheduled"]);
    assert_eq!(m["requests"]["failures"], s["requests"]["failed"]);
    for (ours, theirs) in [
        ("input_per_request", "input_length"),
        ("output_per_request", "output_length"),
    ] {
        for stat in ["mean", "p50", "p99", "min", "max"] {
            assert_eq!(
                m["requests"][theirs][stat], s["tokens"][ours][stat],
                "{theirs}.{stat}"
            );
        }
    }
    let pairs = [
        ("ttft", "time_to_first_token", "ms"),
        ("tpot", "time_per_output_token", "ms/token"),
        ("itl", "inter_token_latency", "ms/token"),
        ("e2e", "request_latency", "ms"),
    ];
    for (ours, theirs, units) in pairs {
        let figure = &m["latency"][theirs];
        assert_eq!(figure["units"], units);
        for stat in ["mean", "min", "p50", "p90", "p95", "p99", "max"] {
            assert_eq!(figure[stat], s["latency_ms"][ours][stat], "{theirs}.{stat}");
        }
        assert_eq!(figure["p99p9"], s["latency_ms"][ours]["p999"]);
    }
    for name in [
        "input_tokens_per_sec",
        "output_tokens_per_sec",
        "total_tokens_per_sec",
        "requests_per_sec",
    ] {
        assert_eq!(m["throughput"][name], s["throughput"][name], "{name}");
    }
}

#[test]
fn a_run_is_an_llmd_report_with_the_reports_figures() {
    let dir = tempfile::tempdir().unwrap();
    let (out, file) = (dir.path().join("run"), dir.path().join("llmd.json"));
    let output = goodput()
        .args([
            "run",
            "--quiet",
            "--virtual-time",
            "--requests",
            "40",
            "--concurrency",
            "4",
        ])
        .args(["--slo", "ttft=60ms", "--out"])
        .arg(&out)
        .arg("--llmd-report")
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = read_json(&out.join("report.json"));
    let written = read_json(&file);
    validate(&written);
    check_figures(&written, &report, 0);
    assert_eq!(written["scenario"]["load"]["name"], "goodput");
    assert_eq!(written["scenario"]["load"]["args"]["concurrency"], 4);
}

#[test]
fn a_sweep_writes_one_llmd_report_per_step() {
    let dir = tempfile::tempdir().unwrap();
    let (out, file) = (dir.path().join("sweep"), dir.path().join("point.json"));
    let output = goodput()
        .args([
            "sweep",
            "--quiet",
            "--virtual-time",
            "--concurrency-steps",
            "1,4",
        ])
        .args(["--requests", "24", "--out"])
        .arg(&out)
        .arg("--llmd-report")
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = read_json(&out.join("report.json"));
    assert_eq!(report["steps"].as_array().unwrap().len(), 2);
    assert!(!file.exists());
    for step in 0..2 {
        let written = read_json(&dir.path().join(format!("point-step{step}.json")));
        validate(&written);
        check_figures(&written, &report, step);
    }
}
