//! `goodput history`: the runs recorded with `--store`, and one figure's trend across them
//! (optionally grouped by model, target or a tag such as the model version).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use goodput_core::decide::report_path;

use crate::exit::EXIT_OK;
use crate::options::analysis::HistoryOptions;
use crate::store::{Store, StoredRun};
use crate::wiring::inputs::load_report;

/// Runs `goodput history`.
pub(crate) fn run(options: HistoryOptions) -> Result<ExitCode> {
    let store = Store::open(&options.store)?;
    for path in &options.add {
        let report = load_report(path)?;
        let id = store.record(&report.value)?;
        eprintln!("recorded {} as run {id}", path.display());
    }
    let filters = &options.tags;
    let mut runs: Vec<StoredRun> = store
        .runs()?
        .into_iter()
        .filter(|run| options.model.as_ref().is_none_or(|m| &run.model == m))
        .filter(|run| filters.iter().all(|(k, v)| run.tags.get(k) == Some(v)))
        .collect();
    let skip = runs.len().saturating_sub(options.last);
    runs.drain(..skip);
    let text = match &options.metric {
        None => list(&runs),
        Some(metric) => trend(&runs, metric, options.by.as_deref())?,
    };
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .context("writing to stdout")?;
    Ok(ExitCode::from(EXIT_OK))
}

fn figure(run: &StoredRun, path: &str) -> Option<f64> {
    report_path::resolve(&run.report, 0, path)
        .ok()
        .and_then(|f| f.value)
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
        let warnings = run.report["warnings"].as_array().map_or(0, Vec::len);
        let _ = writeln!(
            out,
            "{:>4}  {:<20}  {:<24}  {:>9}  {:>11}  {:>11}  {:>11}  {:>8}  {}",
            run.id,
            run.started_at,
            truncate(&run.model, 24),
            cell(figure(run, "requests_per_sec")),
            cell(figure(run, "output_tokens_per_sec")),
            cell(figure(run, "ttft.p99")),
            cell(figure(run, "e2e.p95")),
            warnings,
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

fn group_of(run: &StoredRun, by: Option<&str>) -> Result<String> {
    Ok(match by {
        None => String::new(),
        Some("model") => run.model.clone(),
        Some("target") => run.target.clone(),
        Some(key) => match key.strip_prefix("tag:") {
            Some(tag) => run
                .tags
                .get(tag)
                .cloned()
                .unwrap_or_else(|| "(untagged)".into()),
            None => bail!("--by {key}: expected model, target or tag:NAME"),
        },
    })
}

fn trend(runs: &[StoredRun], metric: &str, by: Option<&str>) -> Result<String> {
    if let Some(run) = runs.first() {
        report_path::resolve(&run.report, 0, metric)
            .with_context(|| format!("--metric {metric}"))?;
    }
    let unit = runs
        .first()
        .and_then(|r| report_path::resolve(&r.report, 0, metric).ok())
        .map_or("", |f| f.unit.label());
    let mut out = format!(
        "{metric} ({}) across runs\n{:>4}  {:<20}  {:<20}  {:>12}  {:>10}\n",
        if unit.is_empty() { "value" } else { unit },
        "id",
        "started",
        by.unwrap_or("group"),
        "value",
        "Δ %"
    );
    let mut groups: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for run in runs {
        let group = group_of(run, by)?;
        let value = figure(run, metric);
        let series = groups.entry(group.clone()).or_default();
        let change = value
            .zip(series.last())
            .and_then(|(v, p)| (*p != 0.0).then(|| format!("{:+.1} %", 100.0 * (v - p) / p.abs())))
            .unwrap_or_default();
        if let Some(v) = value {
            series.push(v);
        }
        let _ = writeln!(
            out,
            "{:>4}  {:<20}  {:<20}  {:>12}  {:>10}",
            run.id,
            run.started_at,
            truncate(&group, 20),
            cell(value),
            change
        );
    }
    out.push('\n');
    for (group, values) in &groups {
        let name = if group.is_empty() { "all runs" } else { group };
        let _ = writeln!(
            out,
            "  {:<20} {}  ({} runs)",
            truncate(name, 20),
            sparkline(values),
            values.len()
        );
    }
    Ok(out)
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
