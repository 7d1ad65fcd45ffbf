//! The step broken down by workload: one inner aggregator per input-length bucket and per turn
//! index (each computes every metric exactly as the step does, throughput over the step's
//! interval), plus the realised statistics of what the workload asked for.

use std::collections::BTreeMap;
use std::time::Duration;

use super::interval::Interval;
use super::{StepAggregator, count_stats};
use crate::metrics::buckets::LengthBuckets;
use crate::metrics::histogram::CountHistogram;
use crate::metrics::slo::Slo;
use crate::record::{Phase, RequestRecord};
use crate::report::{BucketReport, SliceMetrics, TurnReport, WorkloadStats};

/// Turn rows reported one by one; later turns share the last row.
pub(super) const MAX_TURN_ROWS: u32 = 32;

/// Per-bucket and per-turn aggregators and the workload tally.
#[derive(Debug, Clone)]
pub(super) struct Breakdown {
    buckets: LengthBuckets,
    slo: Option<Slo>,
    window: Duration,
    by_bucket: Vec<StepAggregator>,
    by_turn: BTreeMap<u32, StepAggregator>,
    tally: WorkloadTally,
}

/// What the workload asked for, over measured requests.
#[derive(Debug, Clone, Default)]
struct WorkloadTally {
    requests: u64,
    input: CountHistogram,
    output: CountHistogram,
    output_unlimited: u64,
    turns_by_session: BTreeMap<u64, u64>,
}

impl Breakdown {
    pub(super) fn new(buckets: LengthBuckets, slo: Option<Slo>, window: Duration) -> Self {
        let by_bucket = buckets
            .buckets()
            .iter()
            .map(|_| StepAggregator::bare(slo.clone(), window))
            .collect();
        Breakdown {
            buckets,
            slo,
            window,
            by_bucket,
            by_turn: BTreeMap::new(),
            tally: WorkloadTally::default(),
        }
    }

    pub(super) fn add(&mut self, record: &RequestRecord) {
        let input = record.expected_input_tokens.or(record.input_tokens);
        let bucket = self.buckets.index_of(input.unwrap_or(0));
        if let Some(aggregator) = self.by_bucket.get_mut(bucket) {
            aggregator.add(record);
        }
        if let Some(turn) = record.turn {
            let (slo, window) = (&self.slo, self.window);
            self.by_turn
                .entry(turn.min(MAX_TURN_ROWS - 1))
                .or_insert_with(|| StepAggregator::bare(slo.clone(), window))
                .add(record);
        }
        if record.phase == Phase::Measure {
            let tally = &mut self.tally;
            tally.requests += 1;
            if let Some(input) = input {
                tally.input.record(input);
            }
            match record.requested_output_tokens {
                Some(output) => tally.output.record(output),
                None => tally.output_unlimited += 1,
            }
            if let Some(session) = record.session {
                *tally.turns_by_session.entry(session).or_insert(0) += 1;
            }
        }
    }

    fn buckets(&self, interval: &Interval) -> Vec<BucketReport> {
        self.buckets
            .buckets()
            .iter()
            .zip(&self.by_bucket)
            .map(|(bucket, aggregator)| BucketReport {
                name: bucket.name.clone(),
                min_input_tokens: bucket.min,
                max_input_tokens: bucket.end.map(|end| end - 1),
                metrics: aggregator.slice(interval),
            })
            .collect()
    }

    fn turns(&self, interval: &Interval) -> Vec<TurnReport> {
        self.by_turn
            .iter()
            .map(|(&turn, aggregator)| TurnReport {
                turn,
                and_later: turn == MAX_TURN_ROWS - 1,
                metrics: aggregator.slice(interval),
            })
            .collect()
    }

    fn stats(&self) -> WorkloadStats {
        let tally = &self.tally;
        let sessions = &tally.turns_by_session;
        let turns_per_session = (!sessions.is_empty()).then(|| {
            let mut histogram = CountHistogram::default();
            for &turns in sessions.values() {
                histogram.record(turns);
            }
            count_stats(&histogram)
        });
        WorkloadStats {
            requests: tally.requests,
            input_tokens: count_stats(&tally.input),
            output_tokens: count_stats(&tally.output),
            output_unlimited: tally.output_unlimited,
            sessions: (!sessions.is_empty()).then_some(sessions.len() as u64),
            turns_per_session,
        }
    }
}

impl StepAggregator {
    /// Splits the report by these input-length buckets (call before adding records).
    pub fn with_length_buckets(mut self, buckets: LengthBuckets) -> Self {
        self.breakdown = Some(Box::new(Breakdown::new(
            buckets,
            self.slo.clone(),
            self.windows.width(),
        )));
        self
    }

    /// The buckets, turns and workload statistics of the step whose throughput interval is
    /// `interval`.
    pub(super) fn breakdown_reports(
        &self,
        interval: &Interval,
    ) -> (Vec<BucketReport>, Vec<TurnReport>, WorkloadStats) {
        match &self.breakdown {
            Some(breakdown) => (
                breakdown.buckets(interval),
                breakdown.turns(interval),
                breakdown.stats(),
            ),
            None => (Vec::new(), Vec::new(), WorkloadStats::default()),
        }
    }

    /// Every metric of this aggregator's requests, throughput over the step's `interval`
    /// counted by the step's method.
    fn slice(&self, interval: &Interval) -> SliceMetrics {
        let work = interval.work(&self.lives, &self.completed_work);
        let per_sec = |n: f64| interval.per_sec(n);
        SliceMetrics {
            requests: self.counts.clone(),
            throughput: interval.throughput(&work, self.offered_rate()),
            tokens: self.token_report(),
            latency_ms: self.latency_report(),
            latency_from_send_ms: self.latency_from_send_report(),
            goodput: self.goodput_report(
                per_sec(work.compliant_requests),
                per_sec(work.compliant_output_tokens),
            ),
        }
    }
}
