//! [`ProbeSink`]: the aggregator of a probe that also ends the probe early — stops scheduling
//! and lets in-flight requests finish — as soon as one of its targets is refuted: a probe that
//! has clearly failed need not run to its full length.

use std::io;

use tokio_util::sync::CancellationToken;

use super::early_stopping::Verdict;
use super::probe::Criteria;
use crate::metrics::StepAggregator;
use crate::record::{Phase, RequestRecord};
use crate::runner::RecordSink;

/// Measured requests before an early refutation is acted on.
pub const MIN_REQUESTS_BEFORE_FAIL_FAST: u64 = 20;

/// Aggregates a probe and finishes it early on refutation.
#[derive(Debug)]
pub struct ProbeSink {
    aggregator: StepAggregator,
    criteria: Option<Criteria>,
    finish: CancellationToken,
    ended_early: bool,
}

impl ProbeSink {
    /// Wraps `aggregator`; cancels `finish` (the runner's finish token) when a target of
    /// `criteria` is refuted (never without criteria).
    pub fn new(
        aggregator: StepAggregator,
        criteria: Option<Criteria>,
        finish: CancellationToken,
    ) -> Self {
        ProbeSink {
            aggregator,
            criteria,
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
}

impl RecordSink for ProbeSink {
    fn record(&mut self, record: &RequestRecord) -> io::Result<()> {
        self.aggregator.add(record);
        let Some(criteria) = &self.criteria else {
            return Ok(());
        };
        if self.ended_early || record.phase == Phase::Warmup {
            return Ok(());
        }
        let compliance = self.aggregator.compliance();
        if compliance.measured < MIN_REQUESTS_BEFORE_FAIL_FAST {
            return Ok(());
        }
        if criteria
            .checks(&compliance)
            .iter()
            .any(|check| check.verdict == Verdict::Refuted)
        {
            self.ended_early = true;
            self.finish.cancel();
        }
        Ok(())
    }
}
