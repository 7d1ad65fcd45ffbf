//! The configuration of the commands that rebuild a report from journals: `goodput report`
//! (one run) and `goodput merge` (the shards of one run).

use std::path::PathBuf;

use goodput_core::metrics::Slo;

use super::run::SummaryFormat;

/// Everything `goodput report` runs with.
#[derive(Debug, Clone)]
pub(crate) struct ReportOptions {
    /// The journal or the run's output directory.
    pub(crate) journal: PathBuf,
    /// `--slo`: the SLO replacing the recorded one (`Some(None)`: `none`, dropped).
    pub(crate) slo: Option<Option<Slo>>,
    /// `--out`: where `report.json` and the exports go.
    pub(crate) out: Option<PathBuf>,
    /// The summary on stdout (`--format`, `--json`).
    pub(crate) summary: SummaryFormat,
    /// `--details`.
    pub(crate) details: bool,
    /// `--store`.
    pub(crate) store: Option<crate::options::store::StoreSpec>,
    /// The exports to other tools.
    pub(crate) exports: crate::options::run::ExportOptions,
}

/// Everything `goodput merge` runs with.
#[derive(Debug, Clone)]
pub(crate) struct MergeOptions {
    /// The shards' output directories.
    pub(crate) dirs: Vec<PathBuf>,
    /// `--out`: the merged run's directory.
    pub(crate) out: PathBuf,
    /// `--slo`: the SLO replacing the recorded one (`Some(None)`: `none`, dropped).
    pub(crate) slo: Option<Option<Slo>>,
    /// `--json`.
    pub(crate) json: bool,
}
