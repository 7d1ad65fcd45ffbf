//! `goodput run`: start the embedded simulator when no target is given, build the backend,
//! workload and runner, journal every request, handle Ctrl-C, then write and print the report
//! and choose the exit status.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use goodput_core::backend::discovery::list_models;
use goodput_core::backend::openai::{ApiKind, OpenAiBackend, OpenAiConfig};
use goodput_core::config::RunConfig;
use goodput_core::http::{HttpClient, HttpConfig, Target};
use goodput_core::manifest::{RunManifest, redact_command_line, redact_url};
use goodput_core::metrics::StepAggregator;
use goodput_core::overhead::ClientOverhead;
use goodput_core::report::{LoadReport, Report, RunInfo, SCHEMA_VERSION, ToolInfo};
use goodput_core::runner::{EndReason, JournalWriter, RecordSink, RunMonitor, RunOutcome, Runner};
use goodput_core::tokens::counter_by_name;
use goodput_core::warnings;
use goodput_core::workload::{SyntheticWorkload, Workload};
use goodput_sim::config::{EngineConfig, SimConfig};
use http::{HeaderName, HeaderValue};
use tokio_util::sync::CancellationToken;

use crate::app::{EXIT_INTERRUPTED, EXIT_OK, EXIT_RUN_FAILED, rfc3339};
use crate::args::run::{ApiArg, RunArgs};
use crate::output;

/// The target of a run: a URL, or the embedded simulator serving on loopback.
struct Endpoint {
    url: String,
    label: String,
    model: Option<String>,
    simulator: Option<goodput_sim::RunningSim>,
}

/// Runs `goodput run`.
pub(crate) async fn run(args: RunArgs, command_line: Vec<String>) -> Result<ExitCode> {
    let seed = args.seed.unwrap_or_else(random_seed);
    let config = args.run_config(seed)?;
    let endpoint = start_endpoint(&args, seed).await?;
    let target =
        Target::parse(&endpoint.url).with_context(|| format!("--target {}", endpoint.url))?;
    let client = HttpClient::tcp(target, HttpConfig::default());
    let model = match args.model.clone().or_else(|| endpoint.model.clone()) {
        Some(model) => model,
        None => first_model(&client).await?,
    };
    let openai = openai_config(&args, model.clone())?;
    let streamed = openai.stream;
    let backend = Arc::new(OpenAiBackend::new(openai, client).context("backend configuration")?);
    let workload = Arc::new(SyntheticWorkload {
        input_tokens: args.input_tokens,
        output_tokens: Some(args.output_tokens),
        seed,
    });
    let run_info = run_info(
        &args,
        &config,
        &endpoint,
        &model,
        streamed,
        workload.as_ref(),
        command_line,
    )?;
    let counter = counter_by_name(&args.tokenizer).context("--tokenizer")?;
    let runner = Runner::new(config.clone(), backend, workload, counter, streamed);
    let mut journal = prepare_output(args.out.as_deref(), &run_info, &config)?;
    let mut aggregator = StepAggregator::new(config.slo.clone(), config.window);
    let mut overhead = ClientOverhead::start(endpoint.simulator.is_some());
    let cancel = CancellationToken::new();
    spawn_signal_handler(cancel.clone());
    let progress = (!args.quiet).then(|| spawn_progress(runner.monitor(), cancel.clone()));
    let outcome = {
        let mut sinks: Vec<&mut dyn RecordSink> = vec![&mut aggregator, &mut overhead];
        if let Some(journal) = journal.as_mut() {
            sinks.push(journal);
        }
        runner.run(&mut sinks, cancel.clone()).await
    };
    if let Some(progress) = progress {
        progress.abort();
    }
    if let Some(journal) = journal.as_mut() {
        journal.sync().context("syncing the journal")?;
    }
    let mut report = build_report(run_info, &config, &aggregator, &outcome);
    overhead.attach(&mut report);
    finish(&args, &report, &outcome, endpoint.simulator)
}

/// Writes and prints the report, stops the simulator, and picks the exit status.
fn finish(
    args: &RunArgs,
    report: &Report,
    outcome: &RunOutcome,
    simulator: Option<goodput_sim::RunningSim>,
) -> Result<ExitCode> {
    if let Some(dir) = &args.out {
        output::json::write_report(&dir.join("report.json"), report)?;
    }
    if args.json {
        output::json::print_report(report)?;
    } else {
        output::table::print_summary(report)?;
    }
    if let Some(simulator) = simulator {
        simulator.shutdown();
    }
    if let Some(error) = &outcome.sink_error {
        eprintln!("error: the journal could not be written: {error}");
    }
    Ok(ExitCode::from(exit_status(args, report, outcome)))
}

fn exit_status(args: &RunArgs, report: &Report, outcome: &RunOutcome) -> u8 {
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
        if let Some(max) = args.max_error_rate.filter(|max| error_rate > *max) {
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
async fn start_endpoint(args: &RunArgs, seed: u64) -> Result<Endpoint> {
    if let Some(url) = &args.target {
        return Ok(Endpoint {
            url: url.clone(),
            label: redact_url(url),
            model: None,
            simulator: None,
        });
    }
    let config = embedded_sim_config(args, seed)?;
    let label = describe_simulator(&config);
    let model = config.model_name();
    let simulator = goodput_sim::spawn(config, ([127, 0, 0, 1], 0).into())
        .await
        .context("starting the embedded simulator")?;
    let url = format!("http://{}/v1", simulator.addr());
    Ok(Endpoint {
        url,
        label,
        model: Some(model),
        simulator: Some(simulator),
    })
}

fn embedded_sim_config(args: &RunArgs, seed: u64) -> Result<SimConfig> {
    let mut config = match &args.sim_config {
        Some(path) => SimConfig::from_file(path)?,
        None => SimConfig {
            seed,
            ..SimConfig::default()
        },
    };
    if let EngineConfig::Batching(batching) = &mut config.engine {
        if let Some(name) = &args.sim_model {
            batching.model = goodput_protocol::hardware::ModelSpec::preset(name)
                .with_context(|| format!("--sim-model {name}: unknown preset"))?;
        }
        if let Some(name) = &args.sim_gpu {
            batching.gpu = goodput_protocol::hardware::GpuSpec::preset(name)
                .with_context(|| format!("--sim-gpu {name}: unknown preset"))?;
        }
    }
    config.validate()?;
    Ok(config)
}

fn describe_simulator(config: &SimConfig) -> String {
    match &config.engine {
        EngineConfig::Batching(b) => format!(
            "embedded simulator ({} on {}×{}, time scale {})",
            b.model.name, b.tensor_parallel, b.gpu.name, config.time_scale
        ),
        EngineConfig::Fixed(f) => format!(
            "embedded simulator (fixed timing: ttft {:?}, itl {:?}, {} slots)",
            f.ttft, f.itl, f.slots
        ),
    }
}

async fn first_model(client: &HttpClient) -> Result<String> {
    let models = list_models(client, Duration::from_secs(10)).await?;
    Ok(models.into_iter().next().unwrap_or_default())
}

fn openai_config(args: &RunArgs, model: String) -> Result<OpenAiConfig> {
    let extra_body = match &args.extra_body {
        None => serde_json::Map::new(),
        Some(text) => match serde_json::from_str(text).context("--extra-body: not valid JSON")? {
            serde_json::Value::Object(map) => map,
            _ => bail!("--extra-body: must be a JSON object, e.g. '{{\"temperature\": 0}}'"),
        },
    };
    let headers = args
        .headers
        .iter()
        .map(|header| {
            let (name, value) = header
                .split_once(':')
                .with_context(|| format!("--header {header}: expected NAME:VALUE"))?;
            let name = HeaderName::try_from(name.trim())
                .with_context(|| format!("--header: `{}` is not a header name", name.trim()))?;
            let value = HeaderValue::try_from(value.trim())
                .with_context(|| format!("--header {name}: invalid value"))?;
            Ok((name, value))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(OpenAiConfig {
        api: match args.api {
            ApiArg::Chat => ApiKind::Chat,
            ApiArg::Completions => ApiKind::Completions,
        },
        model,
        stream: !args.no_stream,
        include_usage: true,
        continuous_usage: !args.no_continuous_usage,
        ignore_eos: !args.no_ignore_eos,
        extra_body,
        headers,
        api_key: args.api_key.clone(),
        ..OpenAiConfig::default()
    })
}

fn tool_info() -> ToolInfo {
    ToolInfo {
        name: "goodput".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        git_sha: option_env!("GOODPUT_GIT_SHA").map(str::to_string),
    }
}

fn run_info(
    args: &RunArgs,
    config: &RunConfig,
    endpoint: &Endpoint,
    model: &str,
    streamed: bool,
    workload: &dyn Workload,
    command_line: Vec<String>,
) -> Result<RunInfo> {
    Ok(RunInfo {
        started_at: rfc3339(SystemTime::now()),
        command_line: redact_command_line(&command_line),
        seed: config.seed,
        target: endpoint.label.clone(),
        api: match args.api {
            ApiArg::Chat => "chat".into(),
            ApiArg::Completions => "completions".into(),
        },
        model: model.to_string(),
        stream: streamed,
        workload: {
            let mut described = workload.describe();
            described.insert("counting_tokenizer".into(), args.tokenizer.clone().into());
            described
        },
        slo: config.slo.as_ref().map(ToString::to_string),
        window_secs: config.window.as_secs_f64(),
        end_reason: "running".into(),
        tags: args.tags()?.into_iter().collect::<BTreeMap<_, _>>(),
    })
}

/// Creates the output directory, writes `run.json` and opens the journal.
fn prepare_output(
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

fn build_report(
    mut run: RunInfo,
    config: &RunConfig,
    aggregator: &StepAggregator,
    outcome: &RunOutcome,
) -> Report {
    run.end_reason = outcome.end_reason.as_str().to_string();
    let steps = vec![aggregator.report(LoadReport::from(&config.load))];
    let warnings = warnings::check(config, &steps, outcome.end_reason);
    Report {
        schema_version: SCHEMA_VERSION,
        tool: tool_info(),
        run,
        steps,
        warnings,
        client: None,
    }
}

/// First Ctrl-C (or SIGTERM): stop the run cleanly. Second: exit at once (the journal is
/// already flushed line by line).
fn spawn_signal_handler(cancel: CancellationToken) {
    tokio::spawn(async move {
        if wait_for_signal().await.is_err() {
            return;
        }
        eprintln!("\nstopping: cancelling in-flight requests (Ctrl-C again to exit at once)");
        cancel.cancel();
        if wait_for_signal().await.is_ok() {
            std::process::exit(i32::from(EXIT_INTERRUPTED));
        }
    });
}

async fn wait_for_signal() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            result = tokio::signal::ctrl_c() => result,
            _ = terminate.recv() => Ok(()),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await
    }
}

/// Plain progress lines on stderr every few seconds.
fn spawn_progress(
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

fn random_seed() -> u64 {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    (nanos as u64) ^ u64::from(std::process::id()).rotate_left(32)
}
