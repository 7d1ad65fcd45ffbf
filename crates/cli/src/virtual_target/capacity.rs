//! `goodput capacity --virtual-time`: the same search and verdicts against the embedded
//! simulator driven directly in virtual time (no HTTP, no sleeping), so a model × accelerator
//! is sized in seconds of CPU, for any workload a live search accepts (length distributions,
//! shared prefixes, datasets, multi-turn sessions); with `--repeats N`, N independent searches.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::SystemTime;

use anyhow::{Context, Result, bail};
use goodput_core::assemble::{ReportInputs, assemble};
use goodput_core::config::RunConfig;
use goodput_core::decide::capacity::calibration::{self, SearchStart, calibration_config};
use goodput_core::decide::capacity::{CapacityReport, SearchConfig};
use goodput_core::decide::repeats;
use goodput_core::report::{RunInfo, StepReport};
use goodput_core::runner::EndReason;
use goodput_core::units::rfc3339;
use goodput_core::workload::step::for_step;

use crate::commands::capacity::{
    completed_outcome, conclude_searches, print_probe, probe_plan, search_config,
};
use crate::options::capacity::CapacityOptions;
use crate::virtual_target::run::simulated;
use crate::virtual_target::{VirtualTarget, virtual_capacity};
use crate::wiring::session::{finish, tool_info};

/// Runs the search (`--repeats N`: N independent searches) in virtual time and reports it like
/// a live one (without a journal: no request went over the wire).
pub(crate) async fn run(options: CapacityOptions, command_line: Vec<String>) -> Result<ExitCode> {
    if let Some(dir) = &options.run.output.out {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("--out: cannot create {}", dir.display()))?;
    }
    let gate = crate::wiring::run_extras::load_gate(options.run.output.gate.as_deref())?;
    let mut base = RunConfig {
        time_scale: 1.0,
        ..options.run.config.clone()
    };
    // The report names the simulator's model, whatever --model asks the body to carry.
    let (target, label, model) = simulated(&options.run, None, &mut base).await?;
    let mut steps = Vec::new();
    let mut found = Vec::new();
    for index in 0..options.repeats.max(1) {
        let first_step = steps.len();
        let capacity = search_once(&options, &target, &base, index, &mut steps)?;
        found.push((first_step, steps.len() - first_step, capacity));
    }
    let run = run_info(&options, &base, label, model, &target, command_line);
    let inputs = ReportInputs {
        tool: tool_info(),
        run,
        config: &base,
        end: EndReason::Completed,
        extra_warnings: &[],
        overhead: None,
    };
    let mut report = assemble(inputs, steps);
    conclude_searches(&mut report, options.search.dimension, found);
    finish(
        &options.run.output,
        &report,
        &completed_outcome(),
        None,
        gate.as_ref(),
    )
}

/// Search `index` (from 0) of the command: its arrivals from seed + index, its prompts read
/// `index` strides further along, its own calibration (whose step, and its probes' steps,
/// join `steps`); its verdict, numbered by the report's steps.
fn search_once(
    options: &CapacityOptions,
    target: &VirtualTarget,
    base: &RunConfig,
    index: u32,
    steps: &mut Vec<StepReport>,
) -> Result<CapacityReport> {
    let base = repeats::run_config(base, index);
    let mut target = target.clone();
    target.requests.workload = for_step(Arc::clone(&target.requests.workload), index);
    let quiet = options.run.output.quiet;
    if !quiet && options.repeats > 1 {
        eprintln!("search {}/{}", index + 1, options.repeats);
    }
    let plan = probe_plan(&options.search, base.clone());
    let (start, ceiling) = search_start(options, &target, &base, steps)?;
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
    Ok(capacity
        .with_accelerators(options.run.server_side.accelerators)
        .with_first_probe_step(first_probe_step))
}

/// The first load probed — --start, the calibration concurrency, or just under the throughput
/// of a calibration run (whose step joins `steps`) — and that throughput, the search's ceiling.
pub(crate) fn search_start(
    options: &CapacityOptions,
    target: &VirtualTarget,
    base: &RunConfig,
    steps: &mut Vec<StepReport>,
) -> Result<(f64, Option<f64>)> {
    Ok(
        match SearchStart::choose(options.search.start, options.search.dimension) {
            SearchStart::At(start) => (start, None),
            SearchStart::Calibrate => {
                let (start, calibration) = calibrated_start(target, base)?;
                let ceiling = calibration.throughput.requests_per_sec;
                steps.push(calibration);
                (start, Some(ceiling))
            }
        },
    )
}

/// Just under the throughput of a closed-loop run at the calibration concurrency (where a rate
/// search starts), and that run's step.
pub(crate) fn calibrated_start(
    target: &VirtualTarget,
    base: &RunConfig,
) -> Result<(f64, StepReport)> {
    let (step, _) = target.probe(&calibration_config(base, None))?;
    let Some(start) = calibration::calibrated_start(step.throughput.requests_per_sec) else {
        let why: Vec<String> = step
            .requests
            .failure_examples
            .iter()
            .map(|(kind, message)| format!("{kind}: {message}"))
            .collect();
        bail!(
            "the simulated target completed no request of the calibration run ({} of {} \
             failed{}): check the request shape against --sim-config",
            step.requests.failed,
            step.requests.sent,
            match why.is_empty() {
                true => String::new(),
                false => format!("; {}", why.join("; ")),
            }
        );
    };
    Ok((start, step))
}

fn run_info(
    options: &CapacityOptions,
    config: &RunConfig,
    label: String,
    model: String,
    target: &VirtualTarget,
    command_line: Vec<String>,
) -> RunInfo {
    let mut workload = target.requests.workload.describe();
    workload.insert(
        "length_buckets".into(),
        target.requests.buckets.to_string().into(),
    );
    RunInfo {
        started_at: rfc3339(SystemTime::now()),
        command_line: goodput_core::manifest::redact_command_line(&command_line),
        seed: config.seed,
        target: label,
        api: "virtual".into(),
        model,
        stream: target.requests.streamed,
        workload,
        slo: config.slo.as_ref().map(ToString::to_string),
        window_secs: config.window.as_secs_f64(),
        time_scale: 1.0,
        item_unit: "items".into(),
        end_reason: "completed".into(),
        tags: options.run.output.tags.iter().cloned().collect(),
        client_host: Some(goodput_core::observe::environment::HostInfo::collect()),
        server_info: None,
        classes: Vec::new(),
    }
}
