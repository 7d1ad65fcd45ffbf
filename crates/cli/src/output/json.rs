//! JSON output: `report.json`, `run.json`, and the report on stdout (`--json`).

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use goodput_core::report::Report;
use serde::Serialize;

/// Writes `value` as pretty JSON to `path` (via a temporary file, so readers never see half).
pub(crate) fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value).context("serializing JSON")?;
    let temporary = path.with_extension("json.tmp");
    std::fs::write(&temporary, text + "\n")
        .with_context(|| format!("cannot write {}", temporary.display()))?;
    std::fs::rename(&temporary, path).with_context(|| format!("cannot write {}", path.display()))
}

/// Writes `report.json`.
pub(crate) fn write_report(path: &Path, report: &Report) -> Result<()> {
    write_json(path, report)
}

/// Prints the report as JSON on stdout.
pub(crate) fn print_report(report: &Report) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut stdout, report).context("writing JSON to stdout")?;
    writeln!(stdout).context("writing to stdout")?;
    Ok(())
}

/// Prints any value as pretty JSON on stdout.
pub(crate) fn print_json<T: Serialize>(value: &T) -> Result<()> {
    let mut stdout = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut stdout, value).context("writing JSON to stdout")?;
    writeln!(stdout).context("writing to stdout")?;
    Ok(())
}
