//! [`ProbeSink`]: the aggregator of a probe that also ends the probe — stops scheduling and
//! lets in-flight requests finish — as soon as the sequential test has decided its targets:
//! at once when one is refuted, once every one is proven, the probe has measured its
//! [`Stopping::proof_floor`] and its stability verdict (looked at each time a tenth more
//! requests are in) is no longer inconclusive.

use std::io;

use tokio_util::sync::CancellationToken;

use super::probe::Criteria;
use super::tally::InOrder;
use crate::metrics::StepAggregator;
use crate::metrics::aggregate::Compliance;
use crate::record::{Phase, RequestRecord};
use crate::report::LoadReport;
use crate::runner::RecordSink;

pub use super::tally::MIN_REQUESTS_BEFORE_VERDICT as MIN_REQUESTS_BEFORE_FAIL_FAST;

/// When a probe may end before its planned length.
#[derive(Debug, Clone, PartialEq)]
pub struct Stopping {
    /// What its targets are judged by.
    pub criteria: Criteria,
    /// Measured requests (in order) before a proof ends the probe: a rate probe's
    /// `--probe-min-duration` of arrivals, so its stability verdict sees a trend (a
    /// refutation ends it at once).
    pub proof_floor: u64,
    /// The probe's load, for a look at its stability verdict before a proof ends it.
    pub load: LoadReport,
}

/// Aggregates a probe and finishes it once its targets are decided.
#[derive(Debug)]
pub struct ProbeSink {
    aggregator: StepAggregator,
    tally: Option<(InOrder, u64)>,
    load: Option<LoadReport>,
    /// Released requests at the next look at the stability verdict.
    next_look: u64,
    finish: CancellationToken,
    ended_early: bool,
}

impl ProbeSink {
    /// Wraps `aggregator`; cancels `finish` (the runner's finish token) once `stopping`'s
    /// targets are decided (never without it).
    pub fn new(
        aggregator: StepAggregator,
        stopping: Option<Stopping>,
        finish: CancellationToken,
    ) -> Self {
        let load = stopping.as_ref().map(|s| s.load.clone());
        ProbeSink {
            aggregator,
            tally: stopping.map(|s| (InOrder::new(s.criteria), s.proof_floor)),
            load,
            next_look: 0,
            finish,
            ended_early: false,
        }
    }

    /// Whether the probe was ended early.
    pub fn ended_early(&self) -> bool {
        self.ended_early
    }

    /// The aggregator, once the probe is over.
    pub fn into_aggregator(self) -> StepAggregator {
        self.aggregator
    }

    /// The aggregator and the tallies to judge the probe by, once it is over: in the order
    /// the requests were sent, each target's where the sequential test decided it (the
    /// aggregator's own without criteria).
    pub fn into_parts(self) -> (StepAggregator, Compliance) {
        let judged = self.tally.and_then(|(tally, _)| tally.judged());
        let judged = judged.unwrap_or_else(|| self.aggregator.compliance());
        (self.aggregator, judged)
    }
}

impl ProbeSink {
    /// Whether the stability verdict of the probe so far is stable or unstable (a proof does
    /// not end a probe whose queue could not be judged yet); looked at each time a tenth more
    /// requests have been released.
    fn stability_judged(&mut self, released: u64) -> bool {
        if released < self.next_look {
            return false;
        }
        self.next_look = released + released.div_ceil(10).max(1);
        let Some(load) = &self.load else {
            return true;
        };
        let verdict = self.aggregator.report(load.clone()).stability.verdict;
        verdict != crate::metrics::stability::Verdict::Inconclusive
    }
}

impl RecordSink for ProbeSink {
    fn record(&mut self, record: &RequestRecord) -> io::Result<()> {
        self.aggregator.add(record);
        let Some((tally, floor)) = &mut self.tally else {
            return Ok(());
        };
        tally.add(record, self.aggregator.compliance());
        if self.ended_early || record.phase == Phase::Warmup {
            return Ok(());
        }
        let (refuted, released) = (tally.refuted(), tally.released());
        let proven = tally.decided_after().is_some() && released >= *floor;
        if refuted || proven && self.stability_judged(released) {
            self.ended_early = true;
            self.finish.cancel();
        }
        Ok(())
    }
}
