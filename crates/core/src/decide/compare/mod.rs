//! Comparing two runs (`goodput compare A B`): every numeric figure side by side with absolute
//! and relative deltas, a significance test per latency distribution (see
//! [`crate::decide::significance`]), and warnings when the two runs were not measured under the same
//! conditions (workload, load, API, SLO, token shapes, client host). Works on reports as JSON
//! so sections added by later versions are compared too.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::Value;

use crate::decide::report_path::{Unit, leaves, lookup};
use crate::decide::significance::{self, TestResult, Thresholds};
use crate::metrics::quantiles::QuantilePoint;
use crate::record::{Phase, RequestRecord};
use crate::report::Warning;

mod figure;
mod headline;
pub mod rows;
pub use figure::figure_change;
pub use headline::{Headline, HeadlineFigure};
pub use rows::RowDelta;

/// Distributions tested for a significant change. ITL is left out: its per-token samples
/// within one request are not independent, which a rank test assumes. `ttfat` (time to first
/// answer token) is tested from the journals only, when both runs' answers showed reasoning.
pub const TESTED_METRICS: [&str; 4] = ["ttft", "tpot", "e2e", "ttfat"];

/// Bootstrap resamples when only quantile points are available.
pub const BOOTSTRAP_RESAMPLES: usize = 2000;

/// Per-request latencies of a run's measured, successful requests, ms.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LatencySamples {
    /// TTFT from the schedule.
    pub ttft: Vec<f64>,
    /// TPOT.
    pub tpot: Vec<f64>,
    /// E2E from the schedule.
    pub e2e: Vec<f64>,
    /// Time to first answer token from the schedule (empty when no answer showed reasoning,
    /// as `steps[].reasoning` is then null).
    pub ttfat: Vec<f64>,
}

impl LatencySamples {
    /// The samples of the measured, successful requests of a journal.
    pub fn from_records(records: &[RequestRecord]) -> Self {
        let (mut samples, mut reasoning) = (LatencySamples::default(), false);
        let ms = |d: std::time::Duration| d.as_micros() as f64 / 1000.0;
        for record in records
            .iter()
            .filter(|r| r.phase == Phase::Measure && r.is_ok())
        {
            samples.ttft.extend(record.ttft().map(ms));
            samples.tpot.extend(record.tpot().map(ms));
            samples.e2e.extend(record.e2e().map(ms));
            samples.ttfat.extend(record.ttfat().map(ms));
            reasoning |= record.reasoning_tokens.is_some_and(|r| r > 0);
        }
        if !reasoning {
            // As `steps[].reasoning`: no time to first answer token without reasoning.
            samples.ttfat.clear();
        }
        samples
    }

    fn get(&self, metric: &str) -> &[f64] {
        match metric {
            "ttft" => &self.ttft,
            "tpot" => &self.tpot,
            "ttfat" => &self.ttfat,
            _ => &self.e2e,
        }
    }
}

/// One run to compare: its report and, when its journal was found, its per-request values.
#[derive(Debug, Clone, Copy)]
pub struct Side<'a> {
    /// The report.
    pub report: &'a Value,
    /// Per-request latencies (from `requests.jsonl` beside the report).
    pub samples: Option<&'a LatencySamples>,
}

/// One figure in both runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricDelta {
    /// Path (without `steps[0].` when both runs have one step).
    pub path: String,
    /// Baseline value.
    pub a: Option<f64>,
    /// Candidate value.
    pub b: Option<f64>,
    /// `b − a`.
    pub delta: Option<f64>,
    /// `(b − a) / |a|`.
    pub relative: Option<f64>,
    /// Unit label.
    pub unit: &'static str,
    /// `Some(true)` when lower is better (latencies, failures), `Some(false)` when higher is
    /// better (throughput, goodput), `None` when neither.
    pub lower_is_better: Option<bool>,
}

/// The significance verdict on one distribution of one step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DistributionChange {
    /// Step index.
    pub step: usize,
    /// `ttft`, `tpot`, `e2e` or `ttfat`.
    pub metric: String,
    /// The test's outcome.
    pub test: TestResult,
    /// `regression`, `improvement` or `no significant change`.
    pub verdict: String,
}

/// Everything `goodput compare` shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    /// Significance thresholds used.
    pub thresholds: Thresholds,
    /// Every figure side by side.
    pub metrics: Vec<MetricDelta>,
    /// Distribution tests.
    pub distributions: Vec<DistributionChange>,
    /// Differences in conditions that make the comparison unfair.
    pub warnings: Vec<Warning>,
    /// The verdict and the headline figures with their significance.
    pub headline: Headline,
    /// The named breakdowns of the headline step (per model, adapter, SLO class, target and
    /// replica) side by side.
    pub rows: Vec<RowDelta>,
}

impl Comparison {
    /// Whether any tested distribution got significantly worse.
    pub fn has_regression(&self) -> bool {
        self.distributions.iter().any(|d| d.verdict == "regression")
    }
}

/// Compares `b` (candidate) against `a` (baseline).
pub fn compare(a: Side<'_>, b: Side<'_>, thresholds: Thresholds) -> Comparison {
    let steps = step_count(a.report).min(step_count(b.report));
    let single = step_count(a.report) == 1 && step_count(b.report) == 1;
    let distributions: Vec<DistributionChange> = (0..steps)
        .flat_map(|step| {
            TESTED_METRICS
                .iter()
                .filter_map(move |metric| test_distribution(a, b, step, metric, thresholds))
        })
        .collect();
    let headline_step = steps.saturating_sub(1);
    Comparison {
        thresholds,
        metrics: metric_deltas(a.report, b.report, steps, single),
        headline: headline::headline(
            a.report,
            b.report,
            headline_step,
            &distributions,
            thresholds,
        ),
        distributions,
        warnings: condition_warnings(a.report, b.report),
        rows: rows::row_deltas(a.report, b.report, headline_step),
    }
}

fn step_count(report: &Value) -> usize {
    report["steps"].as_array().map_or(0, Vec::len)
}

/// Sections of a step that are series, not figures.
const SKIPPED_STEP_SECTIONS: [&str; 2] = ["windows", "distributions_ms"];
/// Root sections that describe the run rather than measure it.
const SKIPPED_ROOT_SECTIONS: [&str; 5] = ["schema_version", "tool", "run", "steps", "warnings"];

fn metric_deltas(a: &Value, b: &Value, steps: usize, single: bool) -> Vec<MetricDelta> {
    let mut paths: Vec<String> = Vec::new();
    let mut seen = BTreeSet::new();
    let mut add = |path: String| {
        if seen.insert(path.clone()) {
            paths.push(path);
        }
    };
    for step in 0..steps {
        for report in [a, b] {
            for (path, _) in section_leaves(&report["steps"][step], &SKIPPED_STEP_SECTIONS) {
                add(format!("steps[{step}].{path}"));
            }
        }
    }
    for report in [a, b] {
        for (path, _) in section_leaves(report, &SKIPPED_ROOT_SECTIONS) {
            add(path);
        }
    }
    paths
        .into_iter()
        .map(|path| {
            let value = |r: &Value| lookup(r, &path).and_then(Value::as_f64);
            let (va, vb) = (value(a), value(b));
            let delta = va.zip(vb).map(|(x, y)| y - x);
            let relative = va
                .zip(delta)
                .and_then(|(x, d)| (x != 0.0).then(|| d / x.abs()));
            let display = if single {
                path.trim_start_matches("steps[0].").to_string()
            } else {
                path.clone()
            };
            MetricDelta {
                unit: Unit::of_path(&path).label(),
                lower_is_better: direction(&path),
                path: display,
                a: va,
                b: vb,
                delta,
                relative,
            }
        })
        .collect()
}

fn section_leaves(value: &Value, skipped: &[&str]) -> Vec<(String, f64)> {
    let Some(map) = value.as_object() else {
        return Vec::new();
    };
    map.iter()
        .filter(|(key, _)| !skipped.contains(&key.as_str()))
        .flat_map(|(key, child)| {
            let mut wrapper = serde_json::Map::new();
            wrapper.insert(key.clone(), child.clone());
            leaves(&Value::Object(wrapper))
        })
        .collect()
}

/// Whether lower is better for the figure at `path`.
fn direction(path: &str) -> Option<bool> {
    let last = path.rsplit('.').next().unwrap_or(path);
    let lower = [
        "failed",
        "failures",
        "retries",
        "mismatches",
        "disagreements",
        "growth",
        "shed",
    ];
    let higher = [
        "completed",
        "compliant",
        "attained_fraction",
        "completion_ratio",
        "stable",
    ];
    if last == "count" {
        return None;
    }
    if path.contains("latency") || path.contains("_ms.") || last.ends_with("_ms") {
        return Some(true);
    }
    if lower.iter().any(|w| path.contains(w)) {
        return Some(true);
    }
    if last.ends_with("_per_sec") && !path.contains("offered") {
        return Some(false);
    }
    higher.iter().any(|w| last.contains(w)).then_some(false)
}

fn test_distribution(
    a: Side<'_>,
    b: Side<'_>,
    step: usize,
    metric: &str,
    thresholds: Thresholds,
) -> Option<DistributionChange> {
    let single = step_count(a.report) == 1 && step_count(b.report) == 1;
    let test = match (a.samples, b.samples) {
        (Some(sa), Some(sb)) if single => {
            significance::mann_whitney(sa.get(metric), sb.get(metric), thresholds)
        }
        _ => {
            let side = |r: &Value| -> Option<(Vec<QuantilePoint>, u64)> {
                let step = &r["steps"][step];
                let points =
                    serde_json::from_value(step["distributions_ms"][metric].clone()).ok()?;
                let count = step["latency_ms"][metric]["count"].as_u64()?;
                Some((points, count))
            };
            let (pa, na) = side(a.report)?;
            let (pb, nb) = side(b.report)?;
            significance::bootstrap_quantiles((&pa, na), (&pb, nb), BOOTSTRAP_RESAMPLES, thresholds)
        }
    }?;
    let verdict = match (test.significant, test.relative_shift) {
        (true, Some(shift)) if shift > 0.0 => "regression",
        (true, _) => "improvement",
        (false, _) => "no significant change",
    };
    Some(DistributionChange {
        step,
        metric: metric.to_string(),
        test,
        verdict: verdict.to_string(),
    })
}

/// Differences in how the two runs were measured.
pub fn condition_warnings(a: &Value, b: &Value) -> Vec<Warning> {
    let mut warnings = Vec::new();
    let without_seed = |r: &Value| {
        let mut workload = r["run"]["workload"].clone();
        if let Some(map) = workload.as_object_mut() {
            map.remove("seed");
        }
        workload
    };
    if without_seed(a) != without_seed(b) {
        warnings.push(Warning::new(
            "workload_differs",
            format!(
                "the workloads differ: {} vs {}",
                without_seed(a),
                without_seed(b)
            ),
            "compare runs of the same workload (same lengths, dataset and tokenizer)",
        ));
    }
    if step_count(a) != step_count(b) {
        warnings.push(Warning::new(
            "steps_differ",
            format!(
                "the runs have {} and {} load steps; only the first {} are compared",
                step_count(a),
                step_count(b),
                step_count(a).min(step_count(b))
            ),
            "compare runs of the same load profile",
        ));
    }
    for step in 0..step_count(a).min(step_count(b)) {
        let (la, lb) = (&a["steps"][step]["load"], &b["steps"][step]["load"]);
        if la != lb {
            warnings.push(Warning::new(
                "load_differs",
                format!("step {step} ran under different load: {la} vs {lb}"),
                "compare runs under the same load profile (mode, rate or concurrency, arrivals)",
            ));
        }
        token_shape_warning(a, b, step, &mut warnings);
    }
    run_field_warnings(a, b, &mut warnings);
    warnings
}

/// API, streaming, SLO and client machine.
fn run_field_warnings(a: &Value, b: &Value, warnings: &mut Vec<Warning>) {
    for field in ["api", "stream", "slo"] {
        let (fa, fb) = (&a["run"][field], &b["run"][field]);
        if fa != fb {
            warnings.push(Warning::new(
                "conditions_differ",
                format!("run.{field} differs: {fa} vs {fb}"),
                "compare runs made with the same API, streaming mode and SLO",
            ));
        }
    }
    let host = |r: &Value| {
        let h = &r["run"]["client_host"];
        (h["cpu_model"].clone(), h["logical_cores"].clone())
    };
    if !a["run"]["client_host"].is_null()
        && !b["run"]["client_host"].is_null()
        && host(a) != host(b)
    {
        warnings.push(Warning::new(
            "client_host_differs",
            "the runs were made from different client machines".into(),
            "run both from the same client so client-side overheads match",
        ));
    }
}

/// Requests per second mean different work when the tokens per request differ.
fn token_shape_warning(a: &Value, b: &Value, step: usize, warnings: &mut Vec<Warning>) {
    for side in ["input_per_request", "output_per_request"] {
        let mean = |r: &Value| r["steps"][step]["tokens"][side]["mean"].as_f64();
        if let (Some(x), Some(y)) = (mean(a), mean(b))
            && (y - x).abs() > 0.1 * x.abs().max(1.0)
        {
            warnings.push(Warning::new(
                "token_shape_differs",
                format!("step {step}: {side} differs ({x:.0} vs {y:.0} tokens); requests/s then measure different work"),
                "compare tokens/s, or rerun with the same input and output lengths",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    fn report(rps: f64, p99: f64, output_mean: f64, rate: f64) -> Value {
        json!({
            "schema_version": 1,
            "run": {"workload": {"input_tokens": 512, "seed": 1}, "api": "chat", "stream": true, "slo": null},
            "steps": [{
                "load": {"mode": "open", "rate_per_sec": rate},
                "throughput": {"requests_per_sec": rps},
                "latency_ms": {"ttft": {"p99": p99, "count": 3}},
                "tokens": {"output_per_request": {"mean": output_mean}},
                "windows": [{"arrivals": 3}]
            }]
        })
    }

    #[test]
    fn deltas_and_directions() {
        let (a, b) = (
            report(10.0, 100.0, 128.0, 10.0),
            report(8.0, 120.0, 128.0, 10.0),
        );
        let c = compare(
            Side {
                report: &a,
                samples: None,
            },
            Side {
                report: &b,
                samples: None,
            },
            Thresholds::default(),
        );
        let p99 = c
            .metrics
            .iter()
            .find(|m| m.path == "latency_ms.ttft.p99")
            .unwrap();
        assert_eq!((p99.delta, p99.relative), (Some(20.0), Some(0.2)));
        assert_eq!((p99.unit, p99.lower_is_better), ("ms", Some(true)));
        let rps = c
            .metrics
            .iter()
            .find(|m| m.path == "throughput.requests_per_sec")
            .unwrap();
        assert_eq!(
            (rps.relative, rps.lower_is_better),
            (Some(-0.2), Some(false))
        );
        assert!(c.metrics.iter().all(|m| !m.path.contains("windows")));
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    }

    #[test]
    fn more_shed_or_failed_is_worse_more_completed_is_better() {
        assert_eq!(direction("steps.0.stability.shed_ratio"), Some(true));
        assert_eq!(direction("steps.0.requests.failed"), Some(true));
        assert_eq!(direction("steps.0.stability.completion_ratio"), Some(false));
        assert_eq!(direction("steps.0.stability.windows_assessed"), None);
    }

    #[test]
    fn warns_when_conditions_differ() {
        let (a, b) = (
            report(10.0, 100.0, 128.0, 10.0),
            report(10.0, 100.0, 64.0, 20.0),
        );
        let codes: Vec<String> = condition_warnings(&a, &b)
            .into_iter()
            .map(|w| w.code)
            .collect();
        assert_eq!(codes, ["load_differs", "token_shape_differs"]);
    }

    #[test]
    fn journals_give_a_mann_whitney_verdict() {
        let a = report(10.0, 100.0, 128.0, 10.0);
        let base = LatencySamples {
            ttft: (0..200).map(|i| 200.0 + f64::from(i % 20)).collect(),
            ..LatencySamples::default()
        };
        let slower = LatencySamples {
            ttft: base.ttft.iter().map(|v| v * 1.2).collect(),
            ..LatencySamples::default()
        };
        let c = compare(
            Side {
                report: &a,
                samples: Some(&base),
            },
            Side {
                report: &a,
                samples: Some(&slower),
            },
            Thresholds::default(),
        );
        let ttft = c.distributions.iter().find(|d| d.metric == "ttft").unwrap();
        assert_eq!(ttft.verdict, "regression");
        assert_eq!(ttft.test.method, significance::Method::MannWhitney);
        assert!(c.has_regression());
        assert!(
            c.distributions.iter().all(|d| d.metric != "ttfat"),
            "no reasoning, no TTFAT test"
        );
        assert!(
            c.headline
                .figures
                .iter()
                .all(|f| !f.name.starts_with("TTFAT"))
        );
    }

    #[test]
    fn ttfat_is_tested_and_in_the_headline_only_when_both_runs_reasoned() {
        let with = |p50: f64, per_sec: f64| {
            let mut r = report(10.0, 100.0, 128.0, 10.0);
            r["steps"][0]["reasoning"] = json!({
                "time_to_first_answer_ms": {"p50": p50, "p99": p50 * 2.0},
                "reasoning_tokens_per_sec": per_sec});
            r
        };
        let (a, b) = (with(300.0, 50.0), with(450.0, 40.0));
        let base = LatencySamples {
            ttfat: (0..200).map(|i| 300.0 + f64::from(i % 20)).collect(),
            ..LatencySamples::default()
        };
        let slower = LatencySamples {
            ttfat: base.ttfat.iter().map(|v| v * 1.5).collect(),
            ..LatencySamples::default()
        };
        let side = |report, samples| Side {
            report,
            samples: Some(samples),
        };
        let c = compare(side(&a, &base), side(&b, &slower), Thresholds::default());
        let ttfat = c
            .distributions
            .iter()
            .find(|d| d.metric == "ttfat")
            .unwrap();
        assert_eq!(ttfat.verdict, "regression");
        let figure = |c: &Comparison, name: &str| {
            c.headline.figures.iter().find(|f| f.name == name).cloned()
        };
        let p99 = figure(&c, "TTFAT p99").unwrap();
        assert_eq!(
            (p99.a, p99.b, p99.verdict),
            (Some(600.0), Some(900.0), "worse")
        );
        assert_eq!(p99.path, "steps[0].reasoning.time_to_first_answer_ms.p99");
        let per_sec = figure(&c, "reasoning tokens/s").unwrap();
        assert_eq!((per_sec.a, per_sec.b), (Some(50.0), Some(40.0)));
        // A baseline without reasoning: the figures are omitted, not zero.
        let plain = report(10.0, 100.0, 128.0, 10.0);
        let c = compare(
            side(&plain, &LatencySamples::default()),
            side(&b, &slower),
            Thresholds::default(),
        );
        assert!(figure(&c, "TTFAT p50").is_none());
        assert!(figure(&c, "reasoning tokens/s").is_none());
        assert!(c.distributions.iter().all(|d| d.metric != "ttfat"));
    }
}
