//! How measured requests fared against each check of the SLO — the joint per-request
//! thresholds and every percentile objective — as samples and misses, with the
//! overdispersion of the misses over the run ([`crate::metrics::dispersion`]) so verdicts on
//! them use the effective sample size.

use crate::metrics::dispersion::BinnedTally;
use crate::metrics::slo::{LatencyMetric, PercentileObjective, Slo};
use crate::record::RequestRecord;

/// Per-check tallies by scheduled time.
#[derive(Debug, Clone)]
pub(super) struct Tallies {
    thresholds: BinnedTally,
    /// Per percentile objective: (samples, misses) and the same by scheduled time.
    objectives: Vec<((u64, u64), BinnedTally)>,
}

impl Tallies {
    pub(super) fn new(objectives: usize) -> Self {
        Tallies {
            thresholds: BinnedTally::default(),
            objectives: vec![((0, 0), BinnedTally::default()); objectives],
        }
    }

    /// Counts a measured request: a failed request misses every request-level check; an ITL
    /// objective counts tokens.
    pub(super) fn add(&mut self, slo: &Slo, record: &RequestRecord, complies: bool) {
        let at = record.scheduled_us;
        if !slo.thresholds.is_empty() {
            self.thresholds.add(at, 1, u64::from(!complies));
        }
        for (objective, ((samples, misses), bins)) in
            slo.objectives.iter().zip(&mut self.objectives)
        {
            let (n, missed) = objective_tally(objective, record);
            *samples += n;
            *misses += missed;
            bins.add(at, n, missed);
        }
    }

    pub(super) fn compliance(
        &self,
        objectives: &[PercentileObjective],
        measured: u64,
        compliant: u64,
    ) -> Compliance {
        Compliance {
            measured,
            compliant,
            threshold_dispersion: self.thresholds.overdispersion(),
            objectives: objectives
                .iter()
                .zip(&self.objectives)
                .map(
                    |(objective, &((samples, misses), ref bins))| ObjectiveTally {
                        objective: *objective,
                        samples,
                        misses,
                        dispersion: bins.overdispersion(),
                    },
                )
                .collect(),
            decided_after: None,
        }
    }
}

/// How a measured set of requests fared against the SLO.
#[derive(Debug, Clone, PartialEq)]
pub struct Compliance {
    /// Measured requests (failures included).
    pub measured: u64,
    /// Of them, those meeting every per-request threshold.
    pub compliant: u64,
    /// Overdispersion (design effect ≥ 1) of the threshold misses over the run.
    pub threshold_dispersion: f64,
    /// Per percentile objective: samples and misses.
    pub objectives: Vec<ObjectiveTally>,
    /// Measured requests, in the order they were sent, after which a capacity probe's
    /// sequential test had decided every attainment target (set by the probe's in-order
    /// tally; `None` for an aggregator's own tallies).
    pub decided_after: Option<u64>,
}

impl Compliance {
    /// The tallies of two runs at the same load, judged together (overdispersion weighted by
    /// samples; decided where the earlier was, else where the later was after the earlier's
    /// requests).
    pub fn merged(&self, other: &Compliance) -> Compliance {
        let weighted = |a: f64, na: u64, b: f64, nb: u64| {
            let n = (na + nb).max(1) as f64;
            (a * na as f64 + b * nb as f64) / n
        };
        let mut objectives = self.objectives.clone();
        for (mine, theirs) in objectives.iter_mut().zip(&other.objectives) {
            mine.dispersion = weighted(
                mine.dispersion,
                mine.samples,
                theirs.dispersion,
                theirs.samples,
            )
            .max(1.0);
            mine.samples += theirs.samples;
            mine.misses += theirs.misses;
        }
        Compliance {
            measured: self.measured + other.measured,
            compliant: self.compliant + other.compliant,
            threshold_dispersion: weighted(
                self.threshold_dispersion,
                self.measured,
                other.threshold_dispersion,
                other.measured,
            )
            .max(1.0),
            objectives,
            decided_after: self
                .decided_after
                .or(other.decided_after.map(|k| self.measured + k)),
        }
    }
}

/// Samples and misses of one percentile objective.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ObjectiveTally {
    /// The objective.
    pub objective: PercentileObjective,
    /// Samples judged (requests; tokens for ITL).
    pub samples: u64,
    /// Samples above the objective's maximum (failed requests count as misses).
    pub misses: u64,
    /// Overdispersion (design effect ≥ 1) of the misses over the run.
    pub dispersion: f64,
}

/// `(samples, misses)` a request contributes to `objective`.
fn objective_tally(objective: &PercentileObjective, record: &RequestRecord) -> (u64, u64) {
    if objective.metric == LatencyMetric::Itl {
        return record
            .itl_samples()
            .fold((0, 0), |(n, missed), (gap, tokens)| {
                (
                    n + tokens,
                    missed + if gap > objective.max { tokens } else { 0 },
                )
            });
    }
    if !record.is_ok() {
        return (1, 1);
    }
    let value = match objective.metric {
        LatencyMetric::Ttft => record.ttft(),
        LatencyMetric::Tpot => record.tpot(),
        LatencyMetric::E2e => record.e2e(),
        LatencyMetric::Itl => None,
        // A streamed answer that never came is a miss.
        LatencyMetric::Ttfat if record.streamed => {
            return (
                1,
                u64::from(record.ttfat().is_none_or(|v| v > objective.max)),
            );
        }
        LatencyMetric::Ttfat => None,
    };
    (1, u64::from(value.is_some_and(|v| v > objective.max)))
}
