//! Tune: server configurations compared under one SLO. Each configuration's report (a capacity
//! search or a load sweep) gives its figures at its operating point ([`figures`]); across the
//! configurations ([`conclude`]) the ranking by goodput per accelerator, the Pareto front of
//! good output tokens per second per accelerator against tokens per second per user, and the best
//! configuration with its margin over the runner-up — judged by Welch's t-test across repeated
//! measurements ([`super::repeats::welch`]) when there are any.

use super::repeats;
use crate::report::capacity::{Dimension, Outcome};
use crate::report::sweep::SweepDimension;
use crate::report::tune::{
    TuneBest, TuneConfiguration, TuneFigures, TuneMeasure, TuneMode, TuneReport, TuneServer,
    TuneVerification,
};
use crate::report::{Report, StepReport};

/// Significance level of the best configuration's margin.
pub const ALPHA: f64 = 0.05;

/// What the figure configurations are ranked by.
pub const RANKED_BY: &str = "goodput per accelerator (requests per second that met the SLO at \
     the operating point, divided by the configuration's accelerators)";

/// How a configuration's figures are costed and judged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Judging {
    /// Capacity search or sweep.
    pub measure: TuneMeasure,
    /// Fraction of requests that must meet the per-request thresholds (a sweep level's test).
    pub attainment: f64,
    /// Accelerators serving the configuration.
    pub accelerators: u32,
    /// Price of one accelerator-hour.
    pub gpu_hour_cost: Option<f64>,
}

/// The figures of one configuration's `report` at its operating point.
pub fn figures(report: &Report, judging: Judging) -> TuneFigures {
    let (mut figures, runs) = match judging.measure {
        TuneMeasure::Capacity => capacity_point(report),
        TuneMeasure::Sweep => sweep_point(report, judging.attainment),
    };
    let accelerators = f64::from(judging.accelerators.max(1));
    if let Some(step) = figures.step.and_then(|i| report.steps.get(i)) {
        at_step(&mut figures, step, accelerators, judging.gpu_hour_cost);
    }
    figures.rank_runs = runs.iter().map(|g| g / accelerators).collect();
    figures.rank_value = match figures.rank_runs.is_empty() {
        true => figures.goodput_per_accelerator,
        false => Some(repeats::moments(&figures.rank_runs).0),
    };
    for step in &report.steps {
        figures.requests_sent += step.requests.sent;
        figures.requests_failed += step.requests.failed;
    }
    figures
}

/// The figures of the operating point's `step`.
fn at_step(figures: &mut TuneFigures, step: &StepReport, accelerators: f64, price: Option<f64>) {
    let output = step.throughput.output_tokens_per_sec;
    figures.requests_per_sec = Some(step.throughput.requests_per_sec);
    figures.goodput_per_sec = step.goodput.requests_per_sec;
    figures.goodput_per_accelerator = step.goodput.requests_per_sec.map(|g| g / accelerators);
    figures.output_tokens_per_sec = Some(output);
    figures.output_tokens_per_sec_per_accelerator = Some(output / accelerators);
    figures.good_output_tokens_per_sec_per_accelerator =
        step.goodput.output_tokens_per_sec.map(|t| t / accelerators);
    figures.tpot_p50_ms = step.latency_ms.tpot.p50;
    figures.ttft_p99_ms = step.latency_ms.ttft.p99;
    figures.tokens_per_sec_per_user = step
        .latency_ms
        .tpot
        .p50
        .filter(|ms| *ms > 0.0)
        .map(|ms| 1000.0 / ms);
    figures.cost_per_million_output_tokens = price
        .filter(|_| output > 0.0)
        .map(|price| accelerators * price / 3600.0 / output * 1e6);
}

/// The load a step ran at (its rate, or its concurrency).
fn load_of(step: &StepReport) -> Option<f64> {
    step.load
        .rate_per_sec
        .or(step.load.concurrency.map(f64::from))
}

/// A capacity search's operating point: the passing probe at capacity; with repeated
/// searches, each search's goodput at its own capacity.
fn capacity_point(report: &Report) -> (TuneFigures, Vec<f64>) {
    let Some(capacity) = &report.capacity else {
        return (nothing("no capacity search"), Vec::new());
    };
    let step = capacity.lower_bound.and_then(|at| {
        capacity
            .probes
            .iter()
            .rposition(|p| p.load == at && p.outcome == Outcome::Pass)
            .map(|i| capacity.first_probe_step + i)
    });
    let figures = TuneFigures {
        capacity: capacity.lower_bound,
        load_unit: match capacity.dimension {
            Dimension::Rate => "req/s".into(),
            Dimension::Concurrency => "concurrency".into(),
        },
        upper_bound: capacity.upper_bound,
        conclusion: serde_json::to_value(capacity.conclusion)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default(),
        step,
        ..TuneFigures::default()
    };
    let searches = report.repeats.as_ref().and_then(|r| r.capacity.as_ref());
    let runs = searches.map_or_else(Vec::new, |repeated| {
        repeated
            .searches
            .iter()
            .filter_map(|search| {
                let at = search.lower_bound?;
                let end = (search.first_step + search.steps).min(report.steps.len());
                let probes = report.steps.get(search.first_probe_step..end)?;
                let step = probes.iter().rev().find(|s| load_of(s) == Some(at))?;
                step.goodput.requests_per_sec
            })
            .collect()
    });
    (figures, runs)
}

/// Whether a sweep step met the SLO: stable, the attainment target reached and every
/// percentile objective passed.
fn met(step: &StepReport, attainment: f64) -> bool {
    step.stability.stable
        && step
            .goodput
            .attained_fraction
            .is_some_and(|a| a >= attainment)
        && step.goodput.objectives_passed != Some(false)
}

/// A sweep's operating point: the level of most goodput among those whose every run met the
/// SLO; with repeated rounds, that level's goodput in each round.
fn sweep_point(report: &Report, attainment: f64) -> (TuneFigures, Vec<f64>) {
    let Some(sweep) = &report.sweep else {
        return (nothing("no sweep"), Vec::new());
    };
    let levels = sweep.loads.len().max(1);
    let goodput = |i: usize| report.steps[i].goodput.requests_per_sec.unwrap_or(0.0);
    let runs_of = |level: usize| {
        (level..report.steps.len())
            .step_by(levels)
            .collect::<Vec<_>>()
    };
    let passing: Vec<(usize, Vec<usize>)> = (0..sweep.loads.len())
        .map(|level| (level, runs_of(level)))
        .filter(|(_, runs)| {
            !runs.is_empty() && runs.iter().all(|&i| met(&report.steps[i], attainment))
        })
        .collect();
    let mean = |runs: &[usize]| runs.iter().map(|&i| goodput(i)).sum::<f64>() / runs.len() as f64;
    let best = passing
        .iter()
        .max_by(|a, b| mean(&a.1).total_cmp(&mean(&b.1)));
    let conclusion = match best {
        Some((level, _)) => format!(
            "level {} of {}: the most goodput of the {} levels that met the SLO",
            level + 1,
            sweep.loads.len(),
            passing.len()
        ),
        None => format!("none of the {} levels met the SLO", sweep.loads.len()),
    };
    let figures = TuneFigures {
        capacity: best.map(|(level, _)| sweep.loads[*level]),
        load_unit: match sweep.dimension {
            SweepDimension::Rate => "req/s".into(),
            SweepDimension::Concurrency => "concurrency".into(),
            SweepDimension::Batch => "batch".into(),
        },
        conclusion,
        step: best.map(|(_, runs)| runs[0]),
        ..TuneFigures::default()
    };
    let runs = match (best, sweep.repeats) {
        (Some((_, runs)), Some(_)) => runs.iter().map(|&i| goodput(i)).collect(),
        _ => Vec::new(),
    };
    (figures, runs)
}

/// Figures of a report without the section they need.
fn nothing(why: &str) -> TuneFigures {
    TuneFigures {
        load_unit: String::new(),
        conclusion: why.to_string(),
        ..TuneFigures::default()
    }
}

/// What a tune was, besides its configurations.
#[derive(Debug, Clone, PartialEq)]
pub struct TunePlan {
    /// Live or virtual time.
    pub mode: TuneMode,
    /// Capacity search or sweep.
    pub measure: TuneMeasure,
    /// The SLO, in flag syntax.
    pub slo: String,
    /// The attainment target.
    pub attainment: f64,
    /// How accelerators were counted.
    pub accelerators_basis: String,
    /// `--gpu-hour-cost`.
    pub gpu_hour_cost: Option<f64>,
    /// `--repeats`.
    pub repeats: u32,
    /// How the servers were run.
    pub server: Option<TuneServer>,
}

/// The tune section of `configurations` (their figures filled by [`figures`]): ranks, the
/// Pareto front, the best configuration, the verification's ratios.
pub fn conclude(
    plan: TunePlan,
    mut configurations: Vec<TuneConfiguration>,
    mut verification: Vec<TuneVerification>,
) -> TuneReport {
    let order = ranking(&configurations);
    for (rank, &i) in order.iter().enumerate() {
        configurations[i].rank = Some(rank + 1);
    }
    let front = pareto_front(&configurations);
    for &i in &front {
        configurations[i].on_front = true;
    }
    let best = best(&configurations, &order, plan.repeats);
    for check in &mut verification {
        let predicted = configurations.get(check.configuration);
        if let Some(rank) = predicted.and_then(|c| c.rank) {
            check.predicted_rank = rank;
        }
        let predicted = predicted.and_then(rank_value);
        let measured = check.measured.figures.as_ref().and_then(|f| f.rank_value);
        check.ratio = predicted
            .zip(measured)
            .filter(|(p, _)| *p > 0.0)
            .map(|(p, m)| m / p);
    }
    let conclusion = conclusion(&configurations, best.as_ref(), front.len());
    TuneReport {
        mode: plan.mode,
        measure: plan.measure,
        slo: plan.slo,
        attainment_target: plan.attainment,
        ranked_by: RANKED_BY.to_string(),
        accelerators_basis: plan.accelerators_basis,
        gpu_hour_cost: plan.gpu_hour_cost,
        repeats: plan.repeats,
        server: plan.server,
        configurations,
        pareto_front: front,
        best,
        verification,
        conclusion,
    }
}

/// A configuration's rank value, when it met the SLO.
fn rank_value(configuration: &TuneConfiguration) -> Option<f64> {
    let figures = configuration.run.figures.as_ref()?;
    figures.rank_value.filter(|v| *v > 0.0)
}

/// The configurations that met the SLO, best first (ties in grid order).
pub fn ranking(configurations: &[TuneConfiguration]) -> Vec<usize> {
    let mut ranked: Vec<(usize, f64)> = configurations
        .iter()
        .enumerate()
        .filter_map(|(i, c)| rank_value(c).map(|v| (i, v)))
        .collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked.into_iter().map(|(i, _)| i).collect()
}

/// A configuration's point on the front's axes: (tokens/s per user, good output tokens/s per
/// accelerator), when it met the SLO and both are known.
fn point(configuration: &TuneConfiguration) -> Option<(f64, f64)> {
    rank_value(configuration)?;
    let figures = configuration.run.figures.as_ref()?;
    Some((
        figures.tokens_per_sec_per_user?,
        figures.good_output_tokens_per_sec_per_accelerator?,
    ))
}

/// The configurations no other dominates (at least as good on both axes, better on one), by
/// tokens per second per user.
pub fn pareto_front(configurations: &[TuneConfiguration]) -> Vec<usize> {
    let points: Vec<(usize, (f64, f64))> = configurations
        .iter()
        .enumerate()
        .filter_map(|(i, c)| point(c).map(|p| (i, p)))
        .collect();
    let dominated = |(x, y): (f64, f64)| {
        points
            .iter()
            .any(|(_, (a, b))| *a >= x && *b >= y && (*a > x || *b > y))
    };
    let mut front: Vec<(usize, (f64, f64))> = points
        .iter()
        .copied()
        .filter(|(_, p)| !dominated(*p))
        .collect();
    front.sort_by(|a, b| a.1.0.total_cmp(&b.1.0).then(a.0.cmp(&b.0)));
    front.into_iter().map(|(i, _)| i).collect()
}

/// The best configuration, its margin over the runner-up and that margin's significance.
fn best(configurations: &[TuneConfiguration], order: &[usize], repeats: u32) -> Option<TuneBest> {
    let &first = order.first()?;
    let value = rank_value(&configurations[first])?;
    let runner_up = order.get(1).copied();
    let runs = |i: usize| {
        configurations[i]
            .run
            .figures
            .as_ref()
            .map_or_else(Vec::new, |f| f.rank_runs.clone())
    };
    let (p_value, significance) = match runner_up {
        None => (None, "not tested: no runner-up met the SLO".to_string()),
        Some(_) if repeats < 2 => (None, "not tested: one run each".to_string()),
        Some(second) => match repeats::welch(&runs(first), &runs(second)) {
            Some(p) => (
                Some(p),
                significance(p, runs(first).len(), runs(second).len()),
            ),
            None => (
                None,
                "not tested: fewer than two runs of one of them met the SLO".to_string(),
            ),
        },
    };
    Some(TuneBest {
        configuration: first,
        name: configurations[first].name.clone(),
        rank_value: value,
        runner_up,
        margin: runner_up
            .and_then(|i| rank_value(&configurations[i]))
            .map(|second| value / second - 1.0),
        p_value,
        significant: p_value.map(|p| p < ALPHA),
        significance,
    })
}

/// "significant: p = 0.003 (Welch's t-test over 3 and 3 runs)".
fn significance(p: f64, a: usize, b: usize) -> String {
    let verdict = if p < ALPHA {
        "significant"
    } else {
        "not significant"
    };
    format!(
        "{verdict} at {:.0} %: p = {p:.3} (Welch's t-test over {a} and {b} runs)",
        ALPHA * 100.0
    )
}

/// The conclusion in one sentence.
fn conclusion(
    configurations: &[TuneConfiguration],
    best: Option<&TuneBest>,
    front: usize,
) -> String {
    let total = configurations.len();
    let failed = configurations
        .iter()
        .filter(|c| c.run.failure.is_some())
        .count();
    let met = configurations
        .iter()
        .filter(|c| rank_value(c).is_some())
        .count();
    let tail = format!(
        "{met} of {total} configurations met the SLO, {failed} failed; {front} on the Pareto front"
    );
    let Some(best) = best else {
        return format!("no configuration met the SLO ({tail})");
    };
    let margin = match (best.runner_up, best.margin) {
        (Some(second), Some(margin)) => format!(
            ", {:.1} % above the runner-up {} ({})",
            margin * 100.0,
            configurations[second].name,
            best.significance
        ),
        _ => String::new(),
    };
    format!(
        "best: {} at {:.3} good req/s per accelerator{margin}; {tail}",
        best.name, best.rank_value
    )
}

#[cfg(test)]
#[path = "tune_tests.rs"]
mod tests;
