//! `goodput merge` arguments and their conversion into [`MergeOptions`].

use std::path::PathBuf;

use anyhow::Result;

use crate::args::slo::parse_slo;
use crate::options::report::MergeOptions;

/// Merge the shards of a sharded run (`--shards`) into one report.
#[derive(Debug, clap::Args)]
pub(crate) struct MergeArgs {
    /// The shards' output directories (each with run.json and requests.jsonl).
    #[arg(required = true, value_name = "DIR")]
    pub(crate) dirs: Vec<PathBuf>,
    /// Write the merged run here: run.json, requests.jsonl (the union of the journals),
    /// report.json and the exports.
    #[arg(long, value_name = "DIR")]
    pub(crate) out: PathBuf,
    /// Override the SLO recorded with the run (`none` to drop it).
    #[arg(long)]
    pub(crate) slo: Option<String>,
    /// Print the report as JSON instead of the summary table.
    #[arg(long)]
    pub(crate) json: bool,
}

impl MergeArgs {
    /// `goodput merge`'s configuration.
    pub(crate) fn into_options(self) -> Result<MergeOptions> {
        let slo = self.slo.as_deref().map(parse_slo).transpose()?;
        Ok(MergeOptions {
            dirs: self.dirs,
            out: self.out,
            slo,
            json: self.json,
        })
    }
}
