//! `goodput calibrate` arguments and their conversion into [`CalibrateOptions`]: the server,
//! the probing budget, and where the fitted simulator configuration goes (or which one to
//! check, with the SLO and search flags of the check's capacity comparison).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use goodput_core::http::Target;
use goodput_core::metrics::Slo;
use goodput_core::units::parse_duration;

use crate::args::capacity::SearchArgs;
use crate::args::slo::parse_slo;
use crate::options::calibrate::CalibrateOptions;

/// Fit the simulator to a real server, or check a fitted configuration against it.
#[derive(Debug, clap::Args)]
pub(crate) struct CalibrateArgs {
    /// The server's OpenAI-compatible base URL, e.g. http://localhost:8080/v1.
    #[arg(long, value_name = "URL")]
    pub(crate) target: String,
    /// Most time spent probing; probes that would start after it are skipped (the fit then
    /// says whether what was measured suffices); with --check --slo the capacity searches
    /// share what is left and stop scheduling at it.
    #[arg(long, default_value = "5m", value_parser = parse_duration)]
    pub(crate) budget: Duration,
    /// Where the fitted simulator configuration (TOML) is written.
    #[arg(
        long,
        value_name = "FILE",
        default_value = "calibrated.toml",
        conflicts_with = "check"
    )]
    pub(crate) out: PathBuf,
    /// Instead of fitting: replay a held-out workload on the server and in virtual time with
    /// this configuration, and print predicted against measured.
    #[arg(long, value_name = "FILE")]
    pub(crate) check: Option<PathBuf>,
    /// With --check: also write the configuration at the server's speed now — every engine
    /// cost scaled by how much faster or slower the server runs the calibration's probe than
    /// at calibration (the check's speed reference) — for runs that should start from the
    /// server as it is now.
    #[arg(long, value_name = "FILE")]
    pub(crate) rescaled: Option<PathBuf>,
    /// Seed of the probes' prompts (default: a fresh one each run, so a server that caches
    /// prompts never answers a probe from an earlier run's cache).
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// Requests of each probe shape per client (a concurrency-c probe sends c times as many):
    /// more give steadier medians and a longer profile. Probes beyond the slots send at least
    /// two per client (with one, half their requests never queue).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub(crate) repeats: u32,
    /// Times the probes are measured, one whole pass after the other with fresh prompts (with
    /// --check: the speed reference and the held-out shapes): each probe's figures are the
    /// median over its passes, and how much a pass differs from the next (the server's own
    /// repeatability) is reported beside the fit's error and tells noise from a misfit. The
    /// budget may end the last pass early.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=10))]
    pub(crate) passes: u32,
    /// Print the fit (or the check) as JSON instead of tables.
    #[arg(long)]
    pub(crate) json: bool,
    /// With --check: latency targets (as `goodput capacity --slo`, e.g. e2e=2s) under which
    /// the capacity of the held-out shapes that fill the slots (each request's lengths within
    /// ±25 % of the shape's) is searched on the server and on the configuration in virtual
    /// time, and compared; without it (or `none`) capacity is not searched.
    #[arg(long)]
    pub(crate) slo: Option<String>,
    /// How the check's capacity searches probe and judge (as `goodput capacity`'s).
    #[command(flatten)]
    pub(crate) search: SearchArgs,
}

impl CalibrateArgs {
    /// `goodput calibrate`'s configuration.
    pub(crate) fn into_options(self) -> Result<CalibrateOptions> {
        let capacity = self
            .slo()?
            .map(|slo| self.search.options(slo))
            .transpose()?;
        let target =
            Target::parse(&self.target).with_context(|| format!("--target {}", self.target))?;
        Ok(CalibrateOptions {
            target_url: self.target,
            target,
            budget: self.budget,
            out: self.out,
            check: self.check,
            rescaled: self.rescaled,
            seed: self.seed,
            repeats: self.repeats,
            passes: self.passes,
            json: self.json,
            capacity,
        })
    }

    /// The check's SLO (`None`: capacity is not searched); refuses capacity-search flags
    /// where no capacity is searched, and `--rescaled` without a check.
    fn slo(&self) -> Result<Option<Slo>> {
        if let (Some(_), None) = (&self.rescaled, &self.check) {
            bail!(
                "--rescaled: the configuration at the server's speed is written by a check: give --check FILE"
            );
        }
        let slo = match (&self.slo, &self.check) {
            (Some(_), None) => bail!("--slo: capacity is searched in a check: give --check FILE"),
            (Some(text), Some(_)) => parse_slo(text)?,
            (None, _) => None,
        };
        if slo.is_none() && self.search != SearchArgs::defaults()? {
            bail!(
                "the capacity search flags (--dimension, --start, --tolerance, --attainment, …) \
                 shape --check's capacity search: give --check and --slo"
            );
        }
        Ok(slo)
    }
}
