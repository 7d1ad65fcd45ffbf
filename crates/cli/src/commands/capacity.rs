//! `goodput capacity`: the highest load at which the queue stays stable and the SLO holds —
//! a short calibration (unless --start), then probes bracketed and bisected, each long enough
//! to prove the attainment target and ended early once it is refuted; every request
//! journaled with its step index, the verdict with its bounds and confidence.

use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::{Context, Result, bail};
use goodput_core::config::RunConfig;
use goodput_core::decide::capacity::calibration::{
    CALIBRATION_CONCURRENCY, CALIBRATION_REQUESTS, calibrated_start, calibration_config,
    drop_calibration_warnings,
};
use goodput_core::decide::capacity::{
    CapacityPlan, Criteria, Dimension, Probe, ProbeError, ProbePlan, ProbeRun, ProbeTiming,
    SearchConfig, find_capacity,
};
use goodput_core::metrics::Slo;
use goodput_core::runner::{EndReason, RunOutcome};

use crate::args::capacity::{CapacityArgs, SearchArgs};
use crate::args::run::parse_slo;
use crate::wiring::session::{Session, StepRun};

/// Runs `goodput capacity`.
pub(crate) async fn run(args: CapacityArgs, command_line: Vec<String>) -> Result<ExitCode> {
    let tolerance = args.validate()?;
    crate::wiring::sharded::check_capacity(&args)?;
    let criteria = criteria(&args)?;
    let measured = args.search.measured_requests(&criteria)?;
    if !args.run.quiet {
        eprintln!(
            "capacity search: {} at {:.1} % attainment, {:.0} % confidence: {measured} measured \
             requests per probe",
            criteria.slo,
            criteria.attainment * 100.0,
            criteria.confidence * 100.0
        );
    }
    if args.run.virtual_time {
        return crate::virtual_target::capacity::run(
            args,
            criteria,
            measured,
            tolerance,
            command_line,
        )
        .await;
    }
    if args.run.workload.trace.is_some() {
        bail!("--trace replays the trace's own arrivals: a capacity search sets its own load");
    }
    live(args, criteria, measured, tolerance, command_line).await
}

/// The probe criteria from --slo, --attainment and --confidence.
pub(crate) fn criteria(args: &CapacityArgs) -> Result<Criteria> {
    let slo = parse_slo(args.run.slo_text())?.context(
        "--slo none: a capacity search needs latency targets, e.g. --slo ttft=500ms,tpot=50ms",
    )?;
    Ok(criteria_with(slo, &args.search))
}

/// The probe criteria: `slo` at --attainment and --confidence.
pub(crate) fn criteria_with(slo: Slo, search: &SearchArgs) -> Criteria {
    Criteria {
        slo,
        attainment: search.attainment,
        confidence: search.confidence,
    }
}

/// The search bounds and tolerance, and at most `budget` of target time.
pub(crate) fn search_config(
    args: &SearchArgs,
    start: f64,
    tolerance: f64,
    budget: Option<Duration>,
) -> SearchConfig {
    let integer = args.dimension() == Dimension::Concurrency;
    let min = if integer {
        args.min_load.max(1.0)
    } else {
        args.min_load
    };
    SearchConfig {
        start: start.clamp(min, args.max_load),
        min,
        max: args.max_load,
        tolerance,
        max_probes: args.max_probes,
        integer,
        budget_secs: budget.map(|b| b.as_secs_f64()),
    }
}

/// How probes are shaped around `base` (arrival process and client cap from --arrival and
/// --max-concurrency; timing from --probe-warmup, --probe-min-duration and
/// --max-probe-duration).
pub(crate) fn probe_plan(
    args: &SearchArgs,
    base: RunConfig,
    criteria: Criteria,
    measured: u64,
) -> ProbePlan {
    let timing = ProbeTiming {
        warmup: args.probe_warmup,
        min_duration: args.probe_min_duration,
        max_duration: args.max_probe_duration,
    };
    ProbePlan::around(base, args.dimension(), criteria, measured, timing)
}

/// One progress line per judged probe.
pub(crate) fn print_probe(probe: &Probe, dimension: Dimension) {
    let load = match dimension {
        Dimension::Rate => format!("{:.2} req/s", probe.load),
        Dimension::Concurrency => format!("concurrency {}", probe.load),
    };
    eprintln!(
        "probe {}: {load} → {:?}: {} ({}, {:.2} req/s completed)",
        probe.index + 1,
        probe.outcome,
        probe.reason,
        crate::output::steps::decided(probe),
        probe.requests_per_sec
    );
}

/// The live search's bounds (its start is settled after the calibration run).
fn live_bounds(args: &CapacityArgs, tolerance: f64) -> SearchConfig {
    let start = args.search.start.unwrap_or(args.search.min_load);
    search_config(&args.search, start, tolerance, args.budget)
}

async fn live(
    args: CapacityArgs,
    criteria: Criteria,
    measured: u64,
    tolerance: f64,
    command_line: Vec<String>,
) -> Result<ExitCode> {
    let dimension = args.dimension();
    let accelerators = args.run.server_side.accelerators;
    let quiet = args.run.quiet;
    let bounds = live_bounds(&args, tolerance);
    // Probes take their arrival process and client cap from the session's configuration (so
    // --arrival and --max-concurrency shape every probe).
    let base = args.run.run_config(0)?;
    let plan = probe_plan(&args.search, base, criteria.clone(), measured);
    let mut session = Session::open(args.run, command_line).await?.coordinated();
    let plan = ProbePlan {
        base: session.config.clone(),
        ..plan
    };
    let mut steps = Vec::new();
    let start = match (args.search.start, dimension) {
        (Some(start), _) => start,
        (None, Dimension::Concurrency) => f64::from(CALIBRATION_CONCURRENCY),
        (None, Dimension::Rate) => match calibrate_start(&mut session, &plan, &mut steps).await? {
            Ok(start) => start,
            Err(outcome) => {
                let report = session.report(steps, outcome.end_reason);
                return session.finish(&report, &outcome);
            }
        },
    };
    let search = SearchConfig {
        start: start.clamp(bounds.min, bounds.max),
        ..bounds
    };
    let first_probe_step = steps.len();
    session.capacity_plan = Some(CapacityPlan {
        dimension,
        search,
        criteria: criteria.clone(),
        requests_per_probe: measured,
        accelerators,
        first_probe_step,
        probe_timing: Some(plan.timing()),
    });
    session.write_manifest()?;
    let searched = search_live(&mut session, &plan, search, quiet).await;
    let (capacity, probe_steps, aborted, outcome) = searched?;
    steps.extend(probe_steps);
    steps.extend(aborted);
    let mut report = session.report(steps, outcome.end_reason);
    drop_calibration_warnings(&mut report.warnings, dimension, first_probe_step);
    report.capacity = Some(
        capacity
            .with_accelerators(accelerators)
            .with_first_probe_step(first_probe_step),
    );
    session.finish(&report, &outcome)
}

type Searched = (
    goodput_core::decide::capacity::CapacityReport,
    Vec<goodput_core::report::StepReport>,
    Option<goodput_core::report::StepReport>,
    RunOutcome,
);

/// Runs the search against the session's target. A probe that did not complete (Ctrl-C, no
/// progress) aborts the search; its step is returned apart, after the judged ones.
async fn search_live(
    session: &mut Session,
    plan: &ProbePlan,
    search: SearchConfig,
    quiet: bool,
) -> Result<Searched> {
    let criteria = plan.criteria.clone();
    let mut last_outcome = None;
    let mut aborted = None;
    let mut failure = None;
    let (capacity, steps) = find_capacity(
        plan.dimension,
        search,
        &criteria,
        plan.measured_requests,
        async |call: ProbeRun| {
            if !quiet {
                announce_probe(call.index, call.load, call.run);
            }
            let load = call.load;
            let run = match session
                .run_step(&plan.config_for(&call), None, Some(&plan.stopping(load)))
                .await
            {
                Ok(run) => run,
                Err(error) => {
                    let message = format!("{error:#}");
                    failure = Some(error);
                    return Err(ProbeError { load, message });
                }
            };
            let StepRun {
                step,
                compliance,
                outcome,
            } = run;
            let ended = outcome.end_reason;
            last_outcome = Some(outcome);
            if ended != EndReason::Completed {
                aborted = Some(step);
                return Err(ProbeError {
                    load,
                    message: ended.as_str().to_string(),
                });
            }
            Ok((step, compliance))
        },
        |probe| {
            if !quiet {
                print_probe(probe, plan.dimension);
            }
        },
    )
    .await;
    if let Some(error) = failure {
        return Err(error);
    }
    let outcome = last_outcome.unwrap_or_else(completed_outcome);
    Ok((capacity, steps, aborted, outcome))
}

/// Says which probe starts (on stderr), and whether it extends an undecided one.
fn announce_probe(index: usize, load: f64, run: u32) {
    let extension = if run > 1 {
        format!(" (run {run}: extended, undecided)")
    } else {
        String::new()
    };
    eprintln!("probe {}: load {load:.3}{extension} …", index + 1);
}

/// Half the throughput of the calibration run: where a rate search starts. The calibration's
/// step joins `steps`; an interrupted or fruitless calibration ends the command (`Err`).
async fn calibrate_start(
    session: &mut Session,
    plan: &ProbePlan,
    steps: &mut Vec<goodput_core::report::StepReport>,
) -> Result<Result<f64, RunOutcome>> {
    let calibration = calibrate(session, plan).await?;
    let throughput = calibration.step.throughput.requests_per_sec;
    let ended = calibration.outcome.end_reason;
    steps.push(calibration.step);
    let start = calibrated_start(throughput).filter(|_| ended == EndReason::Completed);
    let Some(start) = start else {
        if ended == EndReason::Completed {
            eprintln!("error: the calibration run completed no request; see the report");
        }
        return Ok(Err(calibration.outcome));
    };
    if !session.args.quiet {
        eprintln!(
            "calibration: {throughput:.2} req/s at concurrency {CALIBRATION_CONCURRENCY}; first \
             probe at half of it"
        );
    }
    Ok(Ok(start))
}

/// A short closed-loop run whose throughput places the first rate probe.
async fn calibrate(session: &mut Session, plan: &ProbePlan) -> Result<StepRun> {
    let config = RunConfig {
        slo: Some(plan.criteria.slo.clone()),
        ..calibration_config(&session.config, Some(plan.max_probe_duration))
    };
    if !session.args.quiet {
        eprintln!(
            "calibration: concurrency {CALIBRATION_CONCURRENCY}, {CALIBRATION_REQUESTS} requests …"
        );
    }
    session.run_step(&config, None, None).await
}

/// The outcome recorded when the search ran no step of its own.
pub(crate) fn completed_outcome() -> RunOutcome {
    RunOutcome {
        end_reason: EndReason::Completed,
        records: 0,
        started_at: SystemTime::now(),
        elapsed: Duration::ZERO,
        sink_error: None,
        late_start: None,
    }
}
