//! The files written beside `report.json` in an output directory: `report.html`,
//! `summary.csv`, `summary.md`, and `requests.csv` (from the journal, when there is one); and
//! the report sent to the receivers the user named (`--push-gateway`) the llm-d report (`--llmd-report`) MLflow (`--mlflow`) and OpenTelemetry (`--otlp`), once it is written.

use std::path::Path;

use anyhow::{Context, Result};
use goodput_core::report::Report;
use goodput_core::runner::read_journal;

use super::{csv, html, markdown};
use crate::options::run::ExportOptions;

/// Writes every export of `report` into `dir`.
pub(crate) fn write_all(dir: &Path, report: &Report) -> Result<()> {
    html::write_report(&dir.join("report.html"), report)?;
    csv::write(&dir.join("summary.csv"), &csv::summary(report)?)?;
    csv::write(&dir.join("summary.md"), &markdown::summary(report))?;
    let journal = dir.join("requests.jsonl");
    if journal.exists() {
        let contents = read_journal(&journal)
            .with_context(|| format!("reading {} for requests.csv", journal.display()))?;
        csv::write(&dir.join("requests.csv"), &csv::requests(&contents.records))?;
    }
    Ok(())
}

/// Sends the report to every receiver asked for, each failure printed as an error without
/// stopping the others. Returns whether all succeeded.
pub(crate) fn send_all(exports: &ExportOptions, report: &Report) -> bool {
    let mut ok = true;
    if let Some(path) = &exports.llmd_report {
        match super::llmd::write(path, report) {
            Ok(files) => eprintln!("wrote the llm-d benchmark report: {}", files.join(", ")),
            Err(error) => {
                eprintln!("error: --llmd-report: {error:#} (the report is kept)");
                ok = false;
            }
        }
    }
    if let Some(url) = &exports.push_gateway {
        match super::push::push(url, report) {
            Ok(group) => eprintln!("pushed the headline figures to {group}"),
            Err(error) => {
                eprintln!("error: --push-gateway: {error:#} (the report is kept)");
                ok = false;
            }
        }
    }
    if let Some(url) = &exports.otlp {
        match super::push::otlp(url, report) {
            Ok(posted) => eprintln!("sent the headline figures to {posted}"),
            Err(error) => {
                eprintln!("error: --otlp: {error:#} (the report is kept)");
                ok = false;
            }
        }
    }
    if let Some((url, experiment)) = &exports.mlflow {
        match super::mlflow::export(url, experiment, report) {
            Ok(run) => eprintln!("recorded in MLflow as run {run} of experiment {experiment}"),
            Err(error) => {
                eprintln!("error: --mlflow: {error:#} (the report is kept)");
                ok = false;
            }
        }
    }
    ok
}
