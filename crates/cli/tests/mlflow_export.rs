//! `--mlflow URL`: the run recorded through MLflow's tracking REST API, against a fake
//! tracking server in the test that answers as MLflow does and checks every call: the
//! experiment looked up by name (created when missing), the run created in it with the tags,
//! the figures logged per step equal to `report.json`'s, the parameters, the run finished.
#![allow(clippy::unwrap_used)]

mod support;

use serde_json::{Value, json};
use support::receiver::{Received, Receiver};
use support::{goodput, read_json};

/// MLflow's answers: `known` says whether experiment `bench` exists (id 7).
fn tracking_server(known: bool) -> Receiver {
    Receiver::start(move |request: &Received| {
        let path = request.path.as_str();
        if path.starts_with("/api/2.0/mlflow/experiments/get-by-name?experiment_name=bench") {
            if known {
                return (
                    200,
                    r#"{"experiment":{"experiment_id":"7","name":"bench"}}"#.into(),
                );
            }
            let missing = r#"{"error_code":"RESOURCE_DOES_NOT_EXIST","message":"no"}"#;
            return (404, missing.into());
        }
        match path {
            "/api/2.0/mlflow/experiments/create" => (200, r#"{"experiment_id":"7"}"#.into()),
            "/api/2.0/mlflow/runs/create" => (200, r#"{"run":{"info":{"run_id":"r1"}}}"#.into()),
            "/api/2.0/mlflow/runs/log-batch" | "/api/2.0/mlflow/runs/update" => (200, "{}".into()),
            _ => (404, r#"{"error_code":"ENDPOINT_NOT_FOUND"}"#.into()),
        }
    })
}

fn run(dir: &std::path::Path, url: &str) -> Value {
    let out = dir.join("run");
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
        .args(["--slo", "ttft=60ms", "--tag", "team=infra", "--out"])
        .arg(&out)
        .args(["--mlflow", url, "--mlflow-experiment", "bench"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    read_json(&out.join("report.json"))
}

/// The metric `key` of step 0 in the logged batches.
fn metric(batches: &[Value], key: &str) -> f64 {
    let found: Vec<&Value> = batches
        .iter()
        .flat_map(|b| b["metrics"].as_array().unwrap())
        .filter(|m| m["key"] == key && m["step"] == 0)
        .collect();
    assert_eq!(found.len(), 1, "{key}");
    found[0]["value"].as_f64().unwrap()
}

#[test]
fn a_run_is_recorded_in_a_new_experiment_with_the_reports_figures() {
    let server = tracking_server(false);
    let dir = tempfile::tempdir().unwrap();
    let report = run(dir.path(), &server.url);
    let calls = server.requests();
    let paths: Vec<&str> = calls
        .iter()
        .map(|c| c.path.split('?').next().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            "/api/2.0/mlflow/experiments/get-by-name",
            "/api/2.0/mlflow/experiments/create",
            "/api/2.0/mlflow/runs/create",
            "/api/2.0/mlflow/runs/log-batch",
            "/api/2.0/mlflow/runs/update",
        ]
    );
    assert_eq!(calls[0].method, "GET");
    assert!(
        calls[1..]
            .iter()
            .all(|c| c.method == "POST" && c.content_type == "application/json")
    );
    assert_eq!(calls[1].json(), json!({"name": "bench"}));
    let create = calls[2].json();
    assert_eq!(create["experiment_id"], "7");
    assert!(create["start_time"].as_i64().unwrap() > 1_600_000_000_000);
    let tags = create["tags"].as_array().unwrap();
    assert!(tags.contains(&json!({"key": "team", "value": "infra"})));
    assert!(tags.contains(&json!({"key": "goodput.run_id", "value": report["run"]["started_at"]})));
    let batches: Vec<Value> = calls[3..4].iter().map(Received::json).collect();
    check_batches(&batches, &report);
    let update = calls[4].json();
    assert_eq!(update["run_id"], "r1");
    assert_eq!(update["status"], "FINISHED");
}

/// The logged metrics are step 0's figures of `report`, the parameters what was run.
fn check_batches(batches: &[Value], report: &Value) {
    assert_eq!(batches[0]["run_id"], "r1");
    let step = &report["steps"][0];
    let num = |v: &Value| v.as_f64().unwrap();
    assert_eq!(
        metric(batches, "requests_per_second"),
        num(&step["throughput"]["requests_per_sec"])
    );
    assert_eq!(
        metric(batches, "output_tokens_per_second"),
        num(&step["throughput"]["output_tokens_per_sec"])
    );
    assert_eq!(
        metric(batches, "goodput_requests_per_second"),
        num(&step["goodput"]["requests_per_sec"])
    );
    assert_eq!(
        metric(batches, "slo_attained"),
        num(&step["goodput"]["attained_fraction"])
    );
    for latency in ["ttft", "tpot", "itl", "e2e"] {
        for stat in ["p50", "p95", "p99"] {
            let key = format!("{latency}_{stat}_ms");
            assert_eq!(
                metric(batches, &key),
                num(&step["latency_ms"][latency][stat]),
                "{key}"
            );
        }
    }
    assert_eq!(
        metric(batches, "requests_completed"),
        num(&step["requests"]["completed"])
    );
    assert_eq!(
        metric(batches, "requests_failed"),
        num(&step["requests"]["failed"])
    );
    let params = batches[0]["params"].as_array().unwrap();
    assert!(params.contains(&json!({"key": "model", "value": report["run"]["model"]})));
    assert!(params.contains(&json!({"key": "slo", "value": "ttft=60ms"})));
    assert!(params.contains(&json!({"key": "step0_load", "value": "concurrency 4"})));
}

#[test]
fn an_existing_experiment_is_reused() {
    let server = tracking_server(true);
    let dir = tempfile::tempdir().unwrap();
    run(dir.path(), &server.url);
    let calls = server.requests();
    assert!(calls.iter().all(|c| !c.path.contains("experiments/create")));
    let create = calls
        .iter()
        .find(|c| c.path.ends_with("runs/create"))
        .unwrap();
    assert_eq!(create.json()["experiment_id"], "7");
}

#[test]
fn the_experiment_without_a_server_is_refused() {
    let output = goodput()
        .args([
            "run",
            "--quiet",
            "--virtual-time",
            "--requests",
            "4",
            "--mlflow-experiment",
            "x",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--mlflow-experiment needs --mlflow"));
}

#[test]
fn a_long_sweep_is_logged_in_batches_within_mlflows_limits() {
    let server = tracking_server(true);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let output = goodput()
        .args([
            "sweep",
            "--quiet",
            "--virtual-time",
            "--concurrency-steps",
            "1..60+1",
        ])
        .args(["--requests", "8", "--out"])
        .arg(&out)
        .args(["--mlflow", &server.url, "--mlflow-experiment", "bench"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = read_json(&out.join("report.json"));
    let steps = report["steps"].as_array().unwrap().len();
    let batches: Vec<Value> = server
        .requests()
        .iter()
        .filter(|c| c.path.ends_with("runs/log-batch"))
        .map(Received::json)
        .collect();
    assert!(batches.len() >= 2, "{} batches", batches.len());
    let (mut metrics, mut params) = (0, 0);
    for batch in &batches {
        let (m, p) = (
            batch["metrics"].as_array().unwrap().len(),
            batch["params"].as_array().unwrap().len(),
        );
        assert!(m + p <= 1000 && p <= 100, "{m} metrics, {p} params");
        metrics += m;
        params += p;
    }
    assert!(metrics > 1000);
    // model, target, api, stream, seed, steps, the SLO when there is one, a load per step.
    let slo = usize::from(!report["run"]["slo"].is_null());
    assert_eq!(params, 6 + slo + steps);
    let last_step = batches
        .iter()
        .flat_map(|b| b["metrics"].as_array().unwrap())
        .map(|m| m["step"].as_u64().unwrap())
        .max();
    assert_eq!(last_step, Some(steps as u64 - 1));
}
