//! `goodput capacity`: the highest load at which the queue stays stable and the SLO holds —
//! a short calibration (unless --start), then probes bracketed and bisected, each long enough
//! to prove the attainment target and ended early once it is refuted; every request
//! journaled with its step index, the verdict with its bounds and confidence.

use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::Result;
use goodput_core::config::RunConfig;
use goodput_core::decide::capacity::calibration::{
    CALIBRATION_CONCURRENCY, CALIBRATION_REQUESTS, SearchStart, calibrated_start,
    calibration_config, drop_calibration_warnings,
};
use goodput_core::decide::capacity::{
    CapacityPlan, Dimension, Probe, ProbeError, ProbePlan, ProbeRun, ProbeTiming, SearchConfig,
    find_capacity,
};
use goodput_core::runner::{EndReason, RunOutcome};

use crate::options::capacity::{CapacityOptions, SearchOptions};
use crate::wiring::session::{Session, StepRun};

/// Runs `goodput capacity`.
pub(crate) async fn run(options: CapacityOptions, command_line: Vec<String>) -> Result<ExitCode> {
    let criteria = &options.search.criteria;
    let measured = options.search.measured_requests;
    if !options.run.output.quiet {
        eprintln!(
            "capacity search: {} at {:.1} % attainment, {:.0} % confidence: {measured} measured \
             requests per probe",
            criteria.slo,
            criteria.attainment * 100.0,
            criteria.confidence * 100.0
        );
    }
    if options.run.virtual_time {
        return crate::virtual_target::capacity::run(options, command_line).await;
    }
    live(options, command_line).await
}

/// The search bounds and tolerance from `start`, and at most `budget` of target time.
pub(crate) fn search_config(
    search: &SearchOptions,
    start: f64,
    budget: Option<Duration>,
) -> SearchConfig {
    let integer = search.dimension == Dimension::Concurrency;
    let min = if integer {
        search.min_load.max(1.0)
    } else {
        search.min_load
    };
    SearchConfig {
        start: start.clamp(min, search.max_load),
        min,
        max: search.max_load,
        tolerance: search.tolerance,
        max_probes: search.max_probes,
        integer,
        budget_secs: budget.map(|b| b.as_secs_f64()),
    }
}

/// How probes are shaped around `base` (arrival process and client cap from --arrival and
/// --max-concurrency; timing from --probe-warmup, --probe-min-duration and
/// --max-probe-duration), judged by the search's criteria.
pub(crate) fn probe_plan(search: &SearchOptions, base: RunConfig) -> ProbePlan {
    let timing = ProbeTiming {
        warmup: search.probe_warmup,
        min_duration: search.probe_min_duration,
        max_duration: search.max_probe_duration,
    };
    let (criteria, measured) = (search.criteria.clone(), search.measured_requests);
    ProbePlan::around(base, search.dimension, criteria, measured, timing)
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
fn live_bounds(options: &CapacityOptions) -> SearchConfig {
    let start = options.search.start.unwrap_or(options.search.min_load);
    search_config(&options.search, start, options.budget)
}

async fn live(options: CapacityOptions, command_line: Vec<String>) -> Result<ExitCode> {
    let dimension = options.search.dimension;
    let accelerators = options.run.server_side.accelerators;
    let quiet = options.run.output.quiet;
    let bounds = live_bounds(&options);
    let (criteria, measured) = (
        options.search.criteria.clone(),
        options.search.measured_requests,
    );
    let mut session = Session::open(options.run, command_line)
        .await?
        .coordinated();
    // Probes take their arrival process and client cap from the session's configuration (so
    // --arrival and --max-concurrency shape every probe).
    let plan = probe_plan(&options.search, session.config.clone());
    let mut steps = Vec::new();
    let start = match SearchStart::choose(options.search.start, dimension) {
        SearchStart::At(start) => start,
        SearchStart::Calibrate => match calibrate_start(&mut session, &plan, &mut steps).await? {
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
    if !session.options.output.quiet {
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
    if !session.options.output.quiet {
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
