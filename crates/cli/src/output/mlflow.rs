//! `--mlflow URL`: the run recorded in an MLflow tracking server through its REST API — the
//! experiment found by name (`--mlflow-experiment`, created when missing), a run created with
//! the run's tags, its figures and parameters logged in batches, the run ended. The bodies are
//! `goodput_core::export::mlflow`'s; every request has the export timeout.

use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow};
use goodput_core::export::mlflow;
use goodput_core::report::Report;
use http::Method;
use serde_json::{Value, json};

use super::send::Receiver;

const API: &str = "/api/2.0/mlflow";
const JSON: &str = "application/json";

/// Records `report` in the tracking server at `url` under `experiment`; returns the MLflow
/// run id.
pub(crate) fn export(url: &str, experiment: &str, report: &Report) -> Result<String> {
    let receiver = Receiver::parse("--mlflow", url)?;
    let experiment_id = experiment_id(&receiver, experiment)?;
    let now = now_ms();
    let start = mlflow::started_ms(report).unwrap_or(now);
    let created = post(
        &receiver,
        "runs/create",
        &mlflow::create_run(report, &experiment_id, start),
    )?;
    let run_id = created["run"]["info"]["run_id"]
        .as_str()
        .ok_or_else(|| anyhow!("runs/create: no run.info.run_id in the answer"))?
        .to_string();
    for batch in mlflow::log_batches(report, &run_id, now) {
        post(&receiver, "runs/log-batch", &batch)?;
    }
    post(
        &receiver,
        "runs/update",
        &mlflow::finish_run(report, &run_id, now),
    )?;
    Ok(run_id)
}

/// The id of the experiment named `name`, created when the server has none of that name.
fn experiment_id(receiver: &Receiver, name: &str) -> Result<String> {
    let path = format!(
        "{API}/experiments/get-by-name?experiment_name={}",
        goodput_core::http::percent_encode(name, false)
    );
    let found = receiver.send(Method::GET, &path, JSON, Vec::new());
    let answer = match found {
        Ok(text) => parse(&text)?["experiment"]["experiment_id"].clone(),
        Err(error) if format!("{error:#}").contains("RESOURCE_DOES_NOT_EXIST") => {
            post(receiver, "experiments/create", &json!({ "name": name }))?["experiment_id"].clone()
        }
        Err(error) => return Err(error),
    };
    answer
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| anyhow!("experiment {name}: no experiment_id in the answer"))
}

fn post(receiver: &Receiver, endpoint: &str, body: &Value) -> Result<Value> {
    let bytes = serde_json::to_vec(body).context("serializing an MLflow request")?;
    let text = receiver.send(Method::POST, &format!("{API}/{endpoint}"), JSON, bytes)?;
    parse(&text)
}

fn parse(text: &str) -> Result<Value> {
    if text.trim().is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_str(text).context("the MLflow answer is not JSON")
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
