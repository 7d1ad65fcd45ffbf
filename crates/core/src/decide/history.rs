//! The runs recorded in a history store, as `goodput history` and `goodput ui` show them: how
//! runs are grouped into series ([`GroupBy`]: model, target, or a tag such as the model
//! version), the figures each run is listed with ([`listed`]), and a figure's trend across
//! runs ([`trend`]) — each run against the previous run of its series, with the change and
//! whether it is significant exactly as `goodput compare` judges that figure
//! ([`crate::decide::compare::figure_change`]). Works on reports as JSON, like compare.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::decide::compare::figure_change;
use crate::decide::report_path::{self, UnknownPath};
use crate::decide::significance::Thresholds;

/// A recorded run as a store gives it back.
#[derive(Debug, Clone, Copy)]
pub struct RecordedRun<'a> {
    /// The store's id (increasing in recording order).
    pub id: i64,
    /// Run start (RFC 3339).
    pub started_at: &'a str,
    /// Model name.
    pub model: &'a str,
    /// Target (redacted).
    pub target: &'a str,
    /// User tags.
    pub tags: &'a BTreeMap<String, String>,
    /// The whole report.
    pub report: &'a Value,
}

/// How runs are grouped into series.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum GroupBy {
    /// One series of every run.
    #[default]
    Nothing,
    /// One series per model.
    Model,
    /// One series per target.
    Target,
    /// One series per value of a tag (`tag:NAME`); runs without it form `(untagged)`.
    Tag(String),
}

/// A `--by` value that is not `model`, `target` or `tag:NAME`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}`: expected model, target or tag:NAME")]
pub struct UnknownGrouping(pub String);

impl GroupBy {
    /// `model`, `target` or `tag:NAME` (empty: no grouping).
    pub fn parse(text: &str) -> Result<GroupBy, UnknownGrouping> {
        Ok(match text.trim() {
            "" => GroupBy::Nothing,
            "model" => GroupBy::Model,
            "target" => GroupBy::Target,
            other => match other.strip_prefix("tag:") {
                Some(tag) if !tag.is_empty() => GroupBy::Tag(tag.to_string()),
                _ => return Err(UnknownGrouping(text.to_string())),
            },
        })
    }

    /// The series `run` belongs to (empty without grouping).
    pub fn group(&self, run: &RecordedRun<'_>) -> String {
        match self {
            GroupBy::Nothing => String::new(),
            GroupBy::Model => run.model.to_string(),
            GroupBy::Target => run.target.to_string(),
            GroupBy::Tag(tag) => run
                .tags
                .get(tag)
                .cloned()
                .unwrap_or_else(|| "(untagged)".into()),
        }
    }

    /// As written (`tag:version`; empty without grouping).
    pub fn name(&self) -> String {
        match self {
            GroupBy::Nothing => String::new(),
            GroupBy::Model => "model".into(),
            GroupBy::Target => "target".into(),
            GroupBy::Tag(tag) => format!("tag:{tag}"),
        }
    }
}

/// The figures a run is listed with: its report path and a short heading.
pub const LISTED: [(&str, &str); 6] = [
    ("requests_per_sec", "req/s"),
    ("output_tokens_per_sec", "out tok/s"),
    ("goodput.requests_per_sec", "goodput req/s"),
    ("ttft.p99", "TTFT p99 ms"),
    ("e2e.p95", "E2E p95 ms"),
    ("error_rate", "errors"),
];

/// A run's row in a list: what kind of run it was, the [`LISTED`] figures of its first step,
/// its capacity (capacity searches) and how many warnings it carries.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ListedRun {
    /// `run`, `repeats`, `sweep` or `capacity`.
    pub kind: &'static str,
    /// Load steps measured.
    pub steps: usize,
    /// The [`LISTED`] figures, in that order (`None`: not measured).
    pub figures: Vec<Option<f64>>,
    /// The highest sustainable load a capacity search found.
    pub capacity: Option<f64>,
    /// Methodology warnings in the report.
    pub warnings: usize,
}

/// The row `report` is listed with.
pub fn listed(report: &Value) -> ListedRun {
    let kind = if report.get("capacity").is_some_and(|c| !c.is_null()) {
        "capacity"
    } else if report.get("sweep").is_some_and(|c| !c.is_null()) {
        "sweep"
    } else if report.get("repeats").is_some_and(|c| !c.is_null()) {
        "repeats"
    } else {
        "run"
    };
    ListedRun {
        kind,
        steps: report["steps"].as_array().map_or(0, Vec::len),
        figures: LISTED.iter().map(|(path, _)| value(report, path)).collect(),
        capacity: report["capacity"]["lower_bound"].as_f64(),
        warnings: report["warnings"].as_array().map_or(0, Vec::len),
    }
}

/// The figure at `path` of the first step (or the root), `None` when absent or not measured.
pub fn value(report: &Value, path: &str) -> Option<f64> {
    report_path::resolve(report, 0, path)
        .ok()
        .and_then(|f| f.value)
}

/// One run in a figure's trend.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrendPoint {
    /// The run's id.
    pub id: i64,
    /// Its start (RFC 3339).
    pub started_at: String,
    /// Its series.
    pub group: String,
    /// The figure (`None`: not measured, or not in this run's report).
    pub value: Option<f64>,
    /// The run it is judged against: the previous run of its series with the figure.
    pub previous: Option<i64>,
    /// `(value − previous) / |previous|`.
    pub relative: Option<f64>,
    /// The test behind the verdict (`none` when untested).
    pub test: &'static str,
    /// Its two-sided p-value.
    pub p_value: Option<f64>,
    /// `better`, `worse`, `no significant change`, `not tested`, `first` (nothing to judge
    /// against) or `not measured`.
    pub verdict: &'static str,
}

impl TrendPoint {
    /// `run` before it is judged: `first`, or `not measured` without a value.
    fn unjudged(run: &RecordedRun<'_>, group: String, value: Option<f64>) -> TrendPoint {
        TrendPoint {
            id: run.id,
            started_at: run.started_at.to_string(),
            group,
            value,
            previous: None,
            relative: None,
            test: "none",
            p_value: None,
            verdict: if value.is_some() {
                "first"
            } else {
                "not measured"
            },
        }
    }
}

/// One series of a trend.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrendGroup {
    /// The series (empty: every run).
    pub name: String,
    /// Its measured values, oldest first.
    pub values: Vec<f64>,
    /// Runs significantly worse than their predecessor.
    pub worse: usize,
    /// Runs significantly better than their predecessor.
    pub better: usize,
}

/// A figure across runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Trend {
    /// The figure as asked for (`ttft.p99`).
    pub metric: String,
    /// Its full path in the first run (`steps[0].latency_ms.ttft.p99`).
    pub path: String,
    /// Its unit label (`ms`, `/s`, or empty).
    pub unit: &'static str,
    /// The grouping (`tag:version`; empty: none).
    pub by: String,
    /// The significance thresholds of the verdicts.
    pub thresholds: Thresholds,
    /// Every run, oldest first.
    pub points: Vec<TrendPoint>,
    /// The series, by name.
    pub groups: Vec<TrendGroup>,
}

/// The trend of `metric` (any report path, as `goodput gate` and `compare` read them) across
/// `runs` (oldest first), grouped by `by`: each run's value, judged against the previous
/// run of its series that has the figure. Fails when the first run has no such figure.
pub fn trend(
    runs: &[RecordedRun<'_>],
    metric: &str,
    by: &GroupBy,
    thresholds: Thresholds,
) -> Result<Trend, UnknownPath> {
    let first = match runs.first() {
        Some(run) => Some(report_path::resolve(run.report, 0, metric)?),
        None => None,
    };
    let mut last: BTreeMap<String, (&RecordedRun<'_>, f64)> = BTreeMap::new();
    let mut groups: BTreeMap<String, TrendGroup> = BTreeMap::new();
    let mut points = Vec::with_capacity(runs.len());
    for run in runs {
        let group = by.group(run);
        let figure = report_path::resolve(run.report, 0, metric).ok();
        let value = figure.as_ref().and_then(|f| f.value);
        let series = groups.entry(group.clone()).or_insert_with(|| TrendGroup {
            name: group.clone(),
            values: Vec::new(),
            worse: 0,
            better: 0,
        });
        let mut point = TrendPoint::unjudged(run, group.clone(), value);
        if let (Some(v), Some(figure)) = (value, &figure) {
            if let Some((previous, before)) = last.get(&group) {
                judge(
                    &mut point,
                    (previous, *before),
                    run,
                    &figure.path,
                    thresholds,
                );
                series.worse += usize::from(point.verdict == "worse");
                series.better += usize::from(point.verdict == "better");
            }
            series.values.push(v);
            last.insert(group, (run, v));
        }
        points.push(point);
    }
    Ok(Trend {
        metric: metric.to_string(),
        path: first.as_ref().map_or_else(String::new, |f| f.path.clone()),
        unit: first.map_or("", |f| f.unit.label()),
        by: by.name(),
        thresholds,
        points,
        groups: groups.into_values().collect(),
    })
}

/// `point` (the run `current`) against `previous` (whose value was `before`), as compare
/// judges the figure at `path`. A derived rate (`error_rate`: failed ÷ scheduled) is judged
/// by the headline's test of the error rate.
fn judge(
    point: &mut TrendPoint,
    (previous, before): (&RecordedRun<'_>, f64),
    current: &RecordedRun<'_>,
    path: &str,
    thresholds: Thresholds,
) {
    let path = path.split(" ÷ ").next().unwrap_or(path);
    let change = figure_change(previous.report, current.report, path, thresholds);
    point.previous = Some(previous.id);
    point.relative = point
        .value
        .and_then(|v| (before != 0.0).then(|| (v - before) / before.abs()));
    point.test = change.test;
    point.p_value = change.p_value;
    point.verdict = change.verdict;
}

#[cfg(test)]
#[path = "history_tests.rs"]
mod tests;
