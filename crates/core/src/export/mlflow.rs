//! A report as the bodies of MLflow's tracking REST API (`/api/2.0/mlflow/…`): the run's
//! creation (run name, start time, tags), its figures, parameters and tags in `log-batch`
//! bodies within the API's limits, and its end. Metric keys are the report's own names with
//! their unit (`ttft_p99_ms`, `requests_per_second`, `requests_completed`, …), one value per
//! step with MLflow's `step` the step's index; values are exactly the report's.

use serde_json::{Value, json};

use super::figures::{Figure, Unit, headline, run_id};
use crate::report::Report;

/// Most metrics in one `log-batch` request (MLflow takes 1,000 entities in all, at most 100
/// of them parameters).
pub const MAX_METRICS_PER_BATCH: usize = 900;
/// Most parameters in one `log-batch` request (MLflow's limit).
pub const MAX_PARAMS_PER_BATCH: usize = 100;
/// Longest parameter value MLflow accepts everywhere (older servers: 500 characters).
pub const MAX_PARAM_CHARS: usize = 500;

/// The key of a figure: its name, what tells it apart, its unit.
pub fn metric_key(figure: &Figure) -> String {
    let mut key = figure.name.to_string();
    for (label, value) in &figure.labels {
        let part = match (*label, value.as_str()) {
            ("quantile", "0.5") => "p50".to_string(),
            ("quantile", "0.95") => "p95".to_string(),
            ("quantile", "0.99") => "p99".to_string(),
            (_, value) => value.replace(|c: char| !c.is_ascii_alphanumeric() && c != '_', "_"),
        };
        key.push('_');
        key.push_str(&part);
    }
    if figure.unit == Unit::Millis {
        key.push_str("_ms");
    }
    key
}

/// The body of `runs/create`: in `experiment_id`, named after the model and the run id,
/// started at `start_ms` (ms since the Unix epoch), with the run's tags.
pub fn create_run(report: &Report, experiment_id: &str, start_ms: i64) -> Value {
    json!({
        "experiment_id": experiment_id,
        "run_name": format!("{} {}", report.run.model, run_id(report)),
        "start_time": start_ms,
        "tags": tags(report),
    })
}

/// The run's tags: the user's (`--tag`) and goodput's own (`goodput.*`).
fn tags(report: &Report) -> Vec<Value> {
    let run = &report.run;
    let mut tags: Vec<Value> = run
        .tags
        .iter()
        .map(|(key, value)| json!({"key": key, "value": value}))
        .collect();
    tags.push(json!({"key": "goodput.run_id", "value": run_id(report)}));
    tags.push(json!({"key": "goodput.version", "value": report.tool.version}));
    tags
}

/// The run's parameters: what was run against what, and each step's load
/// (`step<i>_load`).
fn params(report: &Report) -> Vec<Value> {
    let run = &report.run;
    let mut params: Vec<(String, String)> = vec![
        ("model".into(), run.model.clone()),
        ("target".into(), run.target.clone()),
        ("api".into(), run.api.clone()),
        ("stream".into(), run.stream.to_string()),
        ("seed".into(), run.seed.to_string()),
        ("steps".into(), report.steps.len().to_string()),
    ];
    if let Some(slo) = &run.slo {
        params.push(("slo".into(), slo.clone()));
    }
    for (index, step) in report.steps.iter().enumerate() {
        let load = &step.load;
        let level = match (load.concurrency, load.rate_per_sec) {
            (Some(c), _) => format!("concurrency {c}"),
            (None, Some(rate)) => format!("rate {rate}/s"),
            _ => load.mode.clone(),
        };
        params.push((format!("step{index}_load"), level));
    }
    params
        .into_iter()
        .map(|(key, value)| json!({"key": key, "value": truncate(&value)}))
        .collect()
}

fn truncate(value: &str) -> String {
    value.chars().take(MAX_PARAM_CHARS).collect()
}

/// The `log-batch` bodies of run `mlflow_run_id`: the metrics stamped `timestamp_ms` and the
/// parameters, each body within MLflow's limits (1,000 entities, 100 of them parameters).
pub fn log_batches(report: &Report, mlflow_run_id: &str, timestamp_ms: i64) -> Vec<Value> {
    let metrics: Vec<Value> = headline(report)
        .iter()
        .map(|figure| {
            json!({
                "key": metric_key(figure),
                "value": figure.value,
                "timestamp": timestamp_ms,
                "step": figure.step,
            })
        })
        .collect();
    let params = params(report);
    let metric_chunks: Vec<&[Value]> = metrics.chunks(MAX_METRICS_PER_BATCH).collect();
    let param_chunks: Vec<&[Value]> = params.chunks(MAX_PARAMS_PER_BATCH).collect();
    let batches = metric_chunks.len().max(param_chunks.len()).max(1);
    (0..batches)
        .map(|i| {
            json!({
                "run_id": mlflow_run_id,
                "metrics": metric_chunks.get(i).copied().unwrap_or_default(),
                "params": param_chunks.get(i).copied().unwrap_or_default(),
            })
        })
        .collect()
}

/// The body of `runs/update` ending run `mlflow_run_id` at `end_ms`: `FINISHED`, or `FAILED`
/// when the run did not complete.
pub fn finish_run(report: &Report, mlflow_run_id: &str, end_ms: i64) -> Value {
    let status = if report.run.end_reason == "completed" {
        "FINISHED"
    } else {
        "FAILED"
    };
    json!({"run_id": mlflow_run_id, "status": status, "end_time": end_ms})
}

/// The run's start in ms since the Unix epoch, read from `run.started_at` (RFC 3339 in UTC, as
/// goodput writes it); `None` in any other form.
pub fn started_ms(report: &Report) -> Option<i64> {
    let at = crate::shard::parse_rfc3339_utc(&report.run.started_at)?;
    i64::try_from(crate::shard::unix_ms(at)).ok()
}
