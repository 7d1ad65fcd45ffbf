//! [`ProbeSink`]: the aggregator of a probe that also ends the probe — stops scheduling and
//! lets in-flight requests finish — as soon as the sequential test has decided its targets:
//! at once when one is refuted, once every one is proven and the probe has measured long
//! enough for its stability verdict ([`Stopping::proof_floor`]).

use std::io;

use tokio_util::sync::CancellationToken;

use super::probe::Criteria;
use super::tally::InOrder;
use crate::metrics::StepAggregator;
use crate::metrics::aggregate::Compliance;
use crate::record::{Phase, RequestRecord};
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
}

/// Aggregates a probe and finishes it once its targets are decided.
#[derive(Debug)]
pub struct ProbeSink {
    aggregator: StepAggregator,
    tally: Option<(InOrder, u64)>,
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
        ProbeSink {
            aggregator,
            tally: stopping.map(|s| (InOrder::new(s.criteria), s.proof_floor)),
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
        let done = tally.refuted() || tally.decided_after().is_some() && tally.released() >= *floor;
        if done {
            self.ended_early = true;
            self.finish.cancel();
        }
        Ok(())
    }
}
