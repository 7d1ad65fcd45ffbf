//! `goodput capacity` arguments — every `run` flag, plus the search (dimension, start, bounds,
//! tolerance), the attainment target and confidence, and the probe shape — and their
//! conversion into [`CapacityOptions`].

use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use goodput_core::decide::capacity::early_stopping::probe_requests;
use goodput_core::decide::capacity::{Criteria, Dimension};
use goodput_core::metrics::Slo;
use goodput_core::units::parse_duration;

use crate::args::plan::parse_percent;
use crate::args::run::RunArgs;
use crate::args::slo::parse_slo;
use crate::options::capacity::{CapacityOptions, SearchOptions};

/// What to search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub(crate) enum DimensionArg {
    /// The open-loop arrival rate (requests per second).
    #[default]
    Rate,
    /// The closed-loop concurrency.
    Concurrency,
}

/// Find the highest load at which the queue stays stable and the SLO holds.
#[derive(Debug, clap::Args)]
pub(crate) struct CapacityArgs {
    #[command(flatten)]
    pub(crate) run: RunArgs,
    #[command(flatten)]
    pub(crate) search: SearchArgs,
    /// Most target time the whole search may spend probing, e.g. 30m (default: no limit). A
    /// probe in flight schedules no request past it (those in flight finish); a new probe is
    /// not started in less of it than the last run took, nor an undecided one extended when
    /// twice as long would not fit; the report says which loads stayed undecided.
    #[arg(long, value_parser = parse_duration, help_heading = "Capacity search")]
    pub(crate) budget: Option<Duration>,
    /// Run N independent searches, one after the other (search i draws every probe's arrivals
    /// from seed + i and reads the prompts further along; each calibrates its own start and
    /// has its own --budget): `repeats.capacity` gives each search's capacity and their mean,
    /// spread and 95 % confidence interval ("9.5 ± 0.4 req/s across 5 searches"); `capacity`
    /// is the first search's.
    #[arg(
        long,
        value_name = "N",
        help_heading = "Capacity search",
        value_parser = clap::value_parser!(u32).range(1..=1000)
    )]
    pub(crate) repeats: Option<u32>,
}

/// How a capacity search probes and judges (shared by `goodput capacity` and
/// `goodput calibrate --check`).
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub(crate) struct SearchArgs {
    /// What to search.
    #[arg(long, value_enum, default_value_t, help_heading = "Capacity search")]
    pub(crate) dimension: DimensionArg,
    /// First load probed (default: 95 % of the throughput of a short closed-loop calibration).
    #[arg(long, value_name = "LOAD", help_heading = "Capacity search")]
    pub(crate) start: Option<f64>,
    /// Lowest load worth probing.
    #[arg(
        long,
        default_value_t = 0.1,
        value_name = "LOAD",
        help_heading = "Capacity search"
    )]
    pub(crate) min_load: f64,
    /// Highest load probed.
    #[arg(
        long,
        default_value_t = 100_000.0,
        value_name = "LOAD",
        help_heading = "Capacity search"
    )]
    pub(crate) max_load: f64,
    /// Stop when the bracket is this narrow, relative to its lower end.
    #[arg(
        long,
        default_value = "5%",
        value_name = "PERCENT",
        help_heading = "Capacity search"
    )]
    pub(crate) tolerance: String,
    /// Most probes.
    #[arg(long, default_value_t = 20, help_heading = "Capacity search")]
    pub(crate) max_probes: usize,
    /// Fraction of requests that must meet every per-request threshold of --slo.
    #[arg(long, default_value_t = 0.99, help_heading = "Capacity search")]
    pub(crate) attainment: f64,
    /// Confidence of every probe verdict.
    #[arg(long, default_value_t = 0.99, help_heading = "Capacity search")]
    pub(crate) confidence: f64,
    /// Measured requests per probe (default: enough to prove a miss rate of half the budget).
    #[arg(long, help_heading = "Capacity search")]
    pub(crate) probe_requests: Option<u64>,
    /// Warmup before each rate probe (at least 20 requests); a concurrency probe warms up with
    /// two requests per client instead.
    #[arg(long, default_value = "10s", value_parser = parse_duration, help_heading = "Capacity search")]
    pub(crate) probe_warmup: Duration,
    /// Shortest measurement of a rate probe, so the stability test can see a trend.
    #[arg(long, default_value = "30s", value_parser = parse_duration, help_heading = "Capacity search")]
    pub(crate) probe_min_duration: Duration,
    /// Longest a probe may run.
    #[arg(long, default_value = "10m", value_parser = parse_duration, help_heading = "Capacity search")]
    pub(crate) max_probe_duration: Duration,
}

impl SearchArgs {
    /// The search settings judging `slo`: the flags checked, the measured requests per probe
    /// settled.
    pub(crate) fn options(&self, slo: Slo) -> Result<SearchOptions> {
        let tolerance = self.validate()?;
        self.settle(tolerance, self.criteria(slo))
    }

    /// `slo` at --attainment and --confidence.
    fn criteria(&self, slo: Slo) -> Criteria {
        Criteria {
            slo,
            attainment: self.attainment,
            confidence: self.confidence,
        }
    }

    /// The checked settings with `tolerance` (from [`SearchArgs::validate`]) and `criteria`.
    fn settle(&self, tolerance: f64, criteria: Criteria) -> Result<SearchOptions> {
        let measured_requests = self.measured_requests(&criteria)?;
        Ok(SearchOptions {
            dimension: match self.dimension {
                DimensionArg::Rate => Dimension::Rate,
                DimensionArg::Concurrency => Dimension::Concurrency,
            },
            start: self.start,
            min_load: self.min_load,
            max_load: self.max_load,
            tolerance,
            max_probes: self.max_probes,
            criteria,
            measured_requests,
            probe_warmup: self.probe_warmup,
            probe_min_duration: self.probe_min_duration,
            max_probe_duration: self.max_probe_duration,
        })
    }

    /// Checks the search flags; returns the tolerance as a fraction.
    fn validate(&self) -> Result<f64> {
        let tolerance = parse_percent("--tolerance", &self.tolerance)?;
        if !(tolerance > 0.0 && tolerance < 1.0) {
            bail!("--tolerance: between 0% and 100%, e.g. 5%");
        }
        for (flag, value) in [
            ("--attainment", self.attainment),
            ("--confidence", self.confidence),
        ] {
            if !(value > 0.0 && value < 1.0) {
                bail!("{flag}: a fraction between 0 and 1, e.g. 0.99");
            }
        }
        if !(self.min_load > 0.0 && self.max_load > self.min_load) {
            bail!("--min-load / --max-load: 0 < min < max");
        }
        if self
            .start
            .is_some_and(|s| !(s >= self.min_load && s <= self.max_load))
        {
            bail!("--start: between --min-load and --max-load");
        }
        if self.max_probes == 0 {
            bail!("--max-probes: at least 1");
        }
        Ok(tolerance)
    }

    /// Measured requests per probe: --probe-requests, or enough to prove a miss rate of half
    /// the budget under `criteria`.
    fn measured_requests(&self, criteria: &Criteria) -> Result<u64> {
        let measured = self
            .probe_requests
            .unwrap_or_else(|| probe_requests(criteria.attainment, criteria.confidence));
        if measured == 0 {
            bail!("--probe-requests: at least 1");
        }
        Ok(measured)
    }

    /// The flags' defaults (what `--help` shows).
    pub(crate) fn defaults() -> Result<SearchArgs> {
        use clap::{Args, FromArgMatches};
        let command = SearchArgs::augment_args(clap::Command::new("defaults"));
        let matches = command.try_get_matches_from(["defaults"])?;
        Ok(SearchArgs::from_arg_matches(&matches)?)
    }
}

impl CapacityArgs {
    /// `goodput capacity`'s configuration: the search flags, the run flags the search leaves
    /// (checked in that order), the SLO parsed once for the criteria and every probe.
    pub(crate) fn into_options(self) -> Result<CapacityOptions> {
        let tolerance = self.search.validate()?;
        self.refuse_run_flags()?;
        self.check_shards()?;
        let slo = parse_slo(self.run.slo_text())?.context(
            "--slo none: a capacity search needs latency targets, e.g. --slo ttft=500ms,tpot=50ms",
        )?;
        let search = self
            .search
            .settle(tolerance, self.search.criteria(slo.clone()))?;
        if self.run.workload.trace.is_some() {
            bail!("--trace replays the trace's own arrivals: a capacity search sets its own load");
        }
        Ok(CapacityOptions {
            run: self.run.options(Some(Some(slo)))?,
            search,
            budget: self.budget,
            repeats: self.repeats.unwrap_or(1),
        })
    }

    /// Refuses the run flags the search sets itself, and `--no-live`.
    fn refuse_run_flags(&self) -> Result<()> {
        let run = &self.run;
        if run.rate.is_some()
            || run.concurrency.is_some()
            || run.requests.is_some()
            || run.duration.is_some()
            || run.has_phases()
        {
            bail!(
                "the search sets each probe's load and length: drop --rate, --concurrency, --phases, --profile, --requests and --duration"
            );
        }
        run.reporting.refuse_no_live("capacity")
    }

    /// Refuses a sharded capacity search whose probes could leave a shard idle.
    fn check_shards(&self) -> Result<()> {
        let Some(count) = self.run.sharding.shards.filter(|n| *n > 1) else {
            return Ok(());
        };
        if self.repeats.is_some_and(|n| n > 1) {
            bail!(
                "--repeats with --shards: the shards search together, one probe at a time; \
                 repeat the sharded search and its merge instead"
            );
        }
        if self.run.virtual_time {
            bail!("--virtual-time runs the whole search in this process: drop --shards");
        }
        let search = &self.search;
        if search.dimension == DimensionArg::Concurrency && search.min_load < f64::from(count) {
            bail!(
                "--dimension concurrency with --shards {count}: set --min-load to at least {count} \
                 (every shard needs a worker)"
            );
        }
        Ok(())
    }
}
