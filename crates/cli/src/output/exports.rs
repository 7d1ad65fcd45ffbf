//! The files written beside `report.json` in an output directory: `report.html`,
//! `summary.csv`, `summary.md`, and `requests.csv` (from the journal, when there is one).

use std::path::Path;

use anyhow::{Context, Result};
use goodput_core::report::Report;
use goodput_core::runner::read_journal;

use super::{csv, html, markdown};

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
