//! One probe of a capacity search: a measured step at one load level, judged on stability and
//! on every attainment target of the SLO — ended early only on the anytime-valid sequential
//! test's verdict ([`super::sequential`]), otherwise judged at its planned length by the
//! fixed-sample binomial test ([`super::early_stopping`]).

use serde::{Deserialize, Serialize};

use super::MAX_RUNS;
use super::early_stopping::{Verdict, judge, min_requests};
use super::sequential::verdict;
use crate::metrics::aggregate::Compliance;
use crate::metrics::slo::Slo;
use crate::metrics::stability::Verdict as Stability;
use crate::report::StepReport;
pub use crate::report::capacity::{Check, Outcome, Probe};

/// The largest share of a probe's error budget an early verdict may spend: however low the
/// confidence asked (a median search asks 50 %), a probe ends before its planned length only on
/// evidence an anytime-valid test holds at 95 % — checked after every request, a weaker test
/// ends probes on the first runs of luck (at 50 % its likelihood ratio need only reach 2).
pub const EARLY_ERROR_CAP: f64 = 0.05;

/// When a verdict is looked at: while a probe runs (after each request, the sequential test
/// alone) or once it is over (that test's verdict where it has one, else the fixed-sample
/// test's at the planned length).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Look {
    /// After a request, to end the probe early.
    Running,
    /// On the probe's tallies once it is over.
    Final,
}

/// What a probe must show to pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Criteria {
    /// Per-request thresholds (judged jointly against `attainment`) and percentile
    /// objectives (each judged against its own percentile).
    pub slo: Slo,
    /// Fraction of requests that must meet every per-request threshold (e.g. 0.99).
    pub attainment: f64,
    /// Confidence of every verdict (e.g. 0.99).
    pub confidence: f64,
}

impl Criteria {
    /// Judges a measured step.
    pub fn evaluate(
        &self,
        index: usize,
        load: f64,
        step: &StepReport,
        compliance: &Compliance,
    ) -> Probe {
        let checks = self.checks(compliance);
        let stability = step.stability.verdict;
        let stable = stability == Stability::Stable;
        let refuted: Vec<&Check> = checks
            .iter()
            .filter(|c| c.verdict == Verdict::Refuted)
            .collect();
        let unproven: Vec<&Check> = checks
            .iter()
            .filter(|c| c.verdict == Verdict::Inconclusive)
            .collect();
        let (outcome, reason) = if stability == Stability::Unstable {
            (
                Outcome::Fail,
                format!("unstable: {}", step.stability.reason),
            )
        } else if !refuted.is_empty() {
            (Outcome::Fail, format!("refuted: {}", describe(&refuted)))
        } else if stability == Stability::Inconclusive {
            (
                Outcome::Inconclusive,
                format!("stability not judged: {}", step.stability.reason),
            )
        } else if !unproven.is_empty() {
            (
                Outcome::Inconclusive,
                format!(
                    "not proven with {} requests: {}",
                    compliance.measured,
                    describe(&unproven)
                ),
            )
        } else {
            (Outcome::Pass, "stable, every target proven".to_string())
        };
        Probe {
            index,
            load,
            offered_requests_per_sec: step.throughput.offered_requests_per_sec,
            requests_per_sec: step.throughput.requests_per_sec,
            goodput_requests_per_sec: step.goodput.requests_per_sec,
            measured: compliance.measured,
            decided_after: compliance.decided_after,
            fixed_sample_minimum: self.fixed_sample_minimum(),
            runs: 1,
            stable,
            checks,
            outcome,
            reason,
        }
    }

    /// The fewest samples any fixed-sample test at the criteria's confidence could prove the
    /// strictest target with (no miss among them: 459 at 99 %/99 %).
    pub fn fixed_sample_minimum(&self) -> Option<u64> {
        let thresholds = (!self.slo.thresholds.is_empty()).then_some(self.attainment);
        let objectives = self.slo.objectives.iter().map(|o| o.percentile / 100.0);
        thresholds
            .into_iter()
            .chain(objectives)
            .map(|target| min_requests(0, target, self.confidence))
            .filter(|n| *n != u64::MAX)
            .max()
    }

    /// The error budget of the sequential test in each run of a probe: half the probe's
    /// (at most [`EARLY_ERROR_CAP`]), shared by its up to [`MAX_RUNS`] runs.
    pub fn running_error(&self) -> f64 {
        ((1.0 - self.confidence) / 2.0).min(EARLY_ERROR_CAP) / f64::from(MAX_RUNS)
    }

    /// The error budget of the fixed-sample test at the end of each run: the rest of the
    /// probe's, shared by its runs (Bonferroni), so a probe's verdict errs with at most
    /// `1 − confidence` whichever test gave it and however many runs it took.
    pub fn final_error(&self) -> f64 {
        let budget = 1.0 - self.confidence;
        (budget - self.running_error() * f64::from(MAX_RUNS)) / f64::from(MAX_RUNS)
    }

    /// One check for the joint per-request thresholds, one per percentile objective, judged
    /// once the probe is over ([`Look::Final`]).
    pub fn checks(&self, compliance: &Compliance) -> Vec<Check> {
        self.checks_at(compliance, Look::Final)
    }

    /// The checks of `compliance` as looked at `look`.
    pub fn checks_at(&self, compliance: &Compliance, look: Look) -> Vec<Check> {
        let mut checks = Vec::new();
        if !self.slo.thresholds.is_empty() {
            let thresholds = Slo {
                thresholds: self.slo.thresholds.clone(),
                objectives: Vec::new(),
            };
            let misses = compliance.measured - compliance.compliant.min(compliance.measured);
            checks.push(self.check(
                thresholds.to_string(),
                self.attainment,
                (compliance.measured, misses),
                (compliance.threshold_dispersion, look),
            ));
        }
        for tally in &compliance.objectives {
            let objective = Slo {
                thresholds: Vec::new(),
                objectives: vec![tally.objective],
            };
            let target = tally.objective.percentile / 100.0;
            checks.push(self.check(
                objective.to_string(),
                target,
                (tally.samples, tally.misses),
                (tally.dispersion, look),
            ));
        }
        checks
    }

    /// The verdict on the effective sample: `samples / dispersion` with `misses / dispersion`,
    /// since clustered misses carry less evidence than independent ones.
    fn check(
        &self,
        name: String,
        target: f64,
        (samples, misses): (u64, u64),
        (dispersion, look): (f64, Look),
    ) -> Check {
        let dispersion = dispersion.max(1.0);
        let effective = (samples as f64 / dispersion).floor() as u64;
        let effective_misses = (misses as f64 / dispersion).round() as u64;
        Check {
            name,
            target,
            samples,
            misses,
            dispersion,
            effective_samples: effective,
            attained: (samples > 0).then(|| 1.0 - misses as f64 / samples as f64),
            verdict: self.verdict(effective, effective_misses.min(effective), target, look),
        }
    }

    /// The sequential test's verdict at its budget; once the probe is over, where it has
    /// none, the fixed-sample test's at the rest of the budget.
    fn verdict(&self, samples: u64, misses: u64, target: f64, look: Look) -> Verdict {
        let running = verdict(samples, misses, target, 1.0 - self.running_error());
        match look {
            Look::Final if running == Verdict::Inconclusive => {
                judge(samples, misses, target, 1.0 - self.final_error())
            }
            _ => running,
        }
    }
}

fn describe(checks: &[&Check]) -> String {
    let parts: Vec<String> = checks
        .iter()
        .map(|c| {
            let attained = c
                .attained
                .map_or("-".to_string(), |a| format!("{:.2} %", a * 100.0));
            format!(
                "{} attained {attained} of {} (target {:.2} %)",
                c.name,
                c.samples,
                c.target * 100.0
            )
        })
        .collect();
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn criteria(attainment: f64, confidence: f64) -> Criteria {
        Criteria {
            slo: Slo::parse("e2e=2s").unwrap_or_default(),
            attainment,
            confidence,
        }
    }

    /// `n` measured requests, `misses` of them missing, independent.
    fn tally(n: u64, misses: u64) -> Compliance {
        Compliance {
            measured: n,
            compliant: n - misses,
            threshold_dispersion: 1.0,
            objectives: Vec::new(),
            decided_after: None,
        }
    }

    fn verdict(criteria: &Criteria, (n, misses): (u64, u64), look: Look) -> Verdict {
        criteria.checks_at(&tally(n, misses), look)[0].verdict
    }

    #[test]
    fn the_two_tests_share_the_error_budget_over_three_runs() {
        for (confidence, running) in [(0.99, 0.005), (0.95, 0.025), (0.5, 0.05), (0.2, 0.05)] {
            let c = criteria(0.9, confidence);
            let runs = f64::from(MAX_RUNS);
            assert!(
                (c.running_error() * runs - running).abs() < 1e-12,
                "{confidence}"
            );
            let spent = (c.running_error() + c.final_error()) * runs;
            assert!((spent - (1.0 - confidence)).abs() < 1e-12, "{confidence}");
        }
    }

    #[test]
    fn a_median_search_ends_a_probe_early_only_on_strong_evidence() {
        let median = criteria(0.5, 0.5);
        // A wave of 20 all missing is refuted while running; 14 of 20 missing (70 %, a point
        // estimate far below the median) is not — the sequential test alone at 50 % would
        // have refuted it (its likelihood ratio is past 2).
        assert_eq!(verdict(&median, (20, 20), Look::Running), Verdict::Refuted);
        assert_eq!(
            verdict(&median, (20, 14), Look::Running),
            Verdict::Inconclusive
        );
        assert_eq!(
            super::verdict(20, 14, 0.5, 0.5),
            Verdict::Refuted,
            "the uncapped test"
        );
        // Once the probe is over, the fixed-sample test judges what the sequential left.
        let fixed = judge(20, 14, 0.5, 1.0 - median.final_error());
        assert_eq!(verdict(&median, (20, 14), Look::Final), fixed);
        assert_ne!(fixed, Verdict::Inconclusive);
    }

    #[test]
    fn a_decided_check_keeps_the_sequential_verdict_once_over() {
        let strict = criteria(0.99, 0.99);
        let fewest = super::super::sequential::fewest_requests(0.99, 1.0 - strict.running_error());
        assert_eq!(
            verdict(&strict, (fewest, 0), Look::Running),
            Verdict::Proven
        );
        assert_eq!(verdict(&strict, (fewest, 0), Look::Final), Verdict::Proven);
        // Fewer: the fixed-sample test at the rest of the budget proves from 459 up (at its
        // share, a few more).
        let fixed_fewest = min_requests(0, 0.99, 1.0 - strict.final_error());
        assert!(fixed_fewest < fewest, "{fixed_fewest} vs {fewest}");
        assert_eq!(
            verdict(&strict, (fixed_fewest, 0), Look::Running),
            Verdict::Inconclusive
        );
        assert_eq!(
            verdict(&strict, (fixed_fewest, 0), Look::Final),
            Verdict::Proven
        );
    }
}
