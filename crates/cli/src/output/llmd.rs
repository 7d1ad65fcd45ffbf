//! `--llmd-report FILE`: the run as llm-d benchmark reports (the mapping is
//! `goodput_core::export::llmd`), one JSON file per step: FILE itself for a run of one step,
//! FILE's name with `-step<i>` before its extension otherwise.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use goodput_core::export::llmd;
use goodput_core::report::Report;

/// Writes the llm-d report of every step; returns the files written.
pub(crate) fn write(path: &Path, report: &Report) -> Result<Vec<String>> {
    let mut written = Vec::new();
    for (index, step) in report.steps.iter().enumerate() {
        let value = llmd::step_report(report, index, step)?;
        let file = step_path(path, index, report.steps.len());
        let text = serde_json::to_string_pretty(&value).context("serializing the llm-d report")?;
        std::fs::write(&file, text + "\n")
            .with_context(|| format!("writing {}", file.display()))?;
        written.push(file.display().to_string());
    }
    Ok(written)
}

/// The file of step `index` of `steps`.
pub(crate) fn step_path(path: &Path, index: usize, steps: usize) -> PathBuf {
    if steps <= 1 {
        return path.to_path_buf();
    }
    let stem = path
        .file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    let name = match path.extension() {
        Some(ext) => format!("{stem}-step{index}.{}", ext.to_string_lossy()),
        None => format!("{stem}-step{index}"),
    };
    path.with_file_name(name)
}
