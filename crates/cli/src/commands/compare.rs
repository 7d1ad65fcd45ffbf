//! `goodput compare A B…`: each candidate against the baseline A — the verdict and the headline
//! figures with their deltas and significance first; with `--details` the conditions that
//! differ, a significance test per latency distribution (Mann–Whitney U over the journals when
//! both runs have `requests.jsonl` beside their report, else a bootstrap over the reports'
//! quantile points) and every figure side by side. Text, Markdown, HTML or JSON; `--html`
//! writes the runs overlaid on one page beside the terminal output.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::{Context, Result};
use goodput_core::decide::compare::{self, Comparison, Side};
use goodput_core::decide::significance::Thresholds;
use goodput_core::html::{CandidateComparison, LabelledRun};

use crate::exit::{EXIT_OK, EXIT_RUN_FAILED};
use crate::options::analysis::{CompareFormat, CompareOptions};
use crate::output::{color, comparison, html};
use crate::wiring::inputs::{LoadedReport, load_report};

/// Runs `goodput compare`.
pub(crate) fn run(options: CompareOptions) -> Result<ExitCode> {
    let loaded = options
        .runs
        .iter()
        .map(|path| load_report(path))
        .collect::<Result<Vec<_>>>()?;
    let results = compare_all(&loaded, options.thresholds)?;
    let labels = labels(&loaded);
    let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
    let runs: Vec<LabelledRun<'_>> = loaded
        .iter()
        .zip(&labels)
        .map(|(run, label)| LabelledRun {
            label,
            report: &run.value,
        })
        .collect();
    let pairs: Vec<CandidateComparison<'_>> = results
        .iter()
        .enumerate()
        .map(|(i, comparison)| CandidateComparison {
            candidate: i + 1,
            comparison,
        })
        .collect();
    if let Some(path) = &options.html {
        std::fs::write(path, html::render_comparison(&runs, &pairs)?)
            .with_context(|| format!("--html: cannot write {}", path.display()))?;
    }
    let text = render(&options, &labels, &runs, &pairs)?;
    emit(&options, text)?;
    let failed = options.fail_on_regression && results.iter().any(Comparison::has_regression);
    Ok(ExitCode::from(if failed {
        EXIT_RUN_FAILED
    } else {
        EXIT_OK
    }))
}

/// Every candidate against the baseline (the first run).
fn compare_all(loaded: &[LoadedReport], thresholds: Thresholds) -> Result<Vec<Comparison>> {
    let samples = loaded
        .iter()
        .map(LoadedReport::samples)
        .collect::<Result<Vec<_>>>()?;
    let side = |i: usize| Side {
        report: &loaded[i].value,
        samples: samples[i].as_ref(),
    };
    Ok((1..loaded.len())
        .map(|i| compare::compare(side(0), side(i), thresholds))
        .collect())
}

/// The runs' names: their directory or file names, or A, B, C… when two are the same.
fn labels(loaded: &[LoadedReport]) -> Vec<String> {
    let unique = loaded
        .iter()
        .enumerate()
        .all(|(i, run)| loaded[..i].iter().all(|other| other.label != run.label));
    loaded
        .iter()
        .enumerate()
        .map(|(i, run)| {
            if unique {
                run.label.clone()
            } else {
                char::from(b'A' + (i % 26) as u8).to_string()
            }
        })
        .collect()
}

fn render(
    options: &CompareOptions,
    labels: &[&str],
    runs: &[LabelledRun<'_>],
    pairs: &[CandidateComparison<'_>],
) -> Result<String> {
    let pair_labels = |p: &CandidateComparison<'_>| [labels[0], labels[p.candidate]];
    Ok(match options.format {
        CompareFormat::Text => pairs
            .iter()
            .map(|p| comparison::text(pair_labels(p), p.comparison, options.details))
            .collect::<Vec<_>>()
            .join("\n"),
        CompareFormat::Markdown => pairs
            .iter()
            .map(|p| comparison::markdown(pair_labels(p), p.comparison, options.details))
            .collect::<Vec<_>>()
            .join("\n"),
        CompareFormat::Html => html::render_comparison(runs, pairs)?,
        CompareFormat::Json if pairs.len() == 1 => {
            serde_json::to_string_pretty(pairs[0].comparison)
                .context("serializing the comparison")?
                + "\n"
        }
        CompareFormat::Json => {
            let all: Vec<serde_json::Value> = pairs
                .iter()
                .map(|p| {
                    serde_json::json!({
                        "baseline": labels[0],
                        "candidate": labels[p.candidate],
                        "comparison": p.comparison,
                    })
                })
                .collect();
            serde_json::to_string_pretty(&all).context("serializing the comparison")? + "\n"
        }
    })
}

/// Writes the output to `--output`, or to stdout (text coloured on a terminal).
fn emit(options: &CompareOptions, text: String) -> Result<()> {
    match &options.output {
        Some(path) => {
            std::fs::write(path, &text).with_context(|| format!("cannot write {}", path.display()))
        }
        None => {
            let painted = if options.format == CompareFormat::Text {
                color::paint(&text, color::stdout_enabled())
            } else {
                text
            };
            std::io::stdout()
                .lock()
                .write_all(painted.as_bytes())
                .context("writing to stdout")
        }
    }
}
