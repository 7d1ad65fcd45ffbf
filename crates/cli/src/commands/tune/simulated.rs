//! One configuration in virtual time: the base simulator with the configuration's knobs,
//! searched (or swept) as `goodput capacity --virtual-time` does — the same probe plan,
//! calibration and verdicts through `goodput_virtual::virtual_capacity` — in seconds of CPU;
//! its report written in its directory like a live configuration's.

use std::sync::Arc;

use anyhow::{Context, Result};
use goodput_core::assemble::{ReportInputs, assemble};
use goodput_core::config::RunConfig;
use goodput_core::decide::capacity::{CapacityReport, SearchConfig};
use goodput_core::decide::repeats;
use goodput_core::decide::sweep::conclude;
use goodput_core::report::tune::{TuneFailure, TuneRun};
use goodput_core::report::{Report, RunInfo, StepReport};
use goodput_core::runner::EndReason;
use goodput_core::workload::step::for_step;
use goodput_sim::SimConfig;

use super::{Measured, Tune};
use crate::commands::capacity::{conclude_searches, print_probe, probe_plan, search_config};
use crate::options::capacity::CapacityOptions;
use crate::options::run::TargetOptions;
use crate::options::tune::Configuration;
use crate::virtual_target::capacity::search_start;
use crate::virtual_target::{VirtualTarget, virtual_capacity};
use crate::wiring::session::{Endpoint, run_info, tool_info};

/// Simulates `configuration`, its report in `dir` (relative to the tune's directory).
pub(super) async fn measure(
    tune: &Tune,
    configuration: &Configuration,
    dir: &str,
) -> Result<Measured> {
    let root = tune.options.out.join(dir);
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).with_context(|| format!("cannot create {}", root.display()))?;
    let mut run = TuneRun {
        dir: dir.to_string(),
        command: None,
        target: None,
        startup_secs: None,
        failure: None,
        figures: None,
    };
    let simulator = match &configuration.simulator {
        Some(Ok(simulator)) => simulator.clone(),
        Some(Err(reason)) => return Ok(Measured::Done(Box::new(invalid(run, reason.clone())))),
        None => anyhow::bail!("{}: no simulator configuration", configuration.name),
    };
    // The configuration as a simulator file: `goodput sim --config` serves it.
    crate::output::json::write_json(&root.join("sim.json"), &simulator)?;
    let report = match simulate(tune, simulator, configuration.accelerators).await {
        Ok(report) => report,
        Err(error) => return Ok(Measured::Done(Box::new(invalid(run, format!("{error:#}"))))),
    };
    super::live::write_report(&root, &report)?;
    run.figures = Some(goodput_core::decide::tune::figures(
        &report,
        tune.judging(configuration),
    ));
    Ok(Measured::Done(Box::new(run)))
}

/// A configuration the simulator refuses.
fn invalid(mut run: TuneRun, reason: String) -> TuneRun {
    run.failure = Some(TuneFailure {
        stage: "config".into(),
        reason,
        log_tail: Vec::new(),
    });
    run
}

/// The report of `simulator` searched (or swept) in virtual time.
async fn simulate(tune: &Tune, simulator: SimConfig, accelerators: u32) -> Result<Report> {
    let mut options = tune.options.capacity.clone();
    options.run.target = TargetOptions::Embedded(Box::new(simulator.clone()));
    options.run.server_side.accelerators = Some(accelerators);
    let mut base = RunConfig {
        time_scale: 1.0,
        ..options.run.config.clone()
    };
    let model = simulator.model_name();
    let requests =
        crate::virtual_target::requests::from_run(&options.run, model.clone(), &mut base).await?;
    let label = format!(
        "{} in virtual time",
        crate::embedded_sim::describe_simulator(&simulator)
    );
    let target = VirtualTarget {
        sim: simulator,
        requests,
    };
    let quiet = tune.quiet();
    let info = describe(tune, &options, &base, (&target, label, &model));
    let inputs = ReportInputs {
        tool: tool_info(),
        run: info,
        config: &base,
        end: EndReason::Completed,
        extra_warnings: &[],
        overhead: None,
    };
    let Some(plan) = &tune.options.sweep else {
        let (steps, found) = searches(&options, &target, &base, quiet)?;
        let mut report = assemble(inputs, steps);
        conclude_searches(&mut report, options.search.dimension, found);
        return Ok(report);
    };
    let mut steps = Vec::new();
    for (index, &(round, level)) in crate::commands::sweep::step_order(plan).iter().enumerate() {
        let (config, _) = crate::commands::sweep::step_config(
            (&base, false),
            &target.requests.workload,
            plan,
            (round, level),
        );
        let mut step_target = target.clone();
        let number = u32::try_from(index).unwrap_or(u32::MAX);
        step_target.requests.workload = for_step(Arc::clone(&target.requests.workload), number);
        steps.push(step_target.probe(&config)?.0);
    }
    let (sweep, repeated) = conclude(plan, &steps);
    let mut report = assemble(inputs, steps);
    report.sweep = Some(sweep);
    report.repeats = repeated;
    Ok(report)
}

/// The capacity searches (`--repeats`) of `target`: every step and each search's verdict.
type Found = Vec<(usize, usize, CapacityReport)>;

fn searches(
    options: &CapacityOptions,
    target: &VirtualTarget,
    base: &RunConfig,
    quiet: bool,
) -> Result<(Vec<StepReport>, Found)> {
    let (mut steps, mut found) = (Vec::new(), Vec::new());
    for index in 0..options.repeats.max(1) {
        let first_step = steps.len();
        let base = repeats::run_config(base, index);
        let mut target = target.clone();
        target.requests.workload = for_step(Arc::clone(&target.requests.workload), index);
        let plan = probe_plan(&options.search, base.clone());
        let (start, ceiling) = search_start(options, &target, &base, &mut steps)?;
        let search = SearchConfig {
            ceiling,
            ..search_config(&options.search, start, options.budget)
        };
        let (capacity, probe_steps) = virtual_capacity(&target, &plan, search, |probe| {
            if !quiet {
                print_probe(probe, plan.dimension);
            }
        });
        let first_probe_step = steps.len();
        steps.extend(probe_steps);
        let capacity = capacity
            .with_accelerators(options.run.server_side.accelerators)
            .with_first_probe_step(first_probe_step);
        found.push((first_step, steps.len() - first_step, capacity));
    }
    Ok((steps, found))
}

/// The configuration's run description, as `capacity --virtual-time` writes it.
fn describe(
    tune: &Tune,
    options: &CapacityOptions,
    base: &RunConfig,
    (target, label, model): (&VirtualTarget, String, &str),
) -> RunInfo {
    let endpoint = Endpoint::virtual_time(label);
    let workload = target.requests.workload.as_ref();
    let stream = target.requests.streamed;
    let command_line = tune.command_line.clone();
    let mut info = run_info(
        &options.run,
        base,
        &endpoint,
        model,
        stream,
        workload,
        command_line,
    );
    info.api = "virtual".into();
    info.end_reason = EndReason::Completed.as_str().into();
    info.workload.insert(
        "length_buckets".into(),
        target.requests.buckets.to_string().into(),
    );
    info
}
