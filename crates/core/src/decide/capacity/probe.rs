//! One probe of a capacity search: a measured step at one load level, judged on stability and
//! on every attainment target of the SLO with the sequential test's verdict
//! ([`super::sequential`]).

use serde::{Deserialize, Serialize};

use super::early_stopping::{Verdict, min_requests};
use super::sequential::verdict;
use crate::metrics::aggregate::Compliance;
use crate::metrics::slo::Slo;
use crate::metrics::stability::Verdict as Stability;
use crate::report::StepReport;
pub use crate::report::capacity::{Check, Outcome, Probe};

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

    /// One check for the joint per-request thresholds, one per percentile objective.
    pub fn checks(&self, compliance: &Compliance) -> Vec<Check> {
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
                compliance.threshold_dispersion,
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
                tally.dispersion,
            ));
        }
        checks
    }

    /// The sequential verdict on the effective sample: `samples / dispersion` with
    /// `misses / dispersion`, since clustered misses carry less evidence than independent ones.
    fn check(
        &self,
        name: String,
        target: f64,
        (samples, misses): (u64, u64),
        dispersion: f64,
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
            verdict: verdict(
                effective,
                effective_misses.min(effective),
                target,
                self.confidence,
            ),
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
