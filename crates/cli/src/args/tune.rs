//! `goodput tune` arguments — every `capacity` flag (the search every configuration gets, or
//! with `--measure sweep` the run every level shares), the grid, the server template and its
//! lifecycle, and the virtual-time twin — and their conversion into [`TuneOptions`], with the
//! template's placeholders checked against the grid before anything starts.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use goodput_core::decide::sweep::{SweepDimension, SweepReport, parse_steps};
use goodput_core::report::tune::{TuneMeasure, TuneMode};
use goodput_core::units::parse_duration;

use crate::args::capacity::{CapacityArgs, SearchArgs};
use crate::args::plan::parse_percent;
use crate::args::slo::parse_slo;
use crate::args::tune_grid::{Grid, accelerators, check_placeholders, parse_grid, read_grid_file};
use crate::options::capacity::CapacityOptions;
use crate::options::run::TargetOptions;
use crate::options::tune::{Configuration, ServerOptions, Template, TuneOptions};

/// The URL the run's options are converted with in a live tune: each configuration replaces
/// it with its own.
const STAND_IN_TARGET: &str = "http://127.0.0.1:1/v1";

/// What each configuration gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub(crate) enum MeasureArg {
    /// A capacity search under --slo (the capacity search flags apply).
    #[default]
    Capacity,
    /// A load sweep (--concurrency-steps or --rate-steps).
    Sweep,
}

/// Find the server configuration that serves the most under the SLO per accelerator.
#[derive(Debug, clap::Args)]
pub(crate) struct TuneArgs {
    #[command(flatten)]
    pub(crate) capacity: CapacityArgs,
    #[command(flatten)]
    pub(crate) tune: TuneFlags,
}

/// The grid, the server's lifecycle, the measurement and the virtual twin.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Tune")]
pub(crate) struct TuneFlags {
    /// The server command template, run by `sh -c` in a process group of its own for each
    /// configuration: `{{name}}` is replaced by the configuration's value of grid key `name`,
    /// `{{port}}` by a free port (e.g. 'llama-server -m m.gguf -np {{np}} --port {{port}}').
    #[arg(long, value_name = "TEMPLATE")]
    pub(crate) server_cmd: Option<String>,
    /// The configurations: every combination of the values, e.g. 'np=1,4;batch=512,2048'.
    #[arg(long, value_name = "NAME=V1,V2;…", conflicts_with = "grid_file")]
    pub(crate) grid: Option<String>,
    /// The configurations from a TOML file: [[configuration]] tables (name optional), or a
    /// [grid] table of value lists.
    #[arg(long, value_name = "FILE")]
    pub(crate) grid_file: Option<PathBuf>,
    /// URL polled until it answers 2xx, the server then ready (may hold placeholders; default:
    /// the target's /health, then its /v1/models).
    #[arg(long, value_name = "URL")]
    pub(crate) ready_url: Option<String>,
    /// Longest a server may take to become ready; it is then stopped and its configuration
    /// marked failed.
    #[arg(long, default_value = "300s", value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) ready_timeout: Duration,
    /// How long a server has to exit after SIGTERM before its process group gets SIGKILL.
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = parse_duration)]
    pub(crate) stop_grace: Duration,
    /// URL POSTed before every step (e.g. vLLM's http://127.0.0.1:{{port}}/reset_prefix_cache,
    /// SGLang's /flush_cache), so a cache warmed by one step does not flatter the next; a
    /// failed reset fails the configuration.
    #[arg(long, value_name = "URL")]
    pub(crate) reset_url: Option<String>,
    /// What each configuration gets: a capacity search under --slo, or a load sweep.
    #[arg(long, value_enum, default_value_t)]
    pub(crate) measure: MeasureArg,
    /// --measure sweep: closed-loop concurrency levels (`1,2,4,8`, `1..64x2`).
    #[arg(long, value_name = "STEPS", conflicts_with = "rate_steps")]
    pub(crate) concurrency_steps: Option<String>,
    /// --measure sweep: open-loop arrival rates, requests per second (same syntax).
    #[arg(long, value_name = "STEPS")]
    pub(crate) rate_steps: Option<String>,
    /// Accelerators of each configuration, for the per-accelerator figures and cost: a
    /// number, a grid key whose values are numbers (`tp`), or a product (`tp*dp`); default
    /// --accelerators, else 1. In virtual time: each configuration's tp × replicas.
    #[arg(long, value_name = "N|KEY|KEY*KEY")]
    pub(crate) accelerators_per_config: Option<String>,
    /// --virtual-time with --server-cmd: measure the K best predicted configurations live
    /// (the grid's names substituted in the template) and print predicted against measured.
    #[arg(long, value_name = "K")]
    pub(crate) verify_top: Option<usize>,
    /// Continue the tune whose output directory this is: configurations its journal
    /// (tune.jsonl) finished are not measured again (the grid and plan must be the same).
    #[arg(long, value_name = "DIR")]
    pub(crate) resume: Option<PathBuf>,
}

impl TuneArgs {
    /// `goodput tune`'s configuration: the grid and templates checked first, then the
    /// measurement the configurations share.
    pub(crate) fn into_options(mut self) -> Result<TuneOptions> {
        let virtual_time = self.capacity.run.virtual_time;
        // In virtual time --time-scale is the clock of the servers --verify-top starts.
        let server_time_scale = match virtual_time && self.tune.verify_top.is_some() {
            true => self.capacity.run.time_scale.take(),
            false => self.capacity.run.time_scale,
        };
        self.refuse()?;
        let grid = self.grid()?;
        let mut server = self.server(&grid, virtual_time)?;
        if let Some(server) = server.as_mut() {
            server.time_scale = server_time_scale.unwrap_or(1.0);
        }
        if server.is_some() && !virtual_time {
            // Every configuration's target is its own (its template expanded, each checked
            // below); the run's options are converted with a stand-in.
            self.capacity.run.target = vec![STAND_IN_TARGET.to_string()];
        }
        let out = self.out()?;
        let measure = match self.tune.measure {
            MeasureArg::Capacity => TuneMeasure::Capacity,
            MeasureArg::Sweep => TuneMeasure::Sweep,
        };
        let sweep = self.sweep_plan()?;
        let verify_top = self.tune.verify_top.unwrap_or(0);
        let resume = self.tune.resume.is_some();
        let accelerators_spec = self.tune.accelerators_per_config.clone();
        let capacity = self.capacity_options(measure)?;
        let (configurations, basis) =
            configurations(&grid, &capacity, accelerators_spec.as_deref())?;
        Ok(TuneOptions {
            gpu_hour_cost: capacity.run.server_side.analysis.cost.gpu_hour_cost,
            capacity,
            sweep,
            measure,
            mode: if virtual_time {
                TuneMode::Virtual
            } else {
                TuneMode::Live
            },
            configurations,
            server,
            accelerators_basis: basis,
            verify_top,
            out,
            resume,
        })
    }

    /// The grid, from --grid or --grid-file.
    fn grid(&self) -> Result<Grid> {
        match (&self.tune.grid, &self.tune.grid_file) {
            (Some(text), _) => parse_grid(text),
            (None, Some(path)) => read_grid_file(path),
            (None, None) => bail!("goodput tune needs the configurations: --grid or --grid-file"),
        }
    }

    /// Refuses what a tune cannot honour: sharding, a gate, a store and exports of one report,
    /// the live view, and the flags of the other mode.
    fn refuse(&self) -> Result<()> {
        let run = &self.capacity.run;
        let reporting = &run.reporting;
        let exports = &reporting.exports;
        let refused = [
            ("--shards", run.sharding.shards.is_some()),
            ("--start-at", run.sharding.start_at.is_some()),
            ("--gate", reporting.gate.is_some()),
            ("--store", reporting.store.is_some()),
            ("--push-gateway", exports.push_gateway.is_some()),
            ("--llmd-report", exports.llmd_report.is_some()),
            ("--mlflow", exports.mlflow.is_some()),
            ("--mlflow-experiment", exports.mlflow_experiment.is_some()),
            ("--otlp", exports.otlp.is_some()),
            ("--max-error-rate", run.max_error_rate.is_some()),
        ];
        if let Some((flag, _)) = refused.iter().find(|(_, given)| *given) {
            bail!(
                "{flag} applies to one run's report; goodput tune writes one per configuration \
                 (configs/*/report.json): use it with goodput report, gate or run there"
            );
        }
        reporting.refuse_no_live("tune")?;
        let fleet = &run.fleet;
        let several = run.target.len() > 1 || fleet.targets_file.is_some();
        if several || fleet.route.is_some() || fleet.replica_header.is_some() {
            bail!(
                "--target (once), --targets, --route and --replica-header: each \
                 configuration's server is one target (give --target its URL template, with \
                 placeholders)"
            );
        }
        if run.virtual_time {
            self.refuse_live_only()
        } else {
            self.refuse_virtual_only()
        }
    }

    /// In virtual time: the server lifecycle flags only with --verify-top.
    fn refuse_live_only(&self) -> Result<()> {
        let tune = &self.tune;
        if self.capacity.run.server_side.metrics_interval != Duration::from_secs(1) {
            bail!("--metrics-interval applies to a live run; in virtual time nothing is scraped");
        }
        if tune.accelerators_per_config.is_some() {
            bail!(
                "--accelerators-per-config: in virtual time each configuration's accelerators are \
                 its tp × replicas"
            );
        }
        if tune.verify_top.is_some() != tune.server_cmd.is_some() {
            bail!(
                "--verify-top K and --server-cmd go together in virtual time: the K best \
                 predicted configurations are started from the template and measured live"
            );
        }
        if tune.verify_top == Some(0) {
            bail!("--verify-top: at least 1");
        }
        if tune.measure == MeasureArg::Sweep && tune.verify_top.is_some() {
            bail!("--verify-top compares capacities: drop --measure sweep");
        }
        let lifecycle = [
            ("--ready-url", tune.ready_url.is_some()),
            ("--reset-url", tune.reset_url.is_some()),
        ];
        match lifecycle.iter().find(|(_, given)| *given) {
            Some((flag, _)) if tune.server_cmd.is_none() => {
                bail!(
                    "{flag}: in virtual time no server is started (add --verify-top K --server-cmd)"
                )
            }
            _ => Ok(()),
        }
    }

    /// Live: the server template is needed, the simulator's flags are refused.
    fn refuse_virtual_only(&self) -> Result<()> {
        let run = &self.capacity.run;
        if self.tune.server_cmd.is_none() {
            bail!(
                "goodput tune starts each configuration's server from --server-cmd TEMPLATE (or \
                 simulates them: --virtual-time)"
            );
        }
        if self.tune.verify_top.is_some() {
            bail!("--verify-top measures the best predicted configurations: add --virtual-time");
        }
        let deploy = &run.sim_deploy;
        let simulator = [
            ("--sim-config", run.sim_config.is_some()),
            ("--sim-model", run.sim_model.is_some()),
            ("--sim-gpu", run.sim_gpu.is_some()),
            ("--sim-reasoning-tokens", run.sim_reasoning_tokens.is_some()),
            ("--sim-tool-calls", run.sim_tool_calls.is_some()),
            ("--sim-tp", deploy.sim_tp.is_some()),
            ("--sim-replicas", deploy.sim_replicas.is_some()),
            ("--sim-routing", deploy.sim_routing.is_some()),
            ("--sim-layout", deploy.sim_layout.is_some()),
            ("--sim-dtype", deploy.precision.sim_dtype.is_some()),
            ("--sim-kv-dtype", deploy.precision.sim_kv_dtype.is_some()),
            ("--sim-engine", deploy.precision.sim_engine.is_some()),
        ];
        if let Some((flag, _)) = simulator.iter().find(|(_, given)| *given) {
            bail!(
                "{flag} describes the simulator of --virtual-time; live, --server-cmd starts the \
                 servers"
            );
        }
        let server = &run.server_side;
        let described = server.model_spec.is_some() || server.gpu.is_some();
        let memory =
            server.gpu_memory_utilization != crate::args::server::DEFAULT_GPU_MEMORY_UTILIZATION;
        if !described && (server.tp.is_some() || memory) {
            bail!(
                "--tp and --gpu-memory-utilization describe the servers' hardware for the \
                 utilisation figures: add --model-spec and --gpu (the accelerators each \
                 configuration counts: --accelerators-per-config)"
            );
        }
        Ok(())
    }

    /// The server's templates, checked against the grid (live, or --verify-top).
    fn server(&self, grid: &Grid, virtual_time: bool) -> Result<Option<ServerOptions>> {
        let tune = &self.tune;
        let Some(command) = &tune.server_cmd else {
            return Ok(None);
        };
        let command = Template::parse(command).map_err(|e| anyhow::anyhow!("--server-cmd: {e}"))?;
        let target = match self.capacity.run.target.first() {
            Some(url) => Template::parse(url).map_err(|e| anyhow::anyhow!("--target: {e}"))?,
            None if command.placeholders().contains(&crate::options::tune::PORT) => {
                Template::parse("http://127.0.0.1:{{port}}/v1").map_err(anyhow::Error::msg)?
            }
            None => bail!(
                "--server-cmd has no {{{{port}}}}: give --target with the URL its servers listen \
                 on (it may hold placeholders)"
            ),
        };
        let optional = |flag: &str, text: &Option<String>| {
            text.as_deref()
                .map(Template::parse)
                .transpose()
                .map_err(|e| anyhow::anyhow!("{flag}: {e}"))
        };
        let ready_url = optional("--ready-url", &tune.ready_url)?;
        let reset_url = optional("--reset-url", &tune.reset_url)?;
        let mut templates = vec![("--server-cmd", &command), ("--target", &target)];
        templates.extend(ready_url.iter().map(|t| ("--ready-url", t)));
        templates.extend(reset_url.iter().map(|t| ("--reset-url", t)));
        if !virtual_time || tune.verify_top.is_some() {
            check_placeholders(grid, &templates)?;
            let mut urls = vec![("--target", &target)];
            urls.extend(ready_url.iter().map(|t| ("--ready-url", t)));
            urls.extend(reset_url.iter().map(|t| ("--reset-url", t)));
            check_urls(grid, &urls)?;
        }
        Ok(Some(ServerOptions {
            command,
            target,
            ready_url,
            ready_timeout: tune.ready_timeout,
            stop_grace: tune.stop_grace,
            reset_url,
            time_scale: self.capacity.run.time_scale.unwrap_or(1.0),
        }))
    }

    /// The output directory: --out, or --resume's; a journal already there needs --resume.
    fn out(&self) -> Result<PathBuf> {
        let out = match (&self.capacity.run.out, &self.tune.resume) {
            (Some(out), Some(resume)) if !same_dir(out, resume) => {
                bail!(
                    "--resume {} and --out {}: one directory",
                    resume.display(),
                    out.display()
                )
            }
            (_, Some(resume)) => resume.clone(),
            (Some(out), None) => out.clone(),
            (None, None) => bail!(
                "goodput tune keeps each configuration's run, its server's log and a journal: \
                 give --out DIR"
            ),
        };
        let journal = out.join("tune.jsonl");
        if self.tune.resume.is_none() && journal.metadata().is_ok_and(|m| m.len() > 0) {
            bail!(
                "--out {}: it holds a tune's journal; continue it with --resume {0}, or choose \
                 another directory",
                out.display()
            );
        }
        if self.tune.resume.is_some() && !out.join("tune.json").exists() {
            bail!(
                "--resume {}: no tune.json there (not a tune's directory)",
                out.display()
            );
        }
        Ok(out)
    }

    /// `--measure sweep`'s levels (`None` for a capacity search, which refuses level flags).
    fn sweep_plan(&self) -> Result<Option<SweepReport>> {
        let tune = &self.tune;
        let (dimension, text, flag) = match (&tune.concurrency_steps, &tune.rate_steps) {
            (Some(text), _) => (SweepDimension::Concurrency, text, "--concurrency-steps"),
            (None, Some(text)) => (SweepDimension::Rate, text, "--rate-steps"),
            (None, None) if tune.measure == MeasureArg::Sweep => {
                bail!("--measure sweep: give --concurrency-steps or --rate-steps")
            }
            (None, None) => return Ok(None),
        };
        if tune.measure != MeasureArg::Sweep {
            bail!("{flag} gives a sweep's levels: add --measure sweep");
        }
        let levels = parse_steps(text).with_context(|| flag.to_string())?;
        if dimension == SweepDimension::Concurrency && levels.iter().any(|l| l.fract() != 0.0) {
            bail!("{flag}: levels must be whole numbers");
        }
        let repeats = self.capacity.repeats.filter(|n| *n > 1);
        Ok(Some(SweepReport {
            dimension,
            loads: levels,
            repeats,
            knee_min_gain: parse_percent("--knee-gain", "10%")?,
            knee: None,
        }))
    }

    /// The measurement every configuration shares: capacity's options (a sweep keeps the run's
    /// length flags and refuses the search's).
    fn capacity_options(self, measure: TuneMeasure) -> Result<CapacityOptions> {
        if measure == TuneMeasure::Capacity {
            return self.capacity.into_options();
        }
        let CapacityArgs {
            run,
            search,
            budget,
            repeats,
        } = self.capacity;
        let defaults = SearchArgs::defaults()?;
        let attainment_only = SearchArgs {
            attainment: defaults.attainment,
            ..search.clone()
        };
        if attainment_only != defaults || budget.is_some() {
            bail!(
                "--measure sweep: the capacity search flags do not apply (but --attainment, the \
                 share of requests a level must serve within --slo)"
            );
        }
        if run.rate.is_some() || run.concurrency.is_some() || run.has_phases() {
            bail!("--measure sweep sets each level's load: drop --rate, --concurrency, --phases");
        }
        if run.workload.trace.is_some() {
            bail!("--trace replays the trace's own arrivals: it cannot be swept");
        }
        let slo = parse_slo(run.slo_text())?
            .context("--slo none: a tune judges every configuration under latency targets")?;
        Ok(CapacityOptions {
            search: search.options(slo.clone())?,
            run: run.options(Some(Some(slo)))?,
            budget: None,
            repeats: repeats.unwrap_or(1),
        })
    }
}

/// Checks that every configuration's expansion of each URL template (with a port) is a URL.
fn check_urls(grid: &Grid, templates: &[(&str, &Template)]) -> Result<()> {
    for (name, values) in &grid.configurations {
        let mut values: std::collections::BTreeMap<String, String> =
            values.iter().cloned().collect();
        values.insert(crate::options::tune::PORT.to_string(), "8000".to_string());
        for (flag, template) in templates {
            let url = template.expand(&values);
            goodput_core::http::Target::parse(&url)
                .with_context(|| format!("{flag} of configuration `{name}`: {url}"))?;
        }
    }
    Ok(())
}

/// Whether two paths name one directory.
fn same_dir(a: &Path, b: &Path) -> bool {
    a == b
        || a.canonicalize()
            .ok()
            .is_some_and(|a| b.canonicalize().ok() == Some(a))
}

/// The configurations of `grid`: live, their accelerators from `spec`; in virtual time, each
/// one's simulator (the base with its knobs) and its tp × replicas.
fn configurations(
    grid: &Grid,
    capacity: &CapacityOptions,
    spec: Option<&str>,
) -> Result<(Vec<Configuration>, String)> {
    let base = match &capacity.run.target {
        TargetOptions::Embedded(base) if capacity.run.virtual_time => base,
        _ => {
            let fallback = capacity.run.server_side.accelerators;
            let (counts, basis) = accelerators(spec, fallback, grid)?;
            let configurations = grid
                .configurations
                .iter()
                .zip(counts)
                .map(|((name, values), accelerators)| Configuration {
                    name: name.clone(),
                    values: values.clone(),
                    accelerators,
                    simulator: None,
                })
                .collect();
            return Ok((configurations, basis));
        }
    };
    super::tune_knobs::check(&grid.keys, &grid.configurations, base)?;
    let configurations = grid
        .configurations
        .iter()
        .map(|(name, values)| {
            let simulator = super::tune_knobs::simulator(base, values);
            Configuration {
                name: name.clone(),
                values: values.clone(),
                accelerators: simulator
                    .as_ref()
                    .map_or(1, super::tune_knobs::accelerators),
                simulator: Some(simulator),
            }
        })
        .collect();
    Ok((
        configurations,
        "tp × replicas of each simulated configuration".to_string(),
    ))
}
