//! A step of a report as an llm-d benchmark report (schema version 0.1 of
//! `llm-d/llm-d-benchmark`, written from its field definitions): `version`, `scenario` (the
//! model, the load as `goodput` with its arguments) and `metrics` (time, requests with
//! prompt and answer lengths, latencies with their units, throughput). The llm-d report
//! describes one point of a sweep, so each step is a report of its own. Values are the
//! report's own: latencies in `ms`, TPOT and ITL in `ms/token`, lengths in `count`.

use serde_json::{Map, Value, json};

use crate::report::{CountStats, LatencyStats, Report, StepReport};

/// The llm-d report schema version written.
pub const VERSION: &str = "0.1";

/// Why a step cannot be an llm-d report.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LlmdError {
    /// The schema requires the mean prompt length, answer length and TTFT, which a step with
    /// no completed (streamed) request does not have.
    #[error("step {step}: no {what} was measured (the llm-d report requires its mean)")]
    Missing {
        /// Index of the step.
        step: usize,
        /// What is missing.
        what: &'static str,
    },
}

/// The llm-d report of step `index` of `report`.
pub fn step_report(report: &Report, index: usize, step: &StepReport) -> Result<Value, LlmdError> {
    let missing = |what| LlmdError::Missing { step: index, what };
    let tokens = &step.tokens;
    let input = counts(&tokens.input_per_request).ok_or_else(|| missing("prompt length"))?;
    let output = counts(&tokens.output_per_request).ok_or_else(|| missing("answer length"))?;
    let latency = &step.latency_ms;
    let ttft = stats(&latency.ttft, "ms").ok_or_else(|| missing("time to first token"))?;
    let mut latencies = Map::new();
    latencies.insert("time_to_first_token".into(), ttft);
    let optional = [
        ("time_per_output_token", &latency.tpot, "ms/token"),
        ("inter_token_latency", &latency.itl, "ms/token"),
        ("request_latency", &latency.e2e, "ms"),
    ];
    for (name, figure, units) in optional {
        if let Some(value) = stats(figure, units) {
            latencies.insert(name.into(), value);
        }
    }
    let requests = &step.requests;
    let t = &step.throughput;
    Ok(json!({
        "version": VERSION,
        "scenario": scenario(report, step),
        "metrics": {
            "time": { "duration": step.duration_secs },
            "requests": {
                "total": requests.scheduled,
                "failures": requests.failed,
                "incomplete": requests.scheduled.saturating_sub(requests.completed + requests.failed),
                "input_length": input,
                "output_length": output,
            },
            "latency": latencies,
            "throughput": {
                "input_tokens_per_sec": t.input_tokens_per_sec,
                "output_tokens_per_sec": t.output_tokens_per_sec,
                "total_tokens_per_sec": t.total_tokens_per_sec,
                "requests_per_sec": t.requests_per_sec,
            },
            "metadata": { "goodput": step.goodput },
        },
        "metadata": {
            "tool": report.tool,
            "run_id": report.run.started_at,
            "step": index,
            "tags": report.run.tags,
        },
    }))
}

/// The scenario: the model, and the load generator (goodput) with the step's load and the
/// run's workload as its arguments.
fn scenario(report: &Report, step: &StepReport) -> Value {
    let run = &report.run;
    let mut args = Map::new();
    let load = serde_json::to_value(&step.load).unwrap_or(Value::Null);
    if let Value::Object(load) = load {
        args.extend(load.into_iter().filter(|(_, v)| !v.is_null()));
    }
    args.insert("api".into(), json!(run.api));
    args.insert("stream".into(), json!(run.stream));
    args.insert("seed".into(), json!(run.seed));
    args.insert("workload".into(), json!(run.workload));
    if let Some(slo) = &run.slo {
        args.insert("slo".into(), json!(slo));
    }
    json!({
        "description": format!("goodput {} against {}", run.api, run.target),
        "model": { "name": run.model },
        "load": { "name": "goodput", "type": step.load.mode, "args": args },
    })
}

/// A latency's statistics with `units`; `None` without a mean.
fn stats(figure: &LatencyStats, units: &str) -> Option<Value> {
    let mean = figure.mean?;
    let mut value = json!({ "units": units, "mean": mean });
    let fields = [
        ("min", figure.min),
        ("p50", figure.p50),
        ("p90", figure.p90),
        ("p95", figure.p95),
        ("p99", figure.p99),
        ("p99p9", figure.p999),
        ("max", figure.max),
    ];
    for (name, field) in fields {
        if let Some(field) = field {
            value[name] = json!(field);
        }
    }
    Some(value)
}

/// A per-request count's statistics in `count`; `None` without a mean.
fn counts(figure: &CountStats) -> Option<Value> {
    let mean = figure.mean?;
    let mut value = json!({ "units": "count", "mean": mean });
    let fields = [
        ("min", figure.min),
        ("p50", figure.p50),
        ("p99", figure.p99),
        ("max", figure.max),
    ];
    for (name, field) in fields {
        if let Some(field) = field {
            value[name] = json!(field);
        }
    }
    Some(value)
}
