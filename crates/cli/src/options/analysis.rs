//! The configuration of the commands that read finished runs: `goodput compare`, `goodput
//! gate` and `goodput history`.

use std::path::PathBuf;

use goodput_core::decide::gate::{Condition, StepSelector};
use goodput_core::decide::history::GroupBy;
use goodput_core::decide::significance::Thresholds;

/// Output format of `goodput compare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CompareFormat {
    /// Aligned text for the terminal.
    Text,
    /// Markdown tables.
    Markdown,
    /// One self-contained HTML page.
    Html,
    /// JSON.
    Json,
}

/// Everything `goodput compare` runs with.
#[derive(Debug, Clone)]
pub(crate) struct CompareOptions {
    /// The baseline, then the candidates.
    pub(crate) runs: Vec<PathBuf>,
    /// `--format`.
    pub(crate) format: CompareFormat,
    /// `--output`: a file instead of stdout.
    pub(crate) output: Option<PathBuf>,
    /// `--html`: the runs overlaid on one page, besides.
    pub(crate) html: Option<PathBuf>,
    /// `--details`.
    pub(crate) details: bool,
    /// `--alpha` and `--min-effect`, checked.
    pub(crate) thresholds: Thresholds,
    /// `--fail-on-regression`.
    pub(crate) fail_on_regression: bool,
}

/// Everything `goodput gate` runs with.
#[derive(Debug, Clone)]
pub(crate) struct GateOptions {
    /// The report: a run directory or a report.json.
    pub(crate) report: PathBuf,
    /// `--criteria`: the criteria file.
    pub(crate) criteria: Option<PathBuf>,
    /// `--condition`s, parsed (added to the file's).
    pub(crate) conditions: Vec<Condition>,
    /// `--step` (overrides the file's).
    pub(crate) step: Option<StepSelector>,
}

/// Everything `goodput history` runs with.
#[derive(Debug, Clone)]
pub(crate) struct HistoryOptions {
    /// `--store`.
    pub(crate) store: crate::options::store::StoreSpec,
    /// `--metric`: the figure whose trend is shown.
    pub(crate) metric: Option<String>,
    /// `--by`: how the trend is grouped.
    pub(crate) by: GroupBy,
    /// `--tag` filters (KEY, VALUE).
    pub(crate) tags: Vec<(String, String)>,
    /// `--model` filter.
    pub(crate) model: Option<String>,
    /// `--last`.
    pub(crate) last: usize,
    /// `--add`: reports recorded first.
    pub(crate) add: Vec<PathBuf>,
}
