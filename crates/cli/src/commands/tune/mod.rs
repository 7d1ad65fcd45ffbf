//! `goodput tune`: one server configuration after another — started from the command template
//! in a process group of its own, readied, measured (a capacity search under the SLO, or a
//! load sweep), stopped with nothing left behind — or simulated in virtual time
//! ([`simulated`]), then ranked by goodput per accelerator with the Pareto front and the best
//! configuration (`core::decide::tune`). Every finished configuration is a line of the journal
//! ([`journal`]), so `--resume` skips it and `goodput report` rebuilds the tune ([`rebuild`]);
//! `--verify-top K` measures the K best predictions live.

mod journal;
mod live;
mod rebuild;
mod simulated;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::SystemTime;

use anyhow::Result;
use goodput_core::decide::tune::{self, Judging, TunePlan};
use goodput_core::report::tune::{
    TuneConfiguration, TuneFailure, TuneMode, TuneReport, TuneRun, TuneServer, TuneVerification,
};
use goodput_core::report::{Report, RunInfo};
use goodput_core::units::rfc3339;
use tokio_util::sync::CancellationToken;

use crate::exit::{EXIT_INTERRUPTED, EXIT_OK, EXIT_RUN_FAILED};
use crate::options::tune::{Configuration, TuneOptions};
use crate::options::workload::Tokenizer;
use crate::wiring::server_process::{Stop, signal_group};
use crate::wiring::session::{tool_info, wait_for_signal};
use journal::{ConfigurationRecord, Entry, EntryKind, Journal, PlanRecord, TuneManifest};

pub(crate) use rebuild::{is_tune_dir, rebuild};

/// Ctrl-C and SIGTERM during a tune: the first ends the measurement in flight and stops its
/// server (the journal keeps every finished configuration); the second kills the server's
/// process group and exits at once.
#[derive(Debug, Clone)]
pub(crate) struct Interrupt {
    /// Cancelled by the first signal.
    pub(crate) cancel: CancellationToken,
    /// The process group of the server running now (0: none).
    pub(crate) current: Arc<AtomicI32>,
}

impl Interrupt {
    fn install() -> Interrupt {
        let interrupt = Interrupt {
            cancel: CancellationToken::new(),
            current: Arc::new(AtomicI32::new(0)),
        };
        let handler = interrupt.clone();
        tokio::spawn(async move {
            if wait_for_signal().await.is_err() {
                return;
            }
            eprintln!(
                "\nstopping: ending this configuration's measurement and stopping its server \
                 (Ctrl-C again to kill it and exit at once)"
            );
            handler.cancel.cancel();
            if wait_for_signal().await.is_ok() {
                let pgid = handler.current.load(Ordering::SeqCst);
                if pgid > 0 {
                    signal_group(pgid, Stop::Kill);
                }
                std::process::exit(i32::from(EXIT_INTERRUPTED));
            }
        });
        interrupt
    }
}

/// What one configuration's measurement came to.
#[derive(Debug)]
pub(crate) enum Measured {
    /// Finished (measured, or failed with its reason): journaled.
    Done(Box<TuneRun>),
    /// Interrupted by the user: not journaled, measured again on `--resume`.
    Interrupted,
}

/// What measuring a configuration needs.
#[derive(Debug)]
pub(crate) struct Tune {
    pub(crate) options: TuneOptions,
    pub(crate) command_line: Vec<String>,
    pub(crate) interrupt: Interrupt,
}

impl Tune {
    /// How a configuration's figures are judged.
    pub(crate) fn judging(&self, configuration: &Configuration) -> Judging {
        Judging {
            measure: self.options.measure,
            attainment: self.options.capacity.search.criteria.attainment,
            accelerators: configuration.accelerators,
            gpu_hour_cost: self.options.gpu_hour_cost,
        }
    }

    /// Whether progress lines are printed.
    pub(crate) fn quiet(&self) -> bool {
        self.options.capacity.run.output.quiet
    }
}

/// Runs `goodput tune`.
pub(crate) async fn run(options: TuneOptions, command_line: Vec<String>) -> Result<ExitCode> {
    check_workload(&options).await?;
    let manifest = journal::open(
        &options.out,
        manifest(&options, &command_line),
        options.resume,
    )?;
    let (mut runs, mut verified) = finished(&options.out, options.configurations.len())?;
    let tune = Tune {
        options,
        command_line,
        interrupt: Interrupt::install(),
    };
    let journal = Journal::of(&tune.options.out);
    let interrupted = measure_all(&tune, &journal, &mut runs).await?
        || verify(&tune, &journal, &runs, &mut verified).await?;
    let report = assemble(&manifest, runs, verified, interrupted);
    let dir = &tune.options.out;
    crate::output::json::write_report(&dir.join("report.json"), &report)?;
    crate::wiring::run_extras::write_exports(dir, &report)?;
    let output = &tune.options.capacity.run.output;
    crate::output::table::print_report(&report, output.summary, output.details)?;
    Ok(ExitCode::from(status(&report, interrupted)))
}

/// Builds the workload once before any server starts (live, unless `--tokenizer server`
/// needs a server to count with), so a file that does not parse is a usage error, not every
/// configuration's failure.
async fn check_workload(options: &TuneOptions) -> Result<()> {
    let run = &options.capacity.run;
    if options.mode == TuneMode::Virtual
        || matches!(run.workload.tokenizer, Tokenizer::Server { .. })
    {
        return Ok(());
    }
    let mut config = run.config.clone();
    crate::wiring::workload::prepare_offline(run, &mut config).await?;
    Ok(())
}

/// 130 when interrupted, 1 when no configuration could be measured (every one failed), else
/// 0 (none meeting the SLO is a finding, as a capacity search below its minimum is).
pub(crate) fn status(report: &Report, interrupted: bool) -> u8 {
    let measured = report.tune.as_ref().is_some_and(|t| {
        t.configurations
            .iter()
            .any(|c| c.run.failure.is_none() && c.run.figures.is_some())
    });
    match (interrupted, measured) {
        (true, _) => EXIT_INTERRUPTED,
        (false, false) => EXIT_RUN_FAILED,
        (false, true) => EXIT_OK,
    }
}

/// Each configuration's measurement, and the live ones of `--verify-top` by configuration.
type Finished = (Vec<Option<TuneRun>>, BTreeMap<usize, TuneRun>);

/// The journal's finished measurements: each configuration's, and the live ones of
/// `--verify-top`.
fn finished(dir: &Path, count: usize) -> Result<Finished> {
    let mut runs = vec![None; count];
    let mut verified = BTreeMap::new();
    for entry in journal::read_entries(dir)? {
        if entry.index >= count {
            continue;
        }
        match entry.kind {
            EntryKind::Measured => runs[entry.index] = Some(entry.run),
            EntryKind::Verified => {
                verified.insert(entry.index, entry.run);
            }
        }
    }
    Ok((runs, verified))
}

/// Measures every configuration the journal has not finished; whether the tune was
/// interrupted.
async fn measure_all(tune: &Tune, journal: &Journal, runs: &mut [Option<TuneRun>]) -> Result<bool> {
    let total = runs.len();
    let skipped = runs.iter().filter(|r| r.is_some()).count();
    if skipped > 0 && !tune.quiet() {
        eprintln!("tune: {skipped} of {total} configurations already finished (from the journal)");
    }
    for (index, configuration) in tune.options.configurations.iter().enumerate() {
        if runs[index].is_some() {
            continue;
        }
        if tune.interrupt.cancel.is_cancelled() {
            return Ok(true);
        }
        if !tune.quiet() {
            eprintln!(
                "configuration {}/{total}: {}",
                index + 1,
                configuration.name
            );
        }
        let dir = config_dir(index, total, configuration, "configs");
        let measured = match tune.options.mode {
            TuneMode::Live => live::measure(tune, configuration, &dir).await?,
            TuneMode::Virtual => simulated::measure(tune, configuration, &dir).await?,
        };
        let Measured::Done(run) = measured else {
            return Ok(true);
        };
        let run = *run;
        announce(tune, configuration, &run);
        journal.append(&Entry {
            index,
            kind: EntryKind::Measured,
            name: configuration.name.clone(),
            run: run.clone(),
        })?;
        runs[index] = Some(run);
    }
    Ok(false)
}

/// `--verify-top K`: the K best predicted configurations measured live; whether the tune was
/// interrupted.
async fn verify(
    tune: &Tune,
    journal: &Journal,
    runs: &[Option<TuneRun>],
    verified: &mut BTreeMap<usize, TuneRun>,
) -> Result<bool> {
    let options = &tune.options;
    if options.verify_top == 0 {
        return Ok(false);
    }
    let predicted: Vec<TuneConfiguration> = configurations(&options_records(options), runs);
    let top: Vec<usize> = tune::ranking(&predicted)
        .into_iter()
        .take(options.verify_top)
        .collect();
    for (rank, &index) in top.iter().enumerate() {
        if verified.contains_key(&index) {
            continue;
        }
        let configuration = &options.configurations[index];
        if !tune.quiet() {
            eprintln!(
                "verify {}/{}: {} (predicted rank {}) live",
                rank + 1,
                top.len(),
                configuration.name,
                rank + 1
            );
        }
        let dir = config_dir(index, options.configurations.len(), configuration, "verify");
        let Measured::Done(run) = live::measure(tune, configuration, &dir).await? else {
            return Ok(true);
        };
        let run = *run;
        announce(tune, configuration, &run);
        journal.append(&Entry {
            index,
            kind: EntryKind::Verified,
            name: configuration.name.clone(),
            run: run.clone(),
        })?;
        verified.insert(index, run);
    }
    Ok(false)
}

/// One line on stderr per finished configuration.
fn announce(tune: &Tune, configuration: &Configuration, run: &TuneRun) {
    if tune.quiet() {
        return;
    }
    match (&run.failure, &run.figures) {
        (Some(failure), _) => eprintln!(
            "  {}: failed ({}): {}",
            configuration.name, failure.stage, failure.reason
        ),
        (None, Some(figures)) => eprintln!(
            "  {}: {} — {:.3} good req/s per accelerator{}",
            configuration.name,
            figures
                .capacity
                .map_or("no load met the SLO".to_string(), |c| format!(
                    "capacity {c:.3} {}",
                    figures.load_unit
                )),
            figures.rank_value.unwrap_or(0.0),
            run.startup_secs
                .map_or(String::new(), |s| format!(", ready in {s:.1} s"))
        ),
        (None, None) => {}
    }
}

/// A configuration's directory, relative to the tune's: `{parent}/NN-name`.
pub(crate) fn config_dir(
    index: usize,
    total: usize,
    configuration: &Configuration,
    parent: &str,
) -> String {
    let width = total.to_string().len();
    let slug: String = configuration
        .name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '=' | ',' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .take(60)
        .collect();
    format!("{parent}/{:0width$}-{slug}", index + 1)
}

/// The plan and configurations recorded in `tune.json`.
fn manifest(options: &TuneOptions, command_line: &[String]) -> TuneManifest {
    let server = options.server.as_ref();
    TuneManifest {
        tool: tool_info(),
        started_at: rfc3339(SystemTime::now()),
        command_line: goodput_core::manifest::redact_command_line(command_line),
        run: run_info(options, command_line),
        plan: PlanRecord {
            mode: options.mode,
            measure: options.measure,
            slo: options.capacity.search.criteria.slo.to_string(),
            attainment: options.capacity.search.criteria.attainment,
            accelerators_basis: options.accelerators_basis.clone(),
            gpu_hour_cost: options.gpu_hour_cost,
            repeats: options.capacity.repeats.max(1),
            server: server.map(|s| TuneServer {
                command: s.command.text.clone(),
                target: s.target.text.clone(),
                ready_url: s.ready_url.as_ref().map(|t| t.text.clone()),
                ready_timeout_secs: s.ready_timeout.as_secs_f64(),
                stop_grace_secs: s.stop_grace.as_secs_f64(),
                reset_url: s.reset_url.as_ref().map(|t| t.text.clone()),
            }),
            verify_top: options.verify_top,
        },
        configurations: options_records(options),
    }
}

/// The configurations as recorded.
fn options_records(options: &TuneOptions) -> Vec<ConfigurationRecord> {
    let total = options.configurations.len();
    options
        .configurations
        .iter()
        .enumerate()
        .map(|(index, c)| ConfigurationRecord {
            name: c.name.clone(),
            values: c.map(),
            accelerators: c.accelerators,
            dir: config_dir(index, total, c, "configs"),
        })
        .collect()
}

/// The tune's `run` section: what every configuration's runs share.
fn run_info(options: &TuneOptions, command_line: &[String]) -> RunInfo {
    let run = &options.capacity.run;
    let target = match (&options.server, options.mode) {
        (Some(server), TuneMode::Live) => format!("servers started by `{}`", server.command.text),
        _ => "simulated configurations in virtual time".to_string(),
    };
    RunInfo {
        started_at: rfc3339(SystemTime::now()),
        command_line: goodput_core::manifest::redact_command_line(command_line),
        seed: run.seed,
        target,
        api: match options.mode {
            TuneMode::Live => run.request.api.name().into(),
            TuneMode::Virtual => "virtual".into(),
        },
        model: run
            .model
            .clone()
            .or_else(|| run.simulator().map(goodput_sim::SimConfig::model_name))
            .unwrap_or_else(|| "each server's first".into()),
        stream: run.request.openai.stream,
        workload: run.described.clone(),
        slo: run.config.slo.as_ref().map(ToString::to_string),
        window_secs: run.config.window.as_secs_f64(),
        time_scale: options.server.as_ref().map_or(1.0, |s| s.time_scale),
        item_unit: run.request.item_unit.into(),
        end_reason: "running".into(),
        tags: run.output.tags.iter().cloned().collect(),
        client_host: Some(goodput_core::observe::environment::HostInfo::collect()),
        server_info: None,
        classes: run.fleet.classes.clone(),
    }
}

/// Each configuration of `records` with its run (one not measured says so).
fn configurations(
    records: &[ConfigurationRecord],
    runs: &[Option<TuneRun>],
) -> Vec<TuneConfiguration> {
    records
        .iter()
        .zip(runs)
        .map(|(record, run)| TuneConfiguration {
            name: record.name.clone(),
            values: record.values.clone(),
            accelerators: record.accelerators,
            run: run.clone().unwrap_or_else(|| TuneRun {
                dir: record.dir.clone(),
                command: None,
                target: None,
                startup_secs: None,
                failure: Some(TuneFailure {
                    stage: "measure".into(),
                    reason: "not measured: the tune was interrupted first (--resume DIR goes on)"
                        .into(),
                    log_tail: Vec::new(),
                }),
                figures: None,
            }),
            rank: None,
            on_front: false,
        })
        .collect()
}

/// The tune's report: no steps of its own (each configuration's report is in its directory),
/// its `tune` section concluded from the runs.
pub(crate) fn assemble(
    manifest: &TuneManifest,
    runs: Vec<Option<TuneRun>>,
    verified: BTreeMap<usize, TuneRun>,
    interrupted: bool,
) -> Report {
    let plan = &manifest.plan;
    let verification = verified
        .into_iter()
        .map(|(configuration, measured)| TuneVerification {
            configuration,
            predicted_rank: 1,
            measured,
            ratio: None,
        })
        .collect();
    let section: TuneReport = tune::conclude(
        TunePlan {
            mode: plan.mode,
            measure: plan.measure,
            slo: plan.slo.clone(),
            attainment: plan.attainment,
            accelerators_basis: plan.accelerators_basis.clone(),
            gpu_hour_cost: plan.gpu_hour_cost,
            repeats: plan.repeats,
            server: plan.server.clone(),
        },
        configurations(&manifest.configurations, &runs),
        verification,
    );
    let mut run = manifest.run.clone();
    run.started_at = manifest.started_at.clone();
    run.end_reason = if interrupted {
        "interrupted"
    } else {
        "completed"
    }
    .into();
    let mut report = Report::new(tool_info(), run, Vec::new(), Vec::new());
    report.tune = Some(section);
    report
}
