//! `goodput sweep --virtual-time`: one step per load level (concurrency, arrival rate or batch
//! size) against the embedded simulator in virtual time — the live sweep's steps, journal
//! (each record with its step), knee and report, in seconds; with `--repeats N`, N rounds.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::SystemTime;

use anyhow::Result;
use goodput_core::assemble::assemble;
use goodput_core::config::RunConfig;
use goodput_core::decide::sweep::conclude;
use goodput_core::manifest::RunManifest;
use goodput_core::report::Warning;
use goodput_core::runner::JournalWriter;
use goodput_core::workload::Workload;
use goodput_core::workload::step::for_step;

use crate::commands::sweep::{describe, print_result, round_note, step_config, step_order};
use crate::options::run::RunOptions;
use crate::options::sweep::SweepOptions;
use crate::output;
use crate::virtual_target::VirtualTarget;
use crate::virtual_target::run::{Prepared, Taken, inputs, prepare, take};
use crate::wiring::server_side::ServerSide;
use crate::wiring::session::{finish, prepare_output, tool_info};

/// Runs the sweep of `options` (its plan: the dimension and levels) in virtual time.
pub(crate) async fn run(sweep: SweepOptions, command_line: Vec<String>) -> Result<ExitCode> {
    let SweepOptions {
        run: options,
        plan,
        rate_given,
    } = sweep;
    let Prepared {
        config,
        gate,
        target,
        info,
    } = prepare(&options, command_line).await?;
    let order = step_order(&plan);
    let levels: Vec<_> = order
        .iter()
        .map(|&at| step_config((&config, rate_given), &target.requests.workload, &plan, at))
        .collect();
    let mut journal = prepare_output(options.output.out.as_deref(), &info, &config)?;
    if let Some(dir) = &options.output.out {
        let mut manifest = RunManifest::new(tool_info(), info.clone(), config.clone());
        manifest.steps = levels.iter().map(|(step, _)| step.load.clone()).collect();
        manifest.sweep = Some(plan.clone());
        output::json::write_json(&dir.join("run.json"), &manifest)?;
    }
    let started_at = SystemTime::now();
    let (mut steps, mut warnings, mut last) = (Vec::new(), Vec::new(), None);
    for (index, level) in levels.iter().enumerate() {
        if !options.output.quiet {
            let (round, at) = order[index];
            let what = describe(plan.dimension, &level.0, plan.loads[at]);
            let note = round_note(&plan, round);
            eprintln!("step {}/{}: {what}{note}", index + 1, levels.len());
        }
        let further = plan.repeats.is_some();
        let (mut taken, step_warnings) =
            run_level(&options, &target, (level, further), index, journal.as_mut())?;
        warnings.extend(step_warnings);
        if !options.output.quiet {
            print_result("step", (index, levels.len()), &taken.step);
        }
        steps.push(taken.step.clone());
        let outcome = taken.outcome(started_at);
        last = Some(outcome);
    }
    let (sweep, repeats) = conclude(&plan, &steps);
    let mut report = assemble(inputs(info, &config, &warnings), steps);
    report.sweep = Some(sweep);
    report.repeats = repeats;
    let Some(outcome) = last else {
        anyhow::bail!("the sweep has no levels");
    };
    finish(&options.output, &report, &outcome, None, gate.as_ref())
}

/// A step's configuration and, for batch sweeps, its workload.
type Level = (RunConfig, Option<Arc<dyn Workload>>);

/// Runs one level (its configuration and, for batch sweeps, its workload) as step `index`
/// (with `further`, a repeated sweep's, its prompts read `index` strides along, as a live
/// sweep's are); returns what it handed on and its server-side warnings.
fn run_level(
    options: &RunOptions,
    target: &VirtualTarget,
    ((config, workload), further): (&Level, bool),
    index: usize,
    journal: Option<&mut JournalWriter>,
) -> Result<(Taken, Vec<Warning>)> {
    let mut step_target = target.clone();
    if let Some(workload) = workload {
        step_target.requests.workload = Arc::clone(workload);
    }
    let number = u32::try_from(index).unwrap_or(u32::MAX);
    if further {
        step_target.requests.workload =
            for_step(Arc::clone(&step_target.requests.workload), number);
    }
    let out = options.output.out.as_deref();
    let mut server_side = ServerSide::offline(&options.server_side, out, 1.0, Some(index))?;
    let mut taken = take(&step_target, config, number, (journal, &mut server_side))?;
    let warnings = server_side.enrich_step(&mut taken.step, index, config.window);
    Ok((taken, warnings))
}
