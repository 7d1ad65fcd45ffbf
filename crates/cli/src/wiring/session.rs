//! A measurement session: everything `run`, `sweep` and `capacity` share — the target (or the
//! embedded simulator), the backend, the workload, the run's metadata, the journal and
//! manifest, Ctrl-C handling — and the steps run within it, then the report, its exports and
//! the exit status.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result};
use goodput_core::assemble::{ReportInputs, assemble};
use goodput_core::backend::discovery::list_models;
use goodput_core::backend::{Backend, RequestIds};
use goodput_core::config::{LoadSpec, RunConfig};
use goodput_core::decide::capacity::watch::{ProbeSink, Stopping};
use goodput_core::http::{HttpClient, Target};
use goodput_core::manifest::{RunManifest, redact_command_line, redact_url};
use goodput_core::metrics::{StepAggregator, aggregate::Compliance};
use goodput_core::observe::overhead::ClientOverhead;
use goodput_core::report::{LoadReport, Report, RunInfo, StepReport, ToolInfo, Warning};
use goodput_core::runner::{EndReason, JournalWriter, RecordSink, RunMonitor, RunOutcome, Runner};
use goodput_core::tokens::TokenCounter;
use goodput_core::units::rfc3339;
use goodput_core::workload::{Workload, step::for_step};
use tokio_util::sync::CancellationToken;

use crate::exit::{EXIT_INTERRUPTED, EXIT_OK, EXIT_RUN_FAILED};
use crate::options::run::{OutputOptions, RunOptions, TargetOptions};
use crate::output;
use crate::wiring::gate::Criteria as GateCriteria;
use crate::wiring::server_side::ServerSide;
use crate::wiring::sharded::ShardState;
use crate::wiring::workload::{self, BuiltWorkload};

pub(crate) use super::signals::{cancel_on_signal, wait_for_signal};

/// The target of a run: a URL, or the embedded simulator serving on loopback.
pub(crate) struct Endpoint {
    pub(crate) url: String,
    /// Target-time seconds per real second.
    pub(crate) time_scale: f64,
    pub(crate) label: String,
    pub(crate) model: Option<String>,
    pub(crate) simulator: Option<goodput_sim::RunningSim>,
}

impl Endpoint {
    /// The embedded simulator driven in virtual time (no URL, no clock), described by `label`.
    pub(crate) fn virtual_time(label: String) -> Endpoint {
        Endpoint {
            url: String::new(),
            time_scale: 1.0,
            label,
            model: None,
            simulator: None,
        }
    }
}

/// What `run`, `sweep` and `capacity` share.
pub(crate) struct Session {
    /// The run's configuration, as the command line gave it.
    pub(crate) options: RunOptions,
    /// Seed of every random choice.
    pub(crate) seed: u64,
    /// The base run configuration (load, stop, warmup, timeouts, SLO, time scale).
    pub(crate) config: RunConfig,
    /// The `--gate` criteria, loaded before the run.
    pub(crate) gate: Option<GateCriteria>,
    /// The target.
    pub(crate) endpoint: Endpoint,
    /// Models the target lists.
    pub(crate) served_models: Vec<String>,
    /// The backend.
    pub(crate) backend: Arc<dyn Backend>,
    /// What to send.
    pub(crate) built: BuiltWorkload,
    /// Fallback token counting.
    pub(crate) counter: Arc<dyn TokenCounter>,
    /// Whether answers are streamed.
    pub(crate) streamed: bool,
    /// The run's metadata.
    pub(crate) run_info: RunInfo,
    /// `requests.jsonl`, with `--out`.
    pub(crate) journal: Option<JournalWriter>,
    /// The load of every step started so far (recorded in `run.json`).
    pub(crate) step_loads: Vec<LoadSpec>,
    /// A sweep's plan (recorded in `run.json`).
    pub(crate) sweep_plan: Option<goodput_core::decide::sweep::SweepReport>,
    /// A capacity search's plan (recorded in `run.json`).
    pub(crate) capacity_plan: Option<goodput_core::decide::capacity::CapacityPlan>,
    /// Runs of `goodput run --repeats N` (recorded in `run.json`).
    pub(crate) repeats: Option<u32>,
    /// The client's own overhead over every step (dispatch lag, CPU).
    pub(crate) overhead: ClientOverhead,
    /// Server-side warnings of the steps run so far.
    pub(crate) server_warnings: Vec<Warning>,
    /// Ctrl-C / SIGTERM.
    pub(crate) cancel: CancellationToken,
    /// This process's part of a sharded run (`--shards`) and its shared step starts.
    pub(crate) sharding: ShardState,
    /// The correlation ids every step's requests carry (one run token for all steps).
    pub(crate) request_ids: Option<RequestIds>,
    /// `goodput tune --reset-url`: POSTed before every step (a failed reset fails the step).
    pub(crate) reset_url: Option<String>,
}

/// One step run within a session.
#[derive(Debug)]
pub(crate) struct StepRun {
    /// Its report.
    pub(crate) step: StepReport,
    /// Its SLO tallies.
    pub(crate) compliance: Compliance,
    /// How its run ended.
    pub(crate) outcome: RunOutcome,
}

impl Session {
    /// Starts the target (or the embedded simulator), builds backend and workload, writes
    /// `run.json`, opens the journal and installs the Ctrl-C handler.
    pub(crate) async fn open(options: RunOptions, command_line: Vec<String>) -> Result<Session> {
        Session::open_with(options, command_line, None).await
    }

    /// [`Session::open`], cancelled by `cancel` (`goodput tune`'s, which stops its servers on
    /// Ctrl-C) instead of a Ctrl-C handler of its own.
    pub(crate) async fn open_with(
        options: RunOptions,
        command_line: Vec<String>,
        cancel: Option<CancellationToken>,
    ) -> Result<Session> {
        let mut config = options.config.clone();
        let sharding = ShardState::new(options.shard);
        let gate = super::run_extras::load_gate(options.output.gate.as_deref())?;
        let endpoint = start_endpoint(&options).await?;
        config.time_scale = endpoint.time_scale;
        let target =
            Target::parse(&endpoint.url).with_context(|| format!("--target {}", endpoint.url))?;
        let client = HttpClient::tcp(target, super::backend::http_config(&options.request));
        let model = super::backend::model_name(&options, &endpoint, &client).await?;
        let served_models = super::run_extras::served_models(&client).await;
        let openai = options.request.openai(model.clone());
        let model = mix_or(&options, model);
        let streamed = openai.stream;
        let mut built = workload::prepare(&options, &client, &openai, &mut config).await?;
        built.workload = workload::per_request(&options, built.workload)?;
        let (request, fleet) = (&options.request, &options.fleet);
        let backend =
            super::backend::run_backend(request, fleet, openai, client, config.time_scale)?;
        let run_info = describe(
            (&options, &config, &endpoint),
            (&model, streamed),
            (&built, &served_models),
            command_line,
        );
        let counter = workload::runner_counter(&options.workload.tokenizer)?;
        let journal = prepare_output(options.output.out.as_deref(), &run_info, &config)?;
        let ids = &options.fleet.request_id_header;
        Ok(Session {
            request_ids: ids.clone().map(RequestIds::fresh),
            overhead: ClientOverhead::start(endpoint.simulator.is_some()),
            seed: options.seed,
            options,
            config,
            gate,
            endpoint,
            served_models,
            backend,
            built,
            counter,
            streamed,
            run_info,
            journal,
            step_loads: Vec::new(),
            sweep_plan: None,
            capacity_plan: None,
            repeats: None,
            server_warnings: Vec::new(),
            cancel: cancel.unwrap_or_else(cancel_on_signal),
            sharding,
            reset_url: None,
        })
    }

    /// A runner for `config` (step `index`), sending `workload` (the session's by default),
    /// read further along at each later step: prompts no cache has seen.
    pub(crate) fn runner(
        &self,
        config: &RunConfig,
        index: u32,
        workload: Option<Arc<dyn Workload>>,
    ) -> Runner {
        let workload = workload.unwrap_or_else(|| Arc::clone(&self.built.workload));
        let workload = for_step(workload, index);
        let runner = Runner::new(
            config.clone(),
            Arc::clone(&self.backend),
            workload,
            Arc::clone(&self.counter),
            self.streamed,
        )
        .with_step(index)
        .with_shard(self.sharding.plan.shard);
        let runner = match &self.request_ids {
            Some(ids) => runner.with_request_ids(ids.clone()),
            None => runner,
        };
        match self.step_start(index) {
            Some(at) => runner.with_start_at(at),
            None => runner,
        }
    }

    /// An aggregator for `config` with the session's length buckets.
    pub(crate) fn aggregator(&self, config: &RunConfig) -> StepAggregator {
        StepAggregator::new(config.slo.clone(), config.window)
            .with_length_buckets(self.built.buckets.clone())
            .with_classes(&self.run_info.classes)
    }

    /// Notes that the next step runs `load` (in `run.json`, so the journal can be rebuilt).
    pub(crate) fn record_step_load(&mut self, load: &LoadSpec) -> Result<()> {
        self.step_loads.push(load.clone());
        self.write_manifest()
    }

    /// Rewrites `run.json` with the steps so far and the sweep or capacity plan.
    pub(crate) fn write_manifest(&self) -> Result<()> {
        let Some(dir) = &self.options.output.out else {
            return Ok(());
        };
        let mut manifest =
            RunManifest::new(tool_info(), self.run_info.clone(), self.config.clone());
        manifest.steps = self.step_loads.clone();
        manifest.sweep = self.sweep_plan.clone();
        manifest.capacity = self.capacity_plan.clone();
        manifest.repeats = self.repeats;
        manifest.shard = self.sharding.info(&self.run_info);
        output::json::write_json(&dir.join("run.json"), &manifest)
    }

    /// Runs one step of a multi-step command (sweep level or capacity probe) with progress
    /// lines; `early_stop` ends a capacity probe once its targets are decided (`Stopping`).
    pub(crate) async fn run_step(
        &mut self,
        config: &RunConfig,
        workload: Option<Arc<dyn Workload>>,
        early_stop: Option<&Stopping>,
    ) -> Result<StepRun> {
        if let Some(url) = &self.reset_url {
            super::server_process::reset(url).await?;
        }
        let index = self.step_loads.len();
        self.record_step_load(&config.load)?;
        let runner = self.runner(config, u32::try_from(index).unwrap_or(u32::MAX), workload);
        let mut server_side = self.server_side(config, Some(index)).await?;
        let progress = (!self.options.output.quiet)
            .then(|| spawn_progress(runner.monitor(), self.cancel.clone()));
        if index == 0 {
            // CPU and wall time from the first step on, not the set-up before it.
            self.overhead = ClientOverhead::start(self.endpoint.simulator.is_some());
        }
        // A coordinated probe runs to its end on every shard (no shard sees enough to stop it).
        let early_stop = early_stop.filter(|_| !self.sharding.coordinated);
        let mut probe = ProbeSink::new(
            self.aggregator(config),
            early_stop.cloned(),
            runner.finish_token(),
        );
        let outcome = {
            server_side.begin();
            let mut sinks: Vec<&mut dyn RecordSink> =
                vec![&mut probe, server_side.tally(), &mut self.overhead];
            if let Some(journal) = self.journal.as_mut() {
                sinks.push(journal);
            }
            runner.run(&mut sinks, self.cancel.clone()).await
        };
        self.note_start(&outcome)?;
        server_side.end().await;
        if let Some(progress) = progress {
            progress.abort();
        }
        let (mut aggregator, mut compliance) = probe.into_parts();
        if self.sharding.coordinated {
            aggregator = super::sharded::merged_step(self, index, config).await?;
            compliance = aggregator.compliance();
        }
        let mut step = aggregator.report(LoadReport::from(&config.load));
        let warnings = server_side.enrich_step(&mut step, index, config.window);
        self.server_warnings.extend(warnings);
        Ok(StepRun {
            step,
            compliance,
            outcome,
        })
    }

    /// Server-side scraping and analysis for a run of `config` (`step` of a multi-step run).
    pub(crate) async fn server_side(
        &self,
        config: &RunConfig,
        step: Option<usize>,
    ) -> Result<ServerSide> {
        ServerSide::for_run(&self.options, &self.endpoint.url, config.time_scale, step).await
    }

    /// The report of `steps`, ended by `end`.
    pub(crate) fn report(&self, steps: Vec<StepReport>, end: EndReason) -> Report {
        let mut run = self.run_info.clone();
        run.end_reason = end.as_str().to_string();
        let inputs = ReportInputs {
            tool: tool_info(),
            run,
            config: &self.config,
            end,
            extra_warnings: &self.server_warnings,
            overhead: Some(&self.overhead),
        };
        assemble(inputs, steps)
    }

    /// Syncs the journal, writes and prints the report, stops the simulator, returns the exit
    /// status.
    pub(crate) fn finish(mut self, report: &Report, outcome: &RunOutcome) -> Result<ExitCode> {
        if let Some(journal) = self.journal.as_mut() {
            journal.sync().context("syncing the journal")?;
        }
        finish(
            &self.options.output,
            report,
            outcome,
            self.endpoint.simulator.take(),
            self.gate.as_ref(),
        )
    }
}

/// Writes and prints the report, stops the simulator, and picks the exit status.
pub(crate) fn finish(
    output: &OutputOptions,
    report: &Report,
    outcome: &RunOutcome,
    simulator: Option<goodput_sim::RunningSim>,
    gate: Option<&GateCriteria>,
) -> Result<ExitCode> {
    if let Some(dir) = &output.out {
        output::json::write_report(&dir.join("report.json"), report)?;
        super::run_extras::write_exports(dir, report)?;
    }
    output::table::print_report(report, output.summary, output.details)?;
    if let Some(simulator) = simulator {
        simulator.shutdown();
    }
    if let Some(error) = &outcome.sink_error {
        eprintln!("error: the journal could not be written: {error}");
    }
    let gate_passed = super::run_extras::gate_and_store(output, report, gate)?;
    let exported = output::exports::send_all(&output.exports, report);
    let status = exit_status(output, report, outcome);
    // A failed gate and an export that did not go out both make a successful run exit 1.
    let gate_failed = gate_passed == Some(false);
    Ok(ExitCode::from(
        if status == EXIT_OK && (gate_failed || !exported) {
            EXIT_RUN_FAILED
        } else {
            status
        },
    ))
}

pub(crate) fn exit_status(output: &OutputOptions, report: &Report, outcome: &RunOutcome) -> u8 {
    match outcome.end_reason {
        EndReason::Interrupted => return EXIT_INTERRUPTED,
        EndReason::NoProgress | EndReason::SinkFailed => return EXIT_RUN_FAILED,
        EndReason::Completed => {}
    }
    for step in &report.steps {
        let requests = &step.requests;
        if requests.scheduled > 0 && requests.completed == 0 {
            eprintln!("error: every measured request failed");
            return EXIT_RUN_FAILED;
        }
        let error_rate = requests.failed as f64 / requests.scheduled.max(1) as f64;
        if let Some(max) = output.max_error_rate.filter(|max| error_rate > *max) {
            eprintln!(
                "error: {:.2} % of requests failed, above --max-error-rate {:.2} %",
                error_rate * 100.0,
                max * 100.0
            );
            return EXIT_RUN_FAILED;
        }
    }
    EXIT_OK
}

/// Starts the embedded simulator when no target is given.
pub(crate) async fn start_endpoint(options: &RunOptions) -> Result<Endpoint> {
    let config = match &options.target {
        TargetOptions::Server { url, time_scale } => {
            return Ok(Endpoint {
                time_scale: *time_scale,
                url: url.clone(),
                label: fleet_label(options, url).unwrap_or_else(|| redact_url(url)),
                model: None,
                simulator: None,
            });
        }
        TargetOptions::Embedded(config) => config.as_ref().clone(),
    };
    let time_scale = config.time_scale;
    let label = crate::embedded_sim::describe_simulator(&config);
    let model = config.model_name();
    let simulator = goodput_sim::spawn(config, ([127, 0, 0, 1], 0).into())
        .await
        .context("starting the embedded simulator")?;
    let url = format!("http://{}/v1", simulator.addr());
    Ok(Endpoint {
        time_scale,
        url,
        label,
        model: Some(model),
        simulator: Some(simulator),
    })
}

/// A fleet's description for the report's target: its targets by name and URL and its
/// routing, and the header that names its replicas (`None`: one target, no header).
fn fleet_label(options: &RunOptions, url: &str) -> Option<String> {
    let fleet = &options.fleet;
    let replicas = fleet
        .replica_header
        .as_ref()
        .map(|header| format!("; replicas named by its {header} header"));
    if fleet.targets.is_empty() {
        return replicas.map(|named| format!("{}{named}", redact_url(url)));
    }
    let targets: Vec<String> = fleet
        .targets
        .iter()
        .map(|t| format!("{}={}", t.label, redact_url(&t.url)))
        .collect();
    let weights = match &fleet.routing {
        goodput_core::backend::fleet::Routing::Weighted(w) => format!(
            " {}",
            w.iter().map(u32::to_string).collect::<Vec<_>>().join(":")
        ),
        _ => String::new(),
    };
    Some(format!(
        "fleet of {} targets ({}{weights}): {}{}",
        targets.len(),
        fleet.routing.name(),
        targets.join(", "),
        replicas.unwrap_or_default()
    ))
}

pub(crate) async fn first_model(client: &HttpClient) -> Result<String> {
    let models = list_models(client, Duration::from_secs(10)).await?;
    Ok(models.into_iter().next().unwrap_or_default())
}

pub(crate) fn tool_info() -> ToolInfo {
    ToolInfo {
        name: "goodput".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        git_sha: option_env!("GOODPUT_GIT_SHA").map(str::to_string),
    }
}

/// The run's description (`end_reason` still `running`).
pub(crate) fn run_info(
    options: &RunOptions,
    config: &RunConfig,
    endpoint: &Endpoint,
    model: &str,
    streamed: bool,
    workload: &dyn Workload,
    command_line: Vec<String>,
) -> RunInfo {
    let mut described = workload.describe();
    described.extend(options.described.clone());
    RunInfo {
        started_at: rfc3339(SystemTime::now()),
        command_line: redact_command_line(&command_line),
        seed: config.seed,
        target: endpoint.label.clone(),
        api: options.request.api.name().into(),
        item_unit: options.request.item_unit.into(),
        model: model.to_string(),
        stream: streamed,
        workload: described,
        slo: config.slo.as_ref().map(ToString::to_string),
        window_secs: config.window.as_secs_f64(),
        time_scale: config.time_scale,
        end_reason: "running".into(),
        tags: options
            .output
            .tags
            .iter()
            .cloned()
            .collect::<BTreeMap<_, _>>(),
        client_host: Some(goodput_core::observe::environment::HostInfo::collect()),
        server_info: None,
        classes: options.fleet.classes.clone(),
    }
}

/// The run's description, with the models the target serves and the workload's buckets.
fn describe(
    (options, config, endpoint): (&RunOptions, &RunConfig, &Endpoint),
    (model, streamed): (&str, bool),
    (built, served_models): (&BuiltWorkload, &[String]),
    command_line: Vec<String>,
) -> RunInfo {
    let workload = built.workload.as_ref();
    let mut info = run_info(
        options,
        config,
        endpoint,
        model,
        streamed,
        workload,
        command_line,
    );
    note_served(&mut info, served_models, built);
    info
}

/// Notes in `run_info` the models the target serves and the workload's length buckets.
fn note_served(run_info: &mut RunInfo, served_models: &[String], built: &BuiltWorkload) {
    run_info.server_info = Some(goodput_core::observe::environment::ServerInfo {
        models: served_models.to_vec(),
        ..Default::default()
    });
    built.record_buckets(&mut run_info.workload);
}

/// The model `run.model` names: a model mix as given (`a=70%,b=30%`), else `model`.
pub(crate) fn mix_or(options: &RunOptions, model: String) -> String {
    match &options.fleet.mix.models {
        Some(mix) => mix.describe(),
        None => model,
    }
}

/// Creates the output directory, writes `run.json` and opens the journal.
pub(crate) fn prepare_output(
    dir: Option<&Path>,
    run: &RunInfo,
    config: &RunConfig,
) -> Result<Option<JournalWriter>> {
    let Some(dir) = dir else { return Ok(None) };
    std::fs::create_dir_all(dir)
        .with_context(|| format!("--out: cannot create {}", dir.display()))?;
    let manifest = RunManifest::new(tool_info(), run.clone(), config.clone());
    output::json::write_json(&dir.join("run.json"), &manifest)?;
    let path: PathBuf = dir.join("requests.jsonl");
    let journal = JournalWriter::create(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    Ok(Some(journal))
}

/// Plain progress lines on stderr every few seconds.
pub(crate) fn spawn_progress(
    monitor: Arc<RunMonitor>,
    cancel: CancellationToken,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let start = tokio::time::Instant::now();
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        tick.tick().await;
        let mut last_tokens = 0;
        while !cancel.is_cancelled() {
            tick.tick().await;
            let p = monitor.progress();
            eprintln!(
                "[{:>5.0}s] scheduled {} · completed {} · failed {} · in flight {} · {:.0} output tok/s",
                start.elapsed().as_secs_f64(),
                p.scheduled,
                p.completed,
                p.failed,
                p.in_flight,
                (p.output_tokens - last_tokens) as f64 / 5.0
            );
            last_tokens = p.output_tokens;
        }
    })
}
