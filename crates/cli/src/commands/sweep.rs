//! `goodput sweep`: one full measured step per load level (concurrency, arrival rate or batch
//! size), every step journaled with its index, then the knee — the last level before
//! throughput stops growing while latency keeps rising; with `--repeats N`, N rounds of the
//! levels and each level's figures across its runs.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::{Result, bail};
use goodput_core::config::{LoadSpec, RunConfig};
use goodput_core::decide::repeats;
use goodput_core::decide::sweep::{BatchedWorkload, SweepDimension, SweepReport, conclude};
use goodput_core::report::StepReport;
use goodput_core::runner::{EndReason, RunOutcome};
use goodput_core::workload::Workload;

use crate::options::sweep::SweepOptions;
use crate::wiring::session::Session;

/// Runs `goodput sweep`.
pub(crate) async fn run(options: SweepOptions, command_line: Vec<String>) -> Result<ExitCode> {
    if options.run.virtual_time {
        return crate::virtual_target::sweep::run(options, command_line).await;
    }
    let SweepOptions {
        run,
        plan,
        rate_given,
    } = options;
    let mut session = Session::open(run, command_line).await?;
    let (steps, outcome) = measure(&mut session, &plan, rate_given).await?;
    let (sweep, repeats) = conclude(&plan, &steps);
    let mut report = session.report(steps, outcome.end_reason);
    report.sweep = Some(sweep);
    report.repeats = repeats;
    session.finish(&report, &outcome)
}

/// Every step of `plan` on the session (round after round), until one ends otherwise than
/// completed: the steps and the last outcome.
pub(crate) async fn measure(
    session: &mut Session,
    plan: &SweepReport,
    rate_given: bool,
) -> Result<(Vec<StepReport>, RunOutcome)> {
    session.sweep_plan = Some(plan.clone());
    let order = step_order(plan);
    let mut steps = Vec::new();
    let mut last_outcome = None;
    for (index, &(round, level)) in order.iter().enumerate() {
        let (config, workload) = step_config(
            (&session.config, rate_given),
            &session.built.workload,
            plan,
            (round, level),
        );
        if !session.options.output.quiet {
            let what = describe(plan.dimension, &config, plan.loads[level]);
            eprintln!(
                "step {}/{}: {what}{}",
                index + 1,
                order.len(),
                round_note(plan, round)
            );
        }
        let step = session.run_step(&config, workload, None).await?;
        let ended = step.outcome.end_reason;
        if !session.options.output.quiet {
            print_result("step", (index, order.len()), &step.step);
        }
        steps.push(step.step);
        last_outcome = Some(step.outcome);
        if ended != EndReason::Completed {
            break;
        }
    }
    let Some(outcome) = last_outcome else {
        bail!("the sweep has no levels");
    };
    Ok((steps, outcome))
}

/// The (round, level) of every step of `plan`, in the order they run: all levels once, then
/// again (`plan.repeats` rounds), so slow drift of the server spreads over every level.
pub(crate) fn step_order(plan: &SweepReport) -> Vec<(u32, usize)> {
    let rounds = plan.repeats.unwrap_or(1).max(1);
    (0..rounds)
        .flat_map(|round| (0..plan.loads.len()).map(move |level| (round, level)))
        .collect()
}

/// ", round r of N" in a repeated sweep's progress lines.
pub(crate) fn round_note(plan: &SweepReport, round: u32) -> String {
    match plan.repeats {
        Some(rounds) => format!(", round {} of {rounds}", round + 1),
        None => String::new(),
    }
}

/// The configuration (and workload) of `level` in `round`: the level's, its arrivals drawn
/// from seed + round (round 0 is the sweep's own seed).
pub(crate) fn step_config(
    base: (&RunConfig, bool),
    workload: &Arc<dyn Workload>,
    plan: &SweepReport,
    (round, level): (u32, usize),
) -> (RunConfig, Option<Arc<dyn Workload>>) {
    let (config, workload) = level_config(base, workload, plan.dimension, plan.loads[level]);
    (repeats::run_config(&config, round), workload)
}

/// The configuration (and, for batch sweeps, the workload) of the step at `level`, from the
/// base configuration (and whether `--rate` was given) and the base workload.
pub(crate) fn level_config(
    (base, rate_given): (&RunConfig, bool),
    workload: &Arc<dyn Workload>,
    dimension: SweepDimension,
    level: f64,
) -> (RunConfig, Option<Arc<dyn Workload>>) {
    let (arrival, max_concurrency) = base.load.open_loop_shape();
    let (load, workload) = match dimension {
        SweepDimension::Concurrency => (
            LoadSpec::Closed {
                concurrency: level as u32,
            },
            None,
        ),
        SweepDimension::Rate => (
            LoadSpec::Open {
                rate_per_sec: level,
                arrival,
                max_concurrency,
            },
            None,
        ),
        SweepDimension::Batch => {
            // Batches go out at --concurrency (default one request at a time) or --rate.
            let load = match (&base.load, rate_given) {
                (LoadSpec::Open { .. }, false) => LoadSpec::Closed { concurrency: 1 },
                (load, _) => load.clone(),
            };
            let batched: Arc<dyn Workload> = Arc::new(BatchedWorkload {
                inner: Arc::clone(workload),
                batch: level as u32,
            });
            (load, Some(batched))
        }
    };
    let config = RunConfig {
        load,
        ..base.clone()
    };
    (config, workload)
}

/// The progress line of a finished step (`noun` `index + 1` of `levels`): its throughput and
/// median E2E.
pub(crate) fn print_result(noun: &str, (index, levels): (usize, usize), step: &StepReport) {
    eprintln!(
        "{noun} {}/{levels}: {:.2} req/s, {:.1} items/s, {:.1} output tok/s, E2E p50 {}",
        index + 1,
        step.throughput.requests_per_sec,
        step.throughput.items_per_sec,
        step.throughput.output_tokens_per_sec,
        step.latency_ms
            .e2e
            .p50
            .map_or("-".into(), |ms| format!("{ms:.0} ms"))
    );
}

pub(crate) fn describe(dimension: SweepDimension, config: &RunConfig, level: f64) -> String {
    match dimension {
        SweepDimension::Concurrency => format!("concurrency {level}"),
        SweepDimension::Rate => format!("{level} requests/s"),
        SweepDimension::Batch => match config.load {
            LoadSpec::Closed { concurrency } => {
                format!("batch {level} at concurrency {concurrency}")
            }
            _ => format!("batch {level}"),
        },
    }
}
