//! [`InOrder`]: a probe's SLO tallies in the order its requests were sent, judged by the
//! sequential test after every request, each check's tally frozen where its verdict was reached.
//!
//! Records end out of order, and a slow request is more likely a miss: counting them as they
//! end would show fewer misses than the requests sent so far hold. So each record's share of
//! the tallies (what the aggregator decided for it: the difference its record made to
//! [`Compliance`]) waits until every request sent before it has ended, then joins the
//! in-order prefix the test looks at. Indices run from 0 within a run; a gap (a request never
//! recorded) holds the prefix back until [`InOrder::judged`] releases the rest at the end.
//!
//! A check is decided the first time the test proves or refutes it; its counts then stop
//! there (Ville's inequality covers that first crossing, not a later look at the same run),
//! so [`InOrder::judged`] gives tallies whose verdicts reproduce the crossings.

use std::collections::BTreeMap;

use super::early_stopping::Verdict;
use super::probe::{Criteria, Look};
use crate::metrics::aggregate::Compliance;
use crate::record::RequestRecord;

/// Measured requests before a verdict is acted on (the design effect of the misses is not
/// estimated from fewer).
pub const MIN_REQUESTS_BEFORE_VERDICT: u64 = 20;

/// One record's share of the tallies.
#[derive(Debug, Clone, Default)]
struct Share {
    /// The request's latency (E2E, or TTFT when streamed), seconds; none when it failed.
    latency: Option<f64>,
    measured: u64,
    compliant: u64,
    objectives: Vec<(u64, u64)>,
}

/// The in-order tallies of one run of a probe.
#[derive(Debug, Clone)]
pub struct InOrder {
    criteria: Criteria,
    /// The aggregator's tallies after the last record (shares are differences from it).
    last: Option<Compliance>,
    pending: BTreeMap<u64, Share>,
    next: u64,
    /// The serial correlation of the measured latencies, in send order.
    serial: Serial,
    /// The released prefix (dispersion: the aggregator's latest estimate).
    prefix: Option<Compliance>,
    /// Per check (thresholds first, then each objective): the prefix where it was decided.
    frozen: Vec<Option<Compliance>>,
    /// Measured requests of the prefix when every check was decided (or one refuted).
    decided_after: Option<u64>,
    /// Whether a check was refuted.
    refuted: bool,
}

impl InOrder {
    /// Empty tallies judged under `criteria`.
    pub fn new(criteria: Criteria) -> Self {
        let checks =
            usize::from(!criteria.slo.thresholds.is_empty()) + criteria.slo.objectives.len();
        InOrder {
            criteria,
            last: None,
            pending: BTreeMap::new(),
            next: 0,
            serial: Serial::default(),
            prefix: None,
            frozen: vec![None; checks],
            decided_after: None,
            refuted: false,
        }
    }

    /// Notes `record`, whose addition brought the aggregator's tallies to `now`; releases
    /// every record now in order and judges the prefix after each.
    pub fn add(&mut self, record: &RequestRecord, now: Compliance) {
        let mut share = match &self.last {
            Some(last) => share(last, &now),
            None => share(&empty_like(&now), &now),
        };
        share.latency = record
            .ttft()
            .or(record.e2e())
            .filter(|_| share.measured > 0 && record.is_ok())
            .map(|d| d.as_secs_f64());
        self.last = Some(now);
        self.pending.insert(record.index, share);
        while let Some(share) = self.pending.remove(&self.next) {
            self.next += 1;
            self.release(&share);
        }
    }

    /// Measured requests of the in-order prefix after which the probe's targets were decided
    /// (every one proven, or one refuted).
    pub fn decided_after(&self) -> Option<u64> {
        self.decided_after
    }

    /// Whether the decision was a refutation (the probe fails whatever else it shows).
    pub fn refuted(&self) -> bool {
        self.refuted
    }

    /// Measured requests released in order so far.
    pub fn released(&self) -> u64 {
        self.prefix.as_ref().map_or(0, |p| p.measured)
    }

    /// The tallies to judge the run by: every record released (in index order, judged after
    /// each), each check's counts where it was decided, and the undecided checks' the
    /// aggregator's own over the whole run (its dispersion, not the running test's serial
    /// floor: the fixed-sample test judges them once, at the planned length).
    pub fn judged(mut self) -> Option<Compliance> {
        let pending = std::mem::take(&mut self.pending);
        for share in pending.values() {
            self.release(share);
        }
        let mut judged = self.last.clone().or(self.prefix.clone())?;
        let thresholds = !self.criteria.slo.thresholds.is_empty();
        for (check, frozen) in self.frozen.iter().enumerate() {
            let Some(frozen) = frozen else { continue };
            match check.checked_sub(usize::from(thresholds)) {
                None => {
                    judged.measured = frozen.measured;
                    judged.compliant = frozen.compliant;
                    judged.threshold_dispersion = frozen.threshold_dispersion;
                }
                Some(objective) => {
                    if let (Some(mine), Some(theirs)) = (
                        judged.objectives.get_mut(objective),
                        frozen.objectives.get(objective),
                    ) {
                        *mine = *theirs;
                    }
                }
            }
        }
        judged.decided_after = self.decided_after;
        Some(judged)
    }

    fn release(&mut self, share: &Share) {
        let Some(latest) = &self.last else { return };
        if let Some(latency) = share.latency {
            self.serial.add(latency);
        }
        let serial = self.serial.design_effect();
        let prefix = self.prefix.get_or_insert_with(|| empty_like(latest));
        prefix.measured += share.measured;
        prefix.compliant += share.compliant;
        prefix.threshold_dispersion = latest.threshold_dispersion.max(serial);
        for ((mine, latest), (samples, misses)) in prefix
            .objectives
            .iter_mut()
            .zip(&latest.objectives)
            .zip(&share.objectives)
        {
            mine.samples += samples;
            mine.misses += misses;
            mine.dispersion = latest.dispersion.max(serial);
        }
        if self.decided_after.is_some() || prefix.measured < MIN_REQUESTS_BEFORE_VERDICT {
            return;
        }
        let prefix = prefix.clone();
        let checks = self.criteria.checks_at(&prefix, Look::Running);
        let mut refuted = false;
        for (check, frozen) in checks.iter().zip(&mut self.frozen) {
            if frozen.is_none() && check.verdict != Verdict::Inconclusive {
                *frozen = Some(prefix.clone());
                refuted |= check.verdict == Verdict::Refuted;
            }
        }
        self.refuted = refuted;
        if refuted || self.frozen.iter().all(Option::is_some) {
            self.decided_after = Some(prefix.measured);
        }
    }
}

/// The lag-1 serial correlation `ρ` of a series, for the design effect of its mean,
/// `(1 + ρ) / (1 − ρ)` (an AR(1) series' variance inflation): latencies in a queue come in
/// runs, and so do the misses they cause — before any miss has been seen to estimate their
/// own clustering from (a window of a busy server without a miss is no proof).
#[derive(Debug, Clone, Default)]
struct Serial {
    n: f64,
    sum: f64,
    squares: f64,
    products: f64,
    last: Option<f64>,
}

impl Serial {
    fn add(&mut self, x: f64) {
        if let Some(last) = self.last {
            self.products += last * x;
        }
        self.n += 1.0;
        self.sum += x;
        self.squares += x * x;
        self.last = Some(x);
    }

    /// `(1 + ρ) / (1 − ρ)`, at least 1 (1 for a constant series or fewer than 20 values).
    fn design_effect(&self) -> f64 {
        if self.n < 20.0 {
            return 1.0;
        }
        let mean = self.sum / self.n;
        let variance = self.squares / self.n - mean * mean;
        if variance <= 1e-12 * mean * mean.max(1e-9) {
            return 1.0;
        }
        let rho = (self.products / (self.n - 1.0) - mean * mean) / variance;
        let rho = rho.clamp(0.0, 0.99);
        (1.0 + rho) / (1.0 - rho)
    }
}

/// `now` with every count zero.
fn empty_like(now: &Compliance) -> Compliance {
    let mut empty = now.clone();
    empty.measured = 0;
    empty.compliant = 0;
    for objective in &mut empty.objectives {
        objective.samples = 0;
        objective.misses = 0;
    }
    empty.decided_after = None;
    empty
}

/// What one record added to the tallies.
fn share(before: &Compliance, after: &Compliance) -> Share {
    Share {
        latency: None,
        measured: after.measured.saturating_sub(before.measured),
        compliant: after.compliant.saturating_sub(before.compliant),
        objectives: after
            .objectives
            .iter()
            .zip(&before.objectives)
            .map(|(a, b)| {
                (
                    a.samples.saturating_sub(b.samples),
                    a.misses.saturating_sub(b.misses),
                )
            })
            .collect(),
    }
}
