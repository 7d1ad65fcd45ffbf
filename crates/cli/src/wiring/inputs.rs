//! Reading a finished run back: `report.json` from a run directory or a JSON file, and the
//! per-request latencies of `requests.jsonl` beside it when present.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use goodput_core::decide::compare::LatencySamples;
use goodput_core::runner::read_journal;
use serde_json::Value;

/// A report read from disk.
pub(crate) struct LoadedReport {
    /// The report as JSON (every section, known to this version or not).
    pub(crate) value: Value,
    /// The journal beside it, when there is one.
    pub(crate) journal: Option<PathBuf>,
    /// A short name for people (the directory or file name).
    pub(crate) label: String,
}

/// Reads `path`: a run directory (its `report.json`) or a report JSON file.
pub(crate) fn load_report(path: &Path) -> Result<LoadedReport> {
    let file = if path.is_dir() {
        path.join("report.json")
    } else {
        path.to_path_buf()
    };
    let text = std::fs::read_to_string(&file).with_context(|| {
        format!(
            "cannot read {} (give a run directory written with --out, or a report.json)",
            file.display()
        )
    })?;
    let value: Value =
        serde_json::from_str(&text).with_context(|| format!("{} is not JSON", file.display()))?;
    if value.get("steps").and_then(Value::as_array).is_none() || value.get("run").is_none() {
        bail!(
            "{} is not a goodput report (no `run` and `steps`)",
            file.display()
        );
    }
    let dir = file
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let journal = Some(dir.join("requests.jsonl")).filter(|j| j.is_file());
    let label = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    Ok(LoadedReport {
        value,
        journal,
        label,
    })
}

impl LoadedReport {
    /// Per-request latencies from the journal, when there is one.
    pub(crate) fn samples(&self) -> Result<Option<LatencySamples>> {
        let Some(journal) = &self.journal else {
            return Ok(None);
        };
        let contents =
            read_journal(journal).with_context(|| format!("reading {}", journal.display()))?;
        Ok(Some(LatencySamples::from_records(&contents.records)))
    }
}
