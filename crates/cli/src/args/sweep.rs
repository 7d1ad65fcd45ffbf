//! `goodput sweep` arguments — every `run` flag, plus the load levels to step through and the
//! knee threshold — and their conversion into [`SweepOptions`].

use anyhow::{Context, Result, bail};
use goodput_core::decide::sweep::{SweepDimension, SweepReport, parse_steps};

use crate::args::plan::parse_percent;
use crate::args::run::RunArgs;
use crate::options::sweep::SweepOptions;

/// Run one full measured step per load level.
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("sweep_steps").required(true))]
pub(crate) struct SweepArgs {
    #[command(flatten)]
    pub(crate) run: RunArgs,
    /// Closed-loop concurrency levels: a list (`1,2,4,8`) or a range (`1..256x2` doubles,
    /// `8..64+8` adds).
    #[arg(
        long,
        group = "sweep_steps",
        value_name = "STEPS",
        help_heading = "Sweep"
    )]
    pub(crate) concurrency_steps: Option<String>,
    /// Open-loop arrival rates, requests per second (same syntax).
    #[arg(
        long,
        group = "sweep_steps",
        value_name = "STEPS",
        help_heading = "Sweep"
    )]
    pub(crate) rate_steps: Option<String>,
    /// Prompts per request (completions API), at --concurrency (default 1).
    #[arg(
        long,
        group = "sweep_steps",
        value_name = "STEPS",
        help_heading = "Sweep"
    )]
    pub(crate) batch_steps: Option<String>,
    /// Throughput gain below which the next level is past the knee (while latency rises).
    #[arg(
        long,
        default_value = "10%",
        value_name = "PERCENT",
        help_heading = "Sweep"
    )]
    pub(crate) knee_gain: String,
    /// Measure every level N times: all levels once, then again (N rounds, so a server's slow
    /// drift spreads over every level; each step draws its arrivals from seed + its round and
    /// reads the prompts further along). `repeats.levels` gives each level's headline figures
    /// with their spread and 95 % confidence interval across its runs; the knee is found on
    /// the levels' means.
    #[arg(
        long,
        value_name = "N",
        help_heading = "Sweep",
        value_parser = clap::value_parser!(u32).range(1..=1000)
    )]
    pub(crate) repeats: Option<u32>,
}

impl SweepArgs {
    /// `goodput sweep`'s configuration: the steps first, then the run they share.
    pub(crate) fn into_options(self) -> Result<SweepOptions> {
        let (dimension, levels) = self.levels()?;
        let knee_min_gain = self.knee_gain()?;
        self.check(dimension)?;
        let repeats = self.repeats.filter(|n| *n > 1);
        if repeats.is_some() && self.run.sharding.shards.is_some() {
            bail!(
                "--repeats with --shards: each shard measures its part of one sweep; repeat the \
                 sharded sweep and its merge instead"
            );
        }
        let plan = SweepReport {
            dimension,
            loads: levels,
            repeats,
            knee_min_gain,
            knee: None,
        };
        let rate_given = self.run.rate.is_some();
        Ok(SweepOptions {
            run: self.run.into_options()?,
            plan,
            rate_given,
        })
    }

    /// Refuses what a sweep along `dimension` cannot honour.
    fn check(&self, dimension: SweepDimension) -> Result<()> {
        let run = &self.run;
        if dimension == SweepDimension::Batch && !run.api.batches() {
            bail!(
                "--batch-steps sends several inputs per request: add --api completions, \
                 embeddings, rerank, http or v2"
            );
        }
        if dimension == SweepDimension::Batch && run.tensors.tensor_file.is_some() {
            bail!("--batch-steps generates batches: --tensor-file requests carry their own");
        }
        if dimension == SweepDimension::Batch && run.batch_size.is_some() {
            bail!("--batch-steps sets the batch size of every step: drop --batch-size");
        }
        run.reporting.refuse_no_live("sweep")?;
        if run.workload.trace.is_some() {
            bail!("--trace replays the trace's own arrivals: it cannot be swept (use goodput run)");
        }
        Ok(())
    }

    /// What varies and its levels.
    fn levels(&self) -> Result<(SweepDimension, Vec<f64>)> {
        let (dimension, text, flag) =
            match (&self.concurrency_steps, &self.rate_steps, &self.batch_steps) {
                (Some(text), _, _) => (SweepDimension::Concurrency, text, "--concurrency-steps"),
                (None, Some(text), _) => (SweepDimension::Rate, text, "--rate-steps"),
                (None, None, Some(text)) => (SweepDimension::Batch, text, "--batch-steps"),
                (None, None, None) => {
                    bail!("give --concurrency-steps, --rate-steps or --batch-steps")
                }
            };
        if self.run.has_phases() {
            bail!("{flag} sets the load of every step: drop --phases / --profile");
        }
        let levels = parse_steps(text).with_context(|| flag.to_string())?;
        let integer = matches!(
            dimension,
            SweepDimension::Concurrency | SweepDimension::Batch
        );
        if integer && levels.iter().any(|l| l.fract() != 0.0) {
            bail!("{flag}: levels must be whole numbers");
        }
        if dimension != SweepDimension::Batch
            && (self.run.rate.is_some() || self.run.concurrency.is_some())
        {
            bail!("{flag} sets the load of every step; drop --rate / --concurrency");
        }
        self.check_shards(dimension, &levels)?;
        Ok((dimension, levels))
    }

    /// With `--shards N`: every step must have a known length (steps start on a shared clock)
    /// and leave each shard a worker.
    fn check_shards(&self, dimension: SweepDimension, levels: &[f64]) -> Result<()> {
        let Some(count) = self.run.sharding.shards.filter(|n| *n > 1) else {
            return Ok(());
        };
        if self.run.requests.is_some() && self.run.duration.is_none() {
            bail!(
                "--shards {count} with a sweep: give --duration (every shard starts step k at \
                 --start-at + k × (--duration + --request-timeout))"
            );
        }
        let fewest = match dimension {
            SweepDimension::Concurrency => levels.iter().copied().fold(f64::MAX, f64::min),
            SweepDimension::Batch if self.run.rate.is_none() => {
                f64::from(self.run.concurrency.unwrap_or(1))
            }
            _ => f64::MAX,
        };
        if fewest < f64::from(count) {
            bail!(
                "--shards {count}: a step of concurrency {fewest} leaves a shard without a worker"
            );
        }
        Ok(())
    }

    /// The knee threshold as a fraction.
    fn knee_gain(&self) -> Result<f64> {
        parse_percent("--knee-gain", &self.knee_gain)
    }
}
