//! Repeats: the headline figures of N independent runs of one configuration, each with its
//! spread and the confidence interval of its mean (Student's t), and Welch's t-test of two
//! such sets — so a comparison counts run-to-run noise (a server's warm-up, its neighbours, the
//! workload drawn), which the per-request tests of a single run cannot see. The same figures
//! per load level of a repeated sweep, and the capacity of N independent searches.

use serde_json::Value;

use super::{report_path, student};
use crate::config::RunConfig;
use crate::report::StepReport;
use crate::report::capacity::{CapacityReport, Dimension};
use crate::report::repeats::{
    RepeatedCapacity, RepeatedFigure, RepeatedLevel, RepeatedSearch, RepeatsReport,
};

/// Confidence of every interval of a repeats section.
pub const CONFIDENCE: f64 = 0.95;

/// The figures a repeats section gives: name, path within a step, unit.
pub const FIGURES: [(&str, &str, &str); 17] = [
    ("throughput", "throughput.requests_per_sec", "req/s"),
    ("goodput", "goodput.requests_per_sec", "req/s"),
    (
        "output tokens/s",
        "throughput.output_tokens_per_sec",
        "tok/s",
    ),
    ("input tokens/s", "throughput.input_tokens_per_sec", "tok/s"),
    ("TTFT p50", "latency_ms.ttft.p50", "ms"),
    ("TTFT p95", "latency_ms.ttft.p95", "ms"),
    ("TTFT p99", "latency_ms.ttft.p99", "ms"),
    ("TPOT p50", "latency_ms.tpot.p50", "ms"),
    ("TPOT p95", "latency_ms.tpot.p95", "ms"),
    ("TPOT p99", "latency_ms.tpot.p99", "ms"),
    ("ITL p50", "latency_ms.itl.p50", "ms"),
    ("ITL p99", "latency_ms.itl.p99", "ms"),
    ("E2E p50", "latency_ms.e2e.p50", "ms"),
    ("E2E p95", "latency_ms.e2e.p95", "ms"),
    ("E2E p99", "latency_ms.e2e.p99", "ms"),
    ("completed", "requests.completed", "requests"),
    ("failed", "requests.failed", "requests"),
];

/// The configuration of run `index` (from 0) of a repeated run: the base's, its arrivals drawn
/// from `seed + index` (the runner reads the prompts `index` strides further along as for any
/// later step), so no two runs replay each other's schedule or prompts.
pub fn run_config(base: &RunConfig, index: u32) -> RunConfig {
    RunConfig {
        seed: base.seed.wrapping_add(u64::from(index)),
        ..base.clone()
    }
}

/// The number at dotted `path` of a JSON value ([`report_path::lookup`]).
pub fn number_at(value: &Value, path: &str) -> Option<f64> {
    report_path::lookup(value, path).and_then(Value::as_f64)
}

/// The mean of `values` and their sample variance (`n − 1`; `None` with fewer than two).
pub fn moments(values: &[f64]) -> (f64, Option<f64>) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let variance = (values.len() >= 2)
        .then(|| values.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0));
    (mean, variance)
}

/// The repeats section of `runs` (the steps of one configuration measured N times).
pub fn summarise(runs: &[StepReport]) -> RepeatsReport {
    RepeatsReport {
        runs: count(runs.len()),
        confidence: CONFIDENCE,
        figures: figures(runs.iter()),
        levels: None,
        capacity: None,
    }
}

/// The repeats section of a sweep measured in rounds: `steps` are round after round of the
/// `loads` (step `round · loads.len() + level`; a last round cut short counts as far as it
/// went), each level's figures across its runs.
pub fn levels(loads: &[f64], steps: &[StepReport]) -> RepeatsReport {
    let per_round = loads.len().max(1);
    let levels = loads
        .iter()
        .enumerate()
        .map(|(level, load)| {
            let indices: Vec<usize> = (level..steps.len()).step_by(per_round).collect();
            RepeatedLevel {
                load: *load,
                figures: figures(indices.iter().map(|&i| &steps[i])),
                steps: indices,
            }
        })
        .collect();
    RepeatsReport {
        runs: count(steps.len().div_ceil(per_round)),
        confidence: CONFIDENCE,
        figures: Vec::new(),
        levels: Some(levels),
        capacity: None,
    }
}

/// The repeats section of N independent capacity searches: each search's verdict (`first_step`
/// its first step in the report, `steps` how many it ran) and the capacity (each search's
/// lower bound) across them.
pub fn searches(found: &[(usize, usize, &CapacityReport)]) -> RepeatsReport {
    let searches: Vec<RepeatedSearch> = found
        .iter()
        .map(|(first_step, steps, report)| RepeatedSearch {
            first_step: *first_step,
            first_probe_step: report.first_probe_step,
            steps: *steps,
            lower_bound: report.lower_bound,
            upper_bound: report.upper_bound,
            conclusion: report.conclusion,
        })
        .collect();
    let dimension = found
        .first()
        .map_or(Dimension::Rate, |(_, _, r)| r.dimension);
    let unit = match dimension {
        Dimension::Rate => "req/s",
        Dimension::Concurrency => "concurrency",
    };
    let values = searches.iter().map(|s| s.lower_bound).collect();
    let capacity = figure("capacity", "capacity.lower_bound", unit, values);
    let conclusion = capacity_conclusion(capacity.as_ref(), &searches);
    RepeatsReport {
        runs: count(searches.len()),
        confidence: CONFIDENCE,
        figures: Vec::new(),
        levels: None,
        capacity: Some(RepeatedCapacity {
            searches,
            capacity,
            conclusion,
        }),
    }
}

/// "The highest sustainable load is 9.50 ± 0.40 req/s across 5 searches …".
fn capacity_conclusion(capacity: Option<&RepeatedFigure>, searches: &[RepeatedSearch]) -> String {
    let n = searches.len();
    let Some(f) = capacity else {
        return format!("no load was proven sustainable in any of {n} searches");
    };
    let proven = f.values.iter().flatten().count();
    let mut text = match (f.ci_low, f.ci_high) {
        (Some(low), Some(high)) => format!(
            "the highest sustainable load is {:.2} ± {:.2} {} across {proven} searches \
             ({:.0} % interval {low:.2}–{high:.2}, sd {:.2}, searches {:.2}–{:.2})",
            f.mean,
            high - f.mean,
            f.unit,
            CONFIDENCE * 100.0,
            f.sd.unwrap_or(0.0),
            f.min,
            f.max
        ),
        _ => format!(
            "the highest sustainable load is {:.2} {} ({proven} search proved a load: no \
             interval)",
            f.mean, f.unit
        ),
    };
    if proven < n {
        text.push_str(&format!("; {} of {n} searches proved no load", n - proven));
    }
    let capped = searches
        .iter()
        .filter(|s| s.upper_bound.is_none() && s.lower_bound.is_some())
        .count();
    if capped > 0 {
        text.push_str(&format!(
            "; {capped} found no failing load (the capacity is at least what they proved)"
        ));
    }
    text
}

/// The run count as the report's integer.
fn count(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Every headline figure of [`FIGURES`] across `runs`.
fn figures<'a>(runs: impl Iterator<Item = &'a StepReport>) -> Vec<RepeatedFigure> {
    let values: Vec<Value> = runs
        .map(|step| serde_json::to_value(step).unwrap_or(Value::Null))
        .collect();
    FIGURES
        .iter()
        .filter_map(|(name, path, unit)| {
            let per_run: Vec<Option<f64>> = values.iter().map(|v| number_at(v, path)).collect();
            figure(name, path, unit, per_run)
        })
        .collect()
}

/// One figure from its per-run values; `None` when no run has it.
fn figure(name: &str, path: &str, unit: &str, values: Vec<Option<f64>>) -> Option<RepeatedFigure> {
    let present: Vec<f64> = values.iter().flatten().copied().collect();
    let n = present.len() as f64;
    let min = present.iter().copied().reduce(f64::min)?;
    let max = present.iter().copied().reduce(f64::max)?;
    let (mean, variance) = moments(&present);
    let sd = variance.map(f64::sqrt);
    let half = sd.map(|sd| student::quantile(0.5 + CONFIDENCE / 2.0, n - 1.0) * sd / n.sqrt());
    Some(RepeatedFigure {
        name: name.to_string(),
        path: path.to_string(),
        unit: unit.to_string(),
        values,
        mean,
        sd,
        cv: sd.filter(|_| mean != 0.0).map(|sd| sd / mean.abs()),
        ci_low: half.map(|h| mean - h),
        ci_high: half.map(|h| mean + h),
        min,
        max,
    })
}

/// Welch's t-test of two sets of run values: the two-sided p-value that their means are
/// equal, with unequal variances (Welch–Satterthwaite degrees of freedom). `None` with fewer
/// than two values a side; 1 when neither varies and the means agree, 0 when they differ.
pub fn welch(a: &[f64], b: &[f64]) -> Option<f64> {
    let stats = |x: &[f64]| {
        let (mean, variance) = moments(x);
        Some((x.len() as f64, mean, variance?))
    };
    let ((na, ma, va), (nb, mb, vb)) = (stats(a)?, stats(b)?);
    let (sa, sb) = (va / na, vb / nb);
    let se2 = sa + sb;
    if se2 <= 0.0 {
        return Some(if ma == mb { 1.0 } else { 0.0 });
    }
    let t = (mb - ma) / se2.sqrt();
    let df = se2 * se2 / (sa * sa / (na - 1.0) + sb * sb / (nb - 1.0));
    Some((2.0 * (1.0 - student::cdf(t.abs(), df))).clamp(0.0, 1.0))
}

/// The index of the figure at `path` in a report's repeats section and each run's value of it
/// (`None` without a repeats section, or without that figure).
pub fn run_values(report: &Value, path: &str) -> Option<(usize, Vec<f64>)> {
    let figures = report.get("repeats")?.get("figures")?.as_array()?;
    let index = figures
        .iter()
        .position(|f| f.get("path").and_then(Value::as_str) == Some(path))?;
    let values = figures[index].get("values")?.as_array()?;
    Some((index, values.iter().filter_map(Value::as_f64).collect()))
}

#[cfg(test)]
#[path = "repeats_tests.rs"]
mod tests;
