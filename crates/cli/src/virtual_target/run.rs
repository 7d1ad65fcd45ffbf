//! `goodput run --virtual-time`: the run the flags describe — any workload (length
//! distributions, shared prefixes, datasets, multi-turn sessions, traces) and any load (open
//! or closed loop, phase profiles, trace replay) — against the embedded simulator driven in
//! virtual time, with the same journal, report, exports and gate as a live run.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::SystemTime;

use anyhow::{Context, Result, bail};
use goodput_core::assemble::{ReportInputs, assemble};
use goodput_core::config::RunConfig;
use goodput_core::manifest::RunManifest;
use goodput_core::metrics::StepAggregator;
use goodput_core::report::{LoadReport, RunInfo, StepReport, Warning};
use goodput_core::runner::JournalWriter;
use goodput_core::runner::{EndReason, RecordSink, RunOutcome};
use goodput_core::workload::step::for_step;

use crate::embedded_sim::describe_simulator;
use crate::options::run::RunOptions;
use crate::virtual_target::VirtualTarget;
use crate::wiring::gate::Criteria as GateCriteria;
use crate::wiring::server_side::ServerSide;
use crate::wiring::session::{finish, prepare_output, run_info, tool_info};

/// What a virtual-time run or sweep needs before it starts.
pub(super) struct Prepared {
    /// The run configuration (adjusted to the workload, as for trace replay).
    pub(super) config: RunConfig,
    /// The `--gate` criteria.
    pub(super) gate: Option<GateCriteria>,
    /// The simulator and what is sent to it.
    pub(super) target: VirtualTarget,
    /// The run's description (`end_reason` still `running`).
    pub(super) info: RunInfo,
}

/// Builds the simulator and the workload, and describes the run.
pub(super) async fn prepare(options: &RunOptions, command_line: Vec<String>) -> Result<Prepared> {
    let mut config = RunConfig {
        time_scale: 1.0,
        ..options.config.clone()
    };
    let gate = crate::wiring::run_extras::load_gate(options.output.gate.as_deref())?;
    let (target, label, model) = simulated(options, options.model.clone(), &mut config).await?;
    let model = crate::wiring::session::mix_or(options, model);
    let info = describe(options, &config, &target, label, &model, command_line);
    Ok(Prepared {
        config,
        gate,
        target,
        info,
    })
}

/// The embedded simulator of `options` as a virtual-time target sending its workload to
/// `model` (default: the simulator's), with its label for the report and the model's name;
/// `config` is adjusted to the workload (trace replay).
pub(super) async fn simulated(
    options: &RunOptions,
    model: Option<String>,
    config: &mut RunConfig,
) -> Result<(VirtualTarget, String, String)> {
    let Some(sim) = options.simulator().cloned() else {
        bail!("--virtual-time drives the embedded simulator: drop --target");
    };
    let model = model.unwrap_or_else(|| sim.model_name());
    let label = format!("{} in virtual time", describe_simulator(&sim));
    let requests = super::requests::from_run(options, model.clone(), config).await?;
    Ok((VirtualTarget { sim, requests }, label, model))
}

/// Runs `goodput run --virtual-time`.
pub(crate) async fn run(options: RunOptions, command_line: Vec<String>) -> Result<ExitCode> {
    let Prepared {
        config,
        gate,
        target,
        info,
    } = prepare(&options, command_line).await?;
    let out = options.output.out.as_deref();
    let mut journal = prepare_output(out, &info, &config)?;
    let mut server_side = ServerSide::offline(&options.server_side, out, 1.0, None)?;
    let started_at = SystemTime::now();
    let mut taken = take(&target, &config, 0, (journal.as_mut(), &mut server_side))?;
    let outcome = taken.outcome(started_at);
    let mut report = assemble(inputs(info, &config, &[]), vec![taken.step]);
    server_side.enrich(&mut report, config.window);
    finish(&options.output, &report, &outcome, None, gate.as_ref())
}

/// Runs `goodput run --virtual-time --repeats N`: the configuration N times on the engine's
/// clock, each run a step (its arrivals from seed + its index, its prompts read that many
/// strides further along, as a live repeated run's), then the figures across the runs.
pub(crate) async fn repeated(
    options: RunOptions,
    repeats: u32,
    command_line: Vec<String>,
) -> Result<ExitCode> {
    let Prepared {
        config,
        gate,
        target,
        info,
    } = prepare(&options, command_line).await?;
    let out = options.output.out.as_deref();
    let mut journal = prepare_output(out, &info, &config)?;
    if let Some(dir) = out {
        // Every run a step of the same load, so `goodput report` rebuilds each and the figures
        // across them.
        let mut manifest = RunManifest::new(tool_info(), info.clone(), config.clone());
        manifest.steps = vec![config.load.clone(); repeats as usize];
        manifest.repeats = Some(repeats);
        crate::output::json::write_json(&dir.join("run.json"), &manifest)?;
    }
    let started_at = SystemTime::now();
    let (mut steps, mut warnings, mut outcome) = (Vec::new(), Vec::new(), None);
    for index in 0..repeats {
        let run = goodput_core::decide::repeats::run_config(&config, index);
        let mut run_target = target.clone();
        run_target.requests.workload = for_step(Arc::clone(&target.requests.workload), index);
        let step = index as usize;
        let mut server_side = ServerSide::offline(&options.server_side, out, 1.0, Some(step))?;
        let mut taken = take(
            &run_target,
            &run,
            index,
            (journal.as_mut(), &mut server_side),
        )?;
        warnings.extend(server_side.enrich_step(&mut taken.step, step, run.window));
        if !options.output.quiet {
            crate::commands::sweep::print_result("run", (step, repeats as usize), &taken.step);
        }
        outcome = Some(taken.outcome(started_at));
        steps.push(taken.step);
    }
    let outcome = outcome.context("--repeats: no run was measured")?;
    let mut report = assemble(inputs(info, &config, &warnings), steps);
    report.repeats = Some(goodput_core::decide::repeats::summarise(&report.steps));
    finish(&options.output, &report, &outcome, None, gate.as_ref())
}

/// The report's inputs for a completed virtual run.
pub(super) fn inputs<'a>(
    info: RunInfo,
    config: &'a RunConfig,
    extra_warnings: &'a [Warning],
) -> ReportInputs<'a> {
    ReportInputs {
        tool: tool_info(),
        run: RunInfo {
            end_reason: EndReason::Completed.as_str().to_string(),
            ..info
        },
        config,
        end: EndReason::Completed,
        extra_warnings,
        overhead: None,
    }
}

/// What a virtual run handed on.
pub(super) struct Taken {
    pub(super) step: StepReport,
    /// How the run ended (its elapsed time the virtual clock's).
    run: RunOutcome,
    /// The journal's first write error (later records were not written).
    sink_error: Option<std::io::Error>,
}

impl Taken {
    /// The run's outcome, started at `started_at` (the wall clock), with the journal's first
    /// write error.
    pub(super) fn outcome(&mut self, started_at: SystemTime) -> RunOutcome {
        RunOutcome {
            end_reason: self.run.end_reason,
            records: self.run.records,
            started_at,
            elapsed: self.run.elapsed,
            sink_error: self.sink_error.take(),
            late_start: None,
        }
    }
}

/// Runs `config` as step `step`, handing each record as it ends to the aggregator, the
/// server-side tally and the journal (until a write fails).
pub(super) fn take(
    target: &VirtualTarget,
    config: &RunConfig,
    step: u32,
    (mut journal, server_side): (Option<&mut JournalWriter>, &mut ServerSide),
) -> Result<Taken> {
    let mut aggregator = StepAggregator::new(config.slo.clone(), config.window)
        .with_length_buckets(target.requests.buckets.clone())
        .with_classes(&target.requests.classes);
    let mut sink_error = None;
    let run = target.step_until(config, step, &mut |record| {
        aggregator.add(&record);
        // The tally only counts; it cannot fail.
        let _ = server_side.tally().record(&record);
        if let Some(journal) = journal.as_mut()
            && sink_error.is_none()
        {
            sink_error = journal.record(&record).err();
        }
        true
    })?;
    Ok(Taken {
        step: aggregator.report(LoadReport::from(&config.load)),
        run,
        sink_error,
    })
}

/// The run's description, as a live run's `run.json` (target: the simulator in virtual time).
fn describe(
    options: &RunOptions,
    config: &RunConfig,
    target: &VirtualTarget,
    label: String,
    model: &str,
    command_line: Vec<String>,
) -> RunInfo {
    let endpoint = crate::wiring::session::Endpoint::virtual_time(label);
    let stream = target.requests.streamed;
    let workload = target.requests.workload.as_ref();
    let mut info = run_info(
        options,
        config,
        &endpoint,
        model,
        stream,
        workload,
        command_line,
    );
    info.api = "virtual".into();
    info.workload.insert(
        "length_buckets".into(),
        target.requests.buckets.to_string().into(),
    );
    info
}
