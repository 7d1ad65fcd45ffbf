//! A report's headline figures as an OpenTelemetry metrics export (OTLP/HTTP with the JSON
//! encoding of `ExportMetricsServiceRequest`, as a collector's `/v1/metrics` takes it): one
//! resource (`service.name` goodput, the run id, model, target, API and tags as
//! `goodput.tag.<key>`), one scope, one gauge per figure with a data point per step and
//! label (`step`, `quantile`, `outcome`, `kind`). Values are the report's own, in its units
//! (latencies in `ms`).

use serde_json::{Value, json};

use super::figures::{Figure, Unit, headline, run_id};
use crate::report::Report;

/// The metric name of a figure (`goodput.` + its name).
pub fn metric_name(figure: &Figure) -> String {
    format!("goodput.{}", figure.name)
}

/// The UCUM unit of a figure.
pub fn unit(figure: &Figure) -> &'static str {
    match figure.unit {
        Unit::Millis => "ms",
        Unit::Ratio => "1",
        Unit::Count => "{request}",
        Unit::PerSec if figure.name.contains("tokens") => "{token}/s",
        Unit::PerSec => "{request}/s",
    }
}

fn string(key: &str, value: &str) -> Value {
    json!({"key": key, "value": {"stringValue": value}})
}

/// The resource's attributes: who sent the figures and about which run.
fn resource(report: &Report) -> Vec<Value> {
    let run = &report.run;
    let mut attributes = vec![
        string("service.name", "goodput"),
        string("service.version", &report.tool.version),
        string("goodput.run_id", run_id(report)),
        string("goodput.model", &run.model),
        string("goodput.target", &run.target),
        string("goodput.api", &run.api),
    ];
    for (key, value) in &run.tags {
        attributes.push(string(&format!("goodput.tag.{key}"), value));
    }
    attributes
}

/// The export request body of `report`'s figures, every point stamped `time_unix_nano`.
pub fn export_request(report: &Report, time_unix_nano: u64) -> Value {
    let mut metrics: Vec<(String, Value)> = Vec::new();
    for figure in headline(report) {
        let name = metric_name(&figure);
        let mut attributes =
            vec![json!({"key": "step", "value": {"intValue": figure.step.to_string()}})];
        for (key, value) in &figure.labels {
            attributes.push(string(key, value));
        }
        let point = json!({
            "attributes": attributes,
            "timeUnixNano": time_unix_nano.to_string(),
            "asDouble": figure.value,
        });
        match metrics.iter_mut().find(|(n, _)| *n == name) {
            Some((_, metric)) => {
                if let Some(points) = metric["gauge"]["dataPoints"].as_array_mut() {
                    points.push(point);
                }
            }
            None => {
                let metric = json!({
                    "name": name,
                    "description": figure.help,
                    "unit": unit(&figure),
                    "gauge": {"dataPoints": [point]},
                });
                metrics.push((name, metric));
            }
        }
    }
    let metrics: Vec<Value> = metrics.into_iter().map(|(_, metric)| metric).collect();
    json!({
        "resourceMetrics": [{
            "resource": {"attributes": resource(report)},
            "scopeMetrics": [{
                "scope": {"name": "goodput", "version": report.tool.version},
                "metrics": metrics,
            }],
        }],
    })
}
