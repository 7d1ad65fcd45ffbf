//! `goodput capacity --virtual-time`: the same search and verdicts against the embedded
//! simulator driven directly in virtual time (no HTTP, no sleeping), so a model × accelerator
//! is sized in seconds of CPU. Fixed prompt and answer lengths only.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::{Context, Result, bail};
use goodput_core::assemble::{ReportInputs, assemble};
use goodput_core::config::RunConfig;
use goodput_core::decide::capacity::calibration::{
    self, CALIBRATION_CONCURRENCY, calibration_config, drop_calibration_warnings,
};
use goodput_core::decide::capacity::{Criteria, Dimension};
use goodput_core::report::{RunInfo, StepReport};
use goodput_core::runner::EndReason;
use goodput_core::units::rfc3339;

use crate::args::capacity::CapacityArgs;
use crate::args::workload::WorkloadArgs;
use crate::commands::capacity::{completed_outcome, print_probe, probe_plan, search_config};
use crate::virtual_target::{VirtualTarget, virtual_capacity};
use crate::wiring::session::{describe_simulator, finish, random_seed, tool_info};

/// Default prompt and answer lengths, as for `goodput run`.
const DEFAULT_INPUT_TOKENS: u32 = 512;
const DEFAULT_OUTPUT_TOKENS: u32 = 128;

/// Runs the search in virtual time and reports it like a live one (without a journal: no
/// request went over the wire).
pub(crate) fn run(
    args: CapacityArgs,
    criteria: Criteria,
    measured: u64,
    tolerance: f64,
    command_line: Vec<String>,
) -> Result<ExitCode> {
    let target_lengths = fixed_lengths(&args.run.workload)?;
    if let Some(dir) = &args.run.out {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("--out: cannot create {}", dir.display()))?;
    }
    let gate = crate::wiring::run_extras::load_gate(args.run.reporting.gate.as_deref())?;
    let seed = args.run.seed.unwrap_or_else(random_seed);
    let base = RunConfig {
        time_scale: 1.0,
        ..args.run.run_config(seed)?
    };
    let (target, label, model) = virtual_target(&args, seed, target_lengths)?;
    let plan = probe_plan(&args, base.clone(), criteria, measured);
    let mut steps = Vec::new();
    let start = search_start(&args, &target, &base, &mut steps)?;
    let search = search_config(&args, start, tolerance);
    let quiet = args.run.quiet;
    let (capacity, probe_steps) = virtual_capacity(&target, &plan, search, |probe| {
        if !quiet {
            print_probe(probe, plan.dimension);
        }
    });
    let first_probe_step = steps.len();
    steps.extend(probe_steps);
    let run = run_info(&args, &base, label, model, target_lengths, command_line)?;
    let inputs = ReportInputs {
        tool: tool_info(),
        run,
        config: &base,
        end: EndReason::Completed,
        extra_warnings: &[],
        overhead: None,
    };
    let mut report = assemble(inputs, steps);
    drop_calibration_warnings(&mut report.warnings, plan.dimension, first_probe_step);
    report.capacity = Some(
        capacity
            .with_accelerators(args.run.server_side.accelerators)
            .with_first_probe_step(first_probe_step),
    );
    finish(
        &args.run,
        &report,
        &completed_outcome(),
        None,
        gate.as_ref(),
    )
}

/// The embedded simulator as a virtual-time target, its label for the report and its model
/// name; reasoning and tool calls are refused (virtual time does not emulate them).
fn virtual_target(
    args: &CapacityArgs,
    seed: u64,
    (input_tokens, output_tokens): (u32, u32),
) -> Result<(VirtualTarget, String, String)> {
    let sim = crate::embedded_sim::embedded_sim_config(&args.run, seed)?;
    if sim.agent != goodput_sim::config::AgentConfig::default() {
        bail!(
            "--virtual-time does not emulate reasoning or tool calls: drop --sim-reasoning-tokens, \
             --sim-tool-calls and the config's `agent` section"
        );
    }
    let label = format!("{} in virtual time", describe_simulator(&sim));
    let model = sim.model_name();
    let target = VirtualTarget {
        sim,
        input_tokens,
        output_tokens,
    };
    Ok((target, label, model))
}

/// The first load probed: --start, the calibration concurrency, or half the throughput of a
/// calibration run (whose step joins `steps`).
fn search_start(
    args: &CapacityArgs,
    target: &VirtualTarget,
    base: &RunConfig,
    steps: &mut Vec<StepReport>,
) -> Result<f64> {
    Ok(match (args.start, args.dimension()) {
        (Some(start), _) => start,
        (None, Dimension::Concurrency) => f64::from(CALIBRATION_CONCURRENCY),
        (None, Dimension::Rate) => {
            let (start, calibration) = calibrated_start(target, base)?;
            steps.push(calibration);
            start
        }
    })
}

/// Half the throughput of a closed-loop run at the calibration concurrency (where a rate
/// search starts), and that run's step.
pub(crate) fn calibrated_start(
    target: &VirtualTarget,
    base: &RunConfig,
) -> Result<(f64, StepReport)> {
    let (step, _) = target.probe(&calibration_config(base, None));
    let start = calibration::calibrated_start(step.throughput.requests_per_sec)
        .context("the simulated target completed no request in calibration: check --sim-config")?;
    Ok((start, step))
}

/// `--input-tokens` / `--output-tokens` as fixed numbers; other workloads are refused.
fn fixed_lengths(workload: &WorkloadArgs) -> Result<(u32, u32)> {
    let unsupported = [
        ("--dataset", workload.dataset.is_some()),
        ("--trace", workload.trace.is_some()),
        ("--turns", workload.turns.is_some()),
        ("--shared-prefix", workload.shared_prefix.is_some()),
    ];
    if let Some((flag, _)) = unsupported.iter().find(|(_, given)| *given) {
        bail!("--virtual-time sends fixed-length synthetic requests: drop {flag}");
    }
    let parse = |flag: &str, text: &Option<String>, default: u32| -> Result<u32> {
        match text {
            None => Ok(default),
            Some(text) => text
                .trim()
                .parse::<u32>()
                .ok()
                .filter(|n| *n > 0)
                .with_context(|| {
                    format!("{flag} {text}: --virtual-time takes a fixed positive length, e.g. 512")
                }),
        }
    };
    Ok((
        parse(
            "--input-tokens",
            &workload.input_tokens,
            DEFAULT_INPUT_TOKENS,
        )?,
        parse(
            "--output-tokens",
            &workload.output_tokens,
            DEFAULT_OUTPUT_TOKENS,
        )?,
    ))
}

fn run_info(
    args: &CapacityArgs,
    config: &RunConfig,
    target: String,
    model: String,
    (input, output): (u32, u32),
    command_line: Vec<String>,
) -> Result<RunInfo> {
    let workload = BTreeMap::from([
        ("kind".to_string(), "synthetic".into()),
        ("input_tokens".to_string(), input.into()),
        ("output_tokens".to_string(), output.into()),
    ]);
    Ok(RunInfo {
        started_at: rfc3339(SystemTime::now()),
        command_line: goodput_core::manifest::redact_command_line(&command_line),
        seed: config.seed,
        target,
        api: "virtual".into(),
        model,
        stream: true,
        workload,
        slo: config.slo.as_ref().map(ToString::to_string),
        window_secs: config.window.as_secs_f64(),
        time_scale: 1.0,
        item_unit: "items".into(),
        end_reason: "completed".into(),
        tags: args.run.tags()?.into_iter().collect(),
        client_host: Some(goodput_core::observe::environment::HostInfo::collect()),
        server_info: None,
    })
}
