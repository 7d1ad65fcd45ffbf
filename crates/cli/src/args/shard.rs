//! `--shards`, `--shard-index` and `--start-at`: one process's part of a sharded run (see
//! `goodput_core::shard`), shared by `run`, `sweep` and `capacity`, turned into a checked
//! [`ShardPlan`].

use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, bail};
use goodput_core::config::{LoadSpec, RunConfig};
use goodput_core::shard::{Shard, ShardError, parse_start_at};

use crate::options::run::ShardPlan;

/// The environment variable a Kubernetes Indexed Job sets to each pod's index.
pub(crate) const INDEX_ENV: &str = "JOB_COMPLETION_INDEX";

/// The latest a process may reach `--start-at` and still run.
const MAX_LATE: Duration = Duration::from_secs(3600);

/// Sharding flags.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct ShardArgs {
    /// Split the run's one global schedule across N processes (machines); this process sends
    /// its part (see docs/distributed.md). Needs --shard-index (or JOB_COMPLETION_INDEX),
    /// --start-at, --seed and --out; merge the shards with `goodput merge`.
    #[arg(long, value_name = "N", help_heading = "Sharding")]
    pub(crate) shards: Option<u32>,
    /// This process's shard, 0..N (default: $JOB_COMPLETION_INDEX, as a Kubernetes Indexed
    /// Job sets it).
    #[arg(long, value_name = "K", requires = "shards", help_heading = "Sharding")]
    pub(crate) shard_index: Option<u32>,
    /// When every shard starts its schedule (an RFC 3339 UTC time, 2026-12-01T17:00:00Z, or
    /// Unix seconds); a shard that is late counts its schedule from it anyway and says so.
    #[arg(long, value_name = "TIME", help_heading = "Sharding")]
    pub(crate) start_at: Option<String>,
}

impl ShardArgs {
    /// The validated shard plan for a run whose seed was `seed_given` on the command line and
    /// that writes its journal with `--out` (`has_out`).
    pub(crate) fn plan(&self, seed_given: bool, has_out: bool) -> Result<ShardPlan> {
        let start_at = self.start_at.as_deref().map(parse_start_at).transpose()?;
        if let Some(ago) = start_at.and_then(|at| SystemTime::now().duration_since(at).ok())
            && ago > MAX_LATE
        {
            bail!(
                "--start-at: that was {:.0} minutes ago; every arrival of the run would be overdue",
                ago.as_secs_f64() / 60.0
            );
        }
        let Some(count) = self.shards else {
            return Ok(ShardPlan {
                shard: Shard::SINGLE,
                start_at,
            });
        };
        if count == 0 {
            return Err(ShardError::NoShards.into());
        }
        let index = match self.shard_index {
            Some(index) => index,
            None => index_from_env()?,
        };
        let shard = Shard::new(count, index)?;
        if shard.is_sharded() {
            if start_at.is_none() {
                bail!("--shards {count}: give --start-at (the same time to every shard)");
            }
            if !seed_given {
                bail!("--shards {count}: give --seed (the same seed to every shard)");
            }
            if !has_out {
                bail!("--shards {count}: give --out (the journal that `goodput merge` reads)");
            }
        }
        Ok(ShardPlan { shard, start_at })
    }
}

fn index_from_env() -> Result<u32> {
    let value = std::env::var(INDEX_ENV).with_context(|| {
        format!("--shards: give --shard-index, or run where {INDEX_ENV} is set (a Kubernetes Indexed Job)")
    })?;
    value
        .trim()
        .parse()
        .with_context(|| format!("{INDEX_ENV}={value}: not a shard index"))
}

/// Checks that `config`'s load leaves every shard of `plan` something to do.
pub(crate) fn check(plan: &ShardPlan, config: &RunConfig) -> Result<()> {
    let shard = plan.shard;
    match config.load {
        LoadSpec::Closed { concurrency } => shard.check_split("--concurrency", concurrency)?,
        LoadSpec::Open {
            max_concurrency: Some(cap),
            ..
        }
        | LoadSpec::Profile {
            max_concurrency: Some(cap),
            ..
        }
        | LoadSpec::Replay {
            max_concurrency: Some(cap),
        } => shard.check_split("--max-concurrency", cap)?,
        _ => {}
    }
    Ok(())
}
