//! `report.html` and the comparison page, through the one HTML exporter of
//! [`goodput_core::html`] (the Python package renders through it too).

use std::path::Path;

use anyhow::{Context, Result};
use goodput_core::html::{self as exporter, CandidateComparison, LabelledRun};
use goodput_core::report::Report;

/// The report as one HTML page.
pub(crate) fn render_report(report: &Report) -> Result<String> {
    let value = serde_json::to_value(report).context("serializing the report for HTML")?;
    exporter::render_report(&value).context("serializing the report for HTML")
}

/// Several runs overlaid on one page, each candidate compared against the first.
pub(crate) fn render_comparison(
    runs: &[LabelledRun<'_>],
    comparisons: &[CandidateComparison<'_>],
) -> Result<String> {
    exporter::render_comparison(runs, comparisons).context("serializing the comparison for HTML")
}

/// Writes `report.html`.
pub(crate) fn write_report(path: &Path, report: &Report) -> Result<()> {
    std::fs::write(path, render_report(report)?)
        .with_context(|| format!("cannot write {}", path.display()))
}
