//! `goodput capacity`: the highest load at which the queue stays stable and the SLO holds —
//! a short calibration (unless --start), then probes bracketed and bisected, each long enough
//! to prove the attainment target and ended early once it is refuted; every request
//! journaled with its step index, the verdict with its bounds and confidence; with `--repeats
//! N`, N independent searches one after the other and the capacity across them.

use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::Result;
use goodput_core::config::RunConfig;
use goodput_core::decide::capacity::calibration::{
    CALIBRATION_CONCURRENCY, CALIBRATION_REQUESTS, SearchStart, calibrated_start,
    calibration_config, drop_searches_calibration_warnings,
};
use goodput_core::decide::capacity::{
    CapacityPlan, CapacityReport, Dimension, Probe, ProbeError, ProbePlan, ProbeRun, ProbeTiming,
    SearchConfig, SearchSpan, find_capacity,
};
use goodput_core::decide::repeats;
use goodput_core::report::Report;
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
        ceiling: None,
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
    let mut session = Session::open(options.run.clone(), command_line)
        .await?
        .coordinated();
    let (report, outcome) = search_all(&mut session, &options).await?;
    session.finish(&report, &outcome)
}

/// Every search of `options` (`--repeats`) on the session, one after the other until one
/// ends otherwise than completed: the report (its capacity and repeats sections concluded)
/// and the last outcome.
pub(crate) async fn search_all(
    session: &mut Session,
    options: &CapacityOptions,
) -> Result<(Report, RunOutcome)> {
    let dimension = options.search.dimension;
    let (mut steps, mut found, mut last) = (Vec::new(), Vec::new(), None);
    for index in 0..options.repeats.max(1) {
        let first_step = steps.len();
        let searched = search_once(session, options, index, &mut steps).await?;
        let outcome = match searched {
            Ok((capacity, outcome)) => {
                found.push((first_step, steps.len() - first_step, capacity));
                outcome
            }
            Err(outcome) => outcome,
        };
        let ended = outcome.end_reason;
        last = Some(outcome);
        if ended != EndReason::Completed || found.len() <= index as usize {
            break;
        }
    }
    let outcome = last.unwrap_or_else(completed_outcome);
    let mut report = session.report(steps, outcome.end_reason);
    conclude_searches(&mut report, dimension, found);
    Ok((report, outcome))
}

/// Search `index` (from 0) on the session: its probes' arrivals from seed + index (its prompts
/// further along, as every later step's), its own calibration unless --start; its steps join
/// `steps`. Its verdict (probe steps numbered in the report) and last outcome, or the outcome
/// of a calibration that ended the command (`Err`).
async fn search_once(
    session: &mut Session,
    options: &CapacityOptions,
    index: u32,
    steps: &mut Vec<goodput_core::report::StepReport>,
) -> Result<Result<(CapacityReport, RunOutcome), RunOutcome>> {
    let (dimension, quiet) = (options.search.dimension, options.run.output.quiet);
    if !quiet && options.repeats > 1 {
        eprintln!("search {}/{}", index + 1, options.repeats);
    }
    let first_step = steps.len();
    let base = repeats::run_config(&session.config, index);
    // Probes take their arrival process and client cap from the session's configuration (so
    // --arrival and --max-concurrency shape every probe).
    let plan = probe_plan(&options.search, base.clone());
    let (start, ceiling) = match SearchStart::choose(options.search.start, dimension) {
        SearchStart::At(start) => (start, None),
        SearchStart::Calibrate => match calibrate_start(session, &plan, &base, steps).await? {
            Ok((start, ceiling)) => (start, Some(ceiling)),
            Err(outcome) => return Ok(Err(outcome)),
        },
    };
    let bounds = live_bounds(options);
    let search = SearchConfig {
        start: start.clamp(bounds.min, bounds.max),
        ceiling,
        ..bounds
    };
    let first_probe_step = steps.len();
    let span = SearchSpan {
        first_step,
        first_probe_step,
        start: search.start,
        ceiling: search.ceiling,
    };
    record_search(session, options, &plan, search, span);
    session.write_manifest()?;
    let (capacity, probe_steps, aborted, outcome) =
        search_live(session, &plan, search, quiet).await?;
    steps.extend(probe_steps);
    steps.extend(aborted);
    let capacity = capacity
        .with_accelerators(options.run.server_side.accelerators)
        .with_first_probe_step(first_probe_step);
    Ok(Ok((capacity, outcome)))
}

/// Records search `span` in the session's capacity plan (the first search's settings make the
/// plan; with --repeats each search's span is listed, so the journal rebuilds each apart).
fn record_search(
    session: &mut Session,
    options: &CapacityOptions,
    plan: &ProbePlan,
    search: SearchConfig,
    span: SearchSpan,
) {
    if session.capacity_plan.is_none() {
        session.capacity_plan = Some(CapacityPlan {
            dimension: options.search.dimension,
            search,
            criteria: options.search.criteria.clone(),
            requests_per_probe: options.search.measured_requests,
            accelerators: options.run.server_side.accelerators,
            first_probe_step: span.first_probe_step,
            probe_timing: Some(plan.timing()),
            searches: Vec::new(),
        });
    }
    if let Some(recorded) = session.capacity_plan.as_mut()
        && options.repeats > 1
    {
        recorded.searches.push(span);
    }
}

/// The report's `capacity` (the first search's verdict) and, with several searches, its
/// `repeats` (each search's capacity and the capacity across them); the warnings about every
/// search's calibration step dropped. `found`: each search's first step, steps and verdict.
pub(crate) fn conclude_searches(
    report: &mut Report,
    dimension: Dimension,
    found: Vec<(usize, usize, CapacityReport)>,
) {
    let calibrations: Vec<(usize, usize)> = found
        .iter()
        .map(|(first, _, capacity)| (*first, capacity.first_probe_step))
        .collect();
    drop_searches_calibration_warnings(&mut report.warnings, dimension, &calibrations);
    if found.len() > 1 {
        let refs: Vec<(usize, usize, &CapacityReport)> =
            found.iter().map(|(a, b, c)| (*a, *b, c)).collect();
        report.repeats = Some(repeats::searches(&refs));
    }
    report.capacity = found.into_iter().next().map(|(_, _, capacity)| capacity);
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

/// Just under the throughput of the calibration run: where a rate search starts, and that
/// throughput (the search's ceiling). The calibration's step joins `steps`; an interrupted or
/// fruitless calibration ends the command (`Err`).
async fn calibrate_start(
    session: &mut Session,
    plan: &ProbePlan,
    base: &RunConfig,
    steps: &mut Vec<goodput_core::report::StepReport>,
) -> Result<Result<(f64, f64), RunOutcome>> {
    let calibration = calibrate(session, plan, base).await?;
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
             probe just under it"
        );
    }
    Ok(Ok((start, throughput)))
}

/// A short closed-loop run around `base` whose throughput places the first rate probe.
async fn calibrate(session: &mut Session, plan: &ProbePlan, base: &RunConfig) -> Result<StepRun> {
    let config = RunConfig {
        slo: Some(plan.criteria.slo.clone()),
        ..calibration_config(base, Some(plan.max_probe_duration))
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
