//! `goodput run`'s own arguments: the run's ([`RunArgs`], shared with sweep and capacity) and
//! `--repeats`.

use anyhow::{Result, bail};
use clap::Args;

use crate::args::run::RunArgs;
use crate::options::run::RunOptions;

/// `goodput run`.
#[derive(Debug, Args)]
pub(crate) struct RunCommandArgs {
    #[command(flatten)]
    pub(crate) run: RunArgs,
    /// Measure the same configuration N times, one run after the other (each drawing its
    /// arrivals from seed + its index and reading the prompts further along, so no run replays
    /// another's): every run is a step of the report, and `repeats` gives each headline
    /// figure's per-run values, mean, spread and 95 % confidence interval of the mean. `goodput
    /// compare` judges two repeated runs by Welch's t-test across their runs.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub(crate) repeats: Option<u32>,
}

impl RunCommandArgs {
    /// The run's plain configuration and how many times to measure it.
    pub(crate) fn into_options(self) -> Result<(RunOptions, u32)> {
        let repeats = self.repeats.unwrap_or(1);
        if repeats > 1 && self.run.sharding.shards.is_some() {
            bail!(
                "--repeats with --shards: each shard measures its part of one run; repeat the \
                 sharded run and its merge instead"
            );
        }
        Ok((self.run.into_options()?, repeats))
    }
}
