//! `goodput report` arguments and their conversion into [`ReportOptions`].

use std::path::PathBuf;

use anyhow::Result;

use crate::args::reporting::{SummaryFormatArg, summary_format};
use crate::args::slo::parse_slo;
use crate::options::report::ReportOptions;
use crate::options::store::StoreSpec;

/// Arguments of `goodput report`.
#[derive(Debug, clap::Args)]
pub(crate) struct ReportArgs {
    /// The journal (`requests.jsonl`) or the run's output directory.
    pub(crate) journal: PathBuf,
    /// Override the SLO recorded with the run (`none` to drop it).
    #[arg(long)]
    pub(crate) slo: Option<String>,
    /// Write `report.json` into this directory (default: print only).
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// Print the report as JSON instead of the summary table (= --format json).
    #[arg(long)]
    pub(crate) json: bool,
    /// What is printed on stdout: the terminal summary, the report as JSON, or Markdown tables.
    #[arg(long, value_enum, default_value_t)]
    pub(crate) format: SummaryFormatArg,
    /// Terminal summary: also show the sections beyond the first screen (see `goodput run
    /// --help`).
    #[arg(long)]
    pub(crate) details: bool,
    /// Record the rebuilt report in this history store (a SQLite file or a postgres:// URL).
    #[arg(long, value_name = "DB")]
    pub(crate) store: Option<PathBuf>,
    /// Exports of the rebuilt report to other tools (pushing a run again replaces its group).
    #[command(flatten)]
    pub(crate) exports: crate::args::reporting::ExportArgs,
}

impl ReportArgs {
    /// `goodput report`'s configuration.
    pub(crate) fn into_options(self) -> Result<ReportOptions> {
        let summary = summary_format(self.json, self.format, self.details)?;
        let slo = self.slo.as_deref().map(parse_slo).transpose()?;
        Ok(ReportOptions {
            journal: self.journal,
            slo,
            out: self.out,
            summary,
            details: self.details,
            store: self.store.map(StoreSpec::from_path),
            exports: self.exports.exports()?,
        })
    }
}
