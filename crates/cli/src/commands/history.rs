//! `goodput history`: the runs recorded with `--store`, and one figure's trend across them
//! (optionally grouped by model, target or a tag such as the model version), each run marked
//! when it differs significantly from the previous run of its series. The runs are selected
//! by the store, the figures and verdicts computed by `core::decide::history`; this prints.

use std::fmt::Write as _;
use std::io::Write as _;
use std::process::ExitCode;

use anyhow::{Context, Result};
use goodput_core::decide::history::{self, RecordedRun, Trend};
use goodput_core::decide::significance::Thresholds;

use crate::exit::EXIT_OK;
use crate::options::analysis::HistoryOptions;
use crate::store::{self, RunQuery, StoredRun};
use crate::wiring::inputs::load_report;

/// Runs `goodput history`.
pub(crate) fn run(options: HistoryOptions) -> Result<ExitCode> {
    let mut store = store::open(&options.store)?;
    for path in &options.add {
        let report = load_report(path)?;
        let id = store.record(&report.value)?;
        eprintln!("recorded {} as run {id}", path.display());
    }
    let query = RunQuery {
        model: options.model.clone(),
        tags: options.tags.clone(),
        last: Some(options.last),
        ..RunQuery::default()
    };
    let runs = store.runs(&query)?;
    let text = match &options.metric {
        None => list(&runs),
        Some(metric) => {
            let recorded: Vec<RecordedRun<'_>> = runs.iter().map(StoredRun::recorded).collect();
            let trend = history::trend(&recorded, metric, &options.by, Thresholds::default())
                .with_context(|| format!("--metric {metric}"))?;
            trend_text(&trend)
        }
    };
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .context("writing to stdout")?;
    Ok(ExitCode::from(EXIT_OK))
}

fn tags_text(run: &StoredRun) -> String {
    let tags: Vec<String> = run.tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
    tags.join(",")
}

fn cell(value: Option<f64>) -> String {
    value.map_or("–".to_string(), |v| {
        if v.abs() >= 100.0 {
            format!("{v:.1}")
        } else {
            format!("{v:.2}")
        }
    })
}

fn list(runs: &[StoredRun]) -> String {
    if runs.is_empty() {
        return "no runs recorded (goodput run --store DB, or goodput history --add REPORT)\n"
            .to_string();
    }
    let mut out = format!(
        "{:>4}  {:<20}  {:<24}  {:>9}  {:>11}  {:>11}  {:>11}  {:>8}  {}\n",
        "id",
        "started",
        "model",
        "req/s",
        "out tok/s",
        "TTFT p99 ms",
        "E2E p95 ms",
        "warnings",
        "tags"
    );
    for run in runs {
        let row = history::listed(&run.report);
        let figure = |i: usize| cell(row.figures.get(i).copied().flatten());
        let _ = writeln!(
            out,
            "{:>4}  {:<20}  {:<24}  {:>9}  {:>11}  {:>11}  {:>11}  {:>8}  {}",
            run.id,
            run.started_at,
            truncate(&run.model, 24),
            figure(0),
            figure(1),
            figure(3),
            figure(4),
            row.warnings,
            tags_text(run)
        );
    }
    out
}

fn truncate(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        text.to_string()
    } else {
        text.chars().take(width - 1).collect::<String>() + "…"
    }
}

/// A trend as text: each run with its series, value, change against the previous run of its
/// series and that change's verdict (`*` marks a significant one), then a sparkline per series.
fn trend_text(trend: &Trend) -> String {
    let unit = if trend.unit.is_empty() {
        "value"
    } else {
        trend.unit
    };
    let by = if trend.by.is_empty() {
        "group"
    } else {
        &trend.by
    };
    let mut out = format!(
        "{} ({unit}) across runs\n{:>4}  {:<20}  {:<20}  {:>12}  {:>10}  {}\n",
        trend.metric, "id", "started", by, "value", "Δ %", "verdict"
    );
    for point in &trend.points {
        let change = point
            .relative
            .map(|r| format!("{:+.1} %", 100.0 * r))
            .unwrap_or_default();
        let mark = match point.verdict {
            "worse" | "better" => format!("* {}", point.verdict),
            "first" => String::new(),
            other => other.to_string(),
        };
        let _ = writeln!(
            out,
            "{:>4}  {:<20}  {:<20}  {:>12}  {:>10}  {}",
            point.id,
            point.started_at,
            truncate(&point.group, 20),
            cell(point.value),
            change,
            mark
        );
    }
    out.push('\n');
    for group in &trend.groups {
        let name = if group.name.is_empty() {
            "all runs"
        } else {
            &group.name
        };
        let _ = writeln!(
            out,
            "  {:<20} {}  ({} runs{})",
            truncate(name, 20),
            sparkline(&group.values),
            group.values.len(),
            significant(group.worse, group.better)
        );
    }
    let _ = writeln!(
        out,
        "\n* significant against the previous run of its series (p < {}, change ≥ {} %), as goodput compare judges the figure",
        trend.thresholds.alpha,
        trend.thresholds.min_effect * 100.0
    );
    out
}

fn significant(worse: usize, better: usize) -> String {
    match (worse, better) {
        (0, 0) => String::new(),
        (w, b) => format!(", {w} significantly worse, {b} better"),
    }
}

/// Values as block characters scaled between their minimum and maximum.
fn sparkline(values: &[f64]) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    values
        .iter()
        .map(|v| {
            let level = if max > min {
                (v - min) / (max - min) * 7.0
            } else {
                3.0
            };
            BARS[level.round().clamp(0.0, 7.0) as usize]
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparkline_scales_between_extremes() {
        assert_eq!(sparkline(&[1.0, 2.0, 3.0]), "▁▅█");
        assert_eq!(sparkline(&[5.0, 5.0]), "▄▄");
    }
}
