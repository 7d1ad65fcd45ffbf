//! Capacity: the highest load at which the queue stays stable and the SLO holds, found by a
//! bracketing-then-bisection search over probes, each long enough for the attainment target
//! it must prove, and reported with its bounds and confidence.
//!
//! The search is driven by [`find_capacity`] with a caller-supplied probe (run one measured
//! step at a load, return its report and compliance), so the same code runs against a live
//! target, the embedded simulator, or the simulator in virtual time. Every caller shapes its
//! probes with [`ProbePlan::around`] and, for a rate search without a given start, places the
//! first probe with the [`calibration`] run.

pub mod calibration;
pub mod early_stopping;
pub mod probe;
pub mod prober;
pub mod search;
pub mod sequential;
pub mod tally;
pub mod watch;

use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use probe::{Criteria, Outcome, Probe};
pub use prober::{ProbePlan, ProbeTiming, Prober};
pub use search::{Conclusion, Search, SearchConfig};

use crate::metrics::aggregate::Compliance;
use crate::report::StepReport;
pub use crate::report::capacity::{CapacityReport, Dimension};

/// What a capacity search was asked (recorded in `run.json`, so `goodput report` can judge
/// the probes again from the journal).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityPlan {
    /// What was searched.
    pub dimension: Dimension,
    /// How.
    pub search: SearchConfig,
    /// What a probe had to show.
    pub criteria: Criteria,
    /// Measured requests per probe.
    pub requests_per_probe: u64,
    /// Accelerators serving the target, when given.
    pub accelerators: Option<u32>,
    /// Steps before the first probe (a calibration run).
    pub first_probe_step: usize,
    /// How long each probe warmed up and ran (absent in manifests older than this field).
    #[serde(default)]
    pub probe_timing: Option<ProbeTiming>,
    /// `goodput capacity --repeats N`: where each search begins (absent for one search); a
    /// search's steps run until the next one's first step. The fields above are the first
    /// search's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub searches: Vec<SearchSpan>,
}

/// Where one search of a repeated capacity search lies in the steps.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SearchSpan {
    /// Its first step (its calibration run, or its first probe).
    pub first_step: usize,
    /// Its first probe's step.
    pub first_probe_step: usize,
    /// The load it started at.
    pub start: f64,
    /// Its calibration's throughput ([`SearchConfig::ceiling`]).
    #[serde(default)]
    pub ceiling: Option<f64>,
}

impl CapacityPlan {
    /// The verdict from the probe steps of a journal (in search order), judged again under
    /// the plan's criteria and replaying the search: consecutive steps at the same load are
    /// the runs of one extended probe, judged together.
    pub fn report_from(&self, steps: &[(f64, &StepReport, &Compliance)]) -> CapacityReport {
        let mut state = Search::new(self.search);
        let mut probes: Vec<Probe> = Vec::new();
        let mut merged: Option<(f64, Compliance, u32)> = None;
        let mut clock = Spending::new(self.search.budget_secs);
        for &(load, step, compliance) in steps {
            let (total, runs) = match merged.take() {
                Some((previous, tally, runs)) if previous == load => {
                    (tally.merged(compliance), runs + 1)
                }
                _ => (compliance.clone(), 1),
            };
            let mut probe = self.criteria.evaluate(probes.len(), load, step, &total);
            probe.runs = runs;
            state.record(load, probe.outcome);
            clock.add(step.interval.last_end_secs);
            probes.push(probe);
            merged = Some((load, total, runs));
        }
        let conclusion = match state.next() {
            Err(conclusion) => conclusion,
            Ok(_) if !clock.may_start(1) => Conclusion::Budget,
            Ok(_) => Conclusion::Aborted,
        };
        let mut report = summarize(
            self.dimension,
            &state,
            &self.criteria,
            self.requests_per_probe,
            conclusion,
            probes,
        );
        report.spent_secs = clock.spent;
        report
            .with_accelerators(self.accelerators)
            .with_first_probe_step(self.first_probe_step)
    }
}

/// Runs of one probe at most (the first and its extensions).
pub const MAX_RUNS: u32 = 3;

/// One run the search asks for: run `run` (1, 2, …) of probe step `index` at `load`, in at
/// most `time_left` of target time (what is left of the search's budget, when it has one).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeRun {
    /// The probe step (its index among the judged runs).
    pub index: usize,
    /// The load.
    pub load: f64,
    /// Which run of the probe: each extension of an undecided probe measures twice as many
    /// requests as the run before.
    pub run: u32,
    /// What is left of the budget: the run schedules no request past it (those in flight
    /// then finish).
    pub time_left: Option<Duration>,
}

/// A probe that could not be run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("probe at load {load} could not run: {message}")]
pub struct ProbeError {
    /// The load.
    pub load: f64,
    /// Why.
    pub message: String,
}

/// The target time a search has spent against its budget (seconds).
#[derive(Debug, Clone, Copy)]
struct Spending {
    budget: Option<f64>,
    spent: f64,
    /// The last run's time.
    last: f64,
}

impl Spending {
    fn new(budget: Option<f64>) -> Self {
        Spending {
            budget,
            spent: 0.0,
            last: 0.0,
        }
    }

    fn add(&mut self, run_secs: f64) {
        self.spent += run_secs;
        self.last = run_secs;
    }

    fn fits(&self, next: f64) -> bool {
        self.budget.is_none_or(|budget| self.spent + next <= budget)
    }

    /// Whether run `run` of a probe may start: an extension while any budget is left, a new
    /// probe only in as much as the last run took (less would cut it before it showed
    /// anything).
    fn may_start(&self, run: u32) -> bool {
        let needed = if run == 1 { self.last } else { 0.0 };
        self.fits(needed) && self.budget.is_none_or(|budget| self.spent < budget)
    }

    /// Whether an undecided probe may be extended: the next run measures twice as many
    /// requests, about twice as long.
    fn may_extend(&self) -> bool {
        self.fits(2.0 * self.last)
    }

    /// What is left of the budget.
    fn time_left(&self) -> Option<Duration> {
        self.budget
            .map(|budget| Duration::from_secs_f64((budget - self.spent).max(0.0)))
    }
}

/// Searches for the capacity: `probe(run)` runs one measured step (run `k` of an undecided
/// probe measures `2^(k−1)` times the requests; none scheduled past the budget) and returns its
/// report and compliance; `on_probe` sees each judged run as it completes. An undecided probe
/// is extended up to [`MAX_RUNS`] runs while the budget allows, its runs judged together; a
/// new probe is started only while as much of the budget is left as the last run took.
/// Returns the verdict and every run's step report (in order).
pub async fn find_capacity<F>(
    dimension: Dimension,
    search: SearchConfig,
    criteria: &Criteria,
    requests_per_probe: u64,
    mut probe: F,
    mut on_probe: impl FnMut(&Probe),
) -> (CapacityReport, Vec<StepReport>)
where
    F: AsyncFnMut(ProbeRun) -> Result<(StepReport, Compliance), ProbeError>,
{
    let mut state = Search::new(search);
    let (mut probes, mut steps): (Vec<Probe>, Vec<StepReport>) = (Vec::new(), Vec::new());
    let mut clock = Spending::new(search.budget_secs);
    let conclusion = 'search: loop {
        let load = match state.next() {
            Ok(load) => load,
            Err(conclusion) => break conclusion,
        };
        let mut merged: Option<Compliance> = None;
        for run in 1..=MAX_RUNS {
            if !clock.may_start(run) {
                break 'search Conclusion::Budget;
            }
            let call = ProbeRun {
                index: probes.len(),
                load,
                run,
                time_left: clock.time_left(),
            };
            let Ok((step, compliance)) = probe(call).await else {
                break 'search Conclusion::Aborted;
            };
            clock.add(step.interval.last_end_secs);
            let total = merged.map_or_else(|| compliance.clone(), |m| m.merged(&compliance));
            let mut judged = criteria.evaluate(probes.len(), load, &step, &total);
            judged.runs = run;
            state.record(load, judged.outcome);
            on_probe(&judged);
            let undecided = judged.outcome == Outcome::Inconclusive;
            probes.push(judged);
            steps.push(step);
            if !undecided || !clock.may_extend() {
                break;
            }
            merged = Some(total);
        }
    };
    let mut report = summarize(
        dimension,
        &state,
        criteria,
        requests_per_probe,
        conclusion,
        probes,
    );
    report.spent_secs = clock.spent;
    (report, steps)
}

fn summarize(
    dimension: Dimension,
    state: &Search,
    criteria: &Criteria,
    requests_per_probe: u64,
    conclusion: Conclusion,
    probes: Vec<Probe>,
) -> CapacityReport {
    let lower = state.lower();
    let at_capacity = lower.and_then(|load| {
        probes
            .iter()
            .find(|p| p.load == load && p.outcome == Outcome::Pass)
    });
    let distserve = probes
        .iter()
        .filter(|p| {
            p.checks
                .iter()
                .all(|c| c.attained.is_some_and(|a| a >= c.target))
        })
        .filter_map(|p| {
            if dimension == Dimension::Rate {
                Some(p.load)
            } else {
                p.offered_requests_per_sec
            }
        })
        .reduce(f64::max);
    CapacityReport {
        dimension,
        max_sustainable_rate_per_sec: lower.filter(|_| dimension == Dimension::Rate),
        max_sustainable_concurrency: lower
            .filter(|_| dimension == Dimension::Concurrency)
            .map(|c| c as u32),
        lower_bound: lower,
        upper_bound: state.upper(),
        undecided_loads: state.undecided(),
        spent_secs: 0.0,
        slo: criteria.slo.to_string(),
        attainment_target: criteria.attainment,
        confidence: criteria.confidence,
        requests_per_probe,
        conclusion,
        goodput_at_capacity_per_sec: at_capacity.and_then(|p| p.goodput_requests_per_sec),
        distserve_goodput_per_sec: distserve,
        accelerators: None,
        per_accelerator: None,
        probes,
        first_probe_step: 0,
    }
}

impl CapacityReport {
    /// Sets where the probes start in the report's steps.
    pub fn with_first_probe_step(mut self, first_probe_step: usize) -> Self {
        self.first_probe_step = first_probe_step;
        self
    }

    /// Sets the accelerator count and the capacity per accelerator.
    pub fn with_accelerators(mut self, accelerators: Option<u32>) -> Self {
        self.accelerators = accelerators;
        self.per_accelerator = accelerators
            .filter(|n| *n > 0)
            .and_then(|n| Some(self.lower_bound? / f64::from(n)));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_budget_starts_probes_while_the_last_run_fits_and_hands_on_what_is_left() {
        let mut clock = Spending::new(Some(10.0));
        assert!(clock.may_start(1), "the first probe starts");
        assert_eq!(clock.time_left(), Some(Duration::from_secs(10)));
        clock.add(4.0);
        assert!(
            clock.may_start(1) && !clock.may_extend(),
            "an extension of twice 4 s does not fit in 6 s"
        );
        assert_eq!(clock.time_left(), Some(Duration::from_secs(6)));
        clock.add(4.0);
        assert!(!clock.may_start(1), "2 s left: a 4 s run would be cut");
        assert!(clock.may_start(2), "an extension runs in what is left");
        clock.add(2.0);
        assert!(!clock.may_start(2), "nothing left");
        assert_eq!(clock.time_left(), Some(Duration::ZERO));
        let unbounded = Spending::new(None);
        assert!(unbounded.may_start(1) && unbounded.may_extend());
        assert_eq!(unbounded.time_left(), None);
    }
}
