//! The step broken down by workload: one inner aggregator per input-length bucket, per turn
//! index, per image-resolution bucket and per image-generation setting (each computes every
//! metric exactly as the step does,
//! throughput over the step's interval), plus the realised statistics of what the workload
//! asked for.

use std::collections::BTreeMap;
use std::time::Duration;

use super::interval::Interval;
use super::labels::{LabelRows, LabelSlices};
use super::{StepAggregator, count_stats};
use crate::metrics::buckets::LengthBuckets;
use crate::metrics::histogram::CountHistogram;
use crate::metrics::slo::Slo;
use crate::record::{Generation, Phase, RequestRecord};
use crate::report::run::ClassInfo;
use crate::report::{
    BucketReport, GenerationReport, ImageBucketReport, SliceMetrics, TurnReport, WorkloadStats,
};
use crate::workload::image::Resolution;

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
    by_resolution: BTreeMap<String, ImageSlice>,
    by_generation: BTreeMap<(u64, u32, u32), GenerationSlice>,
    labels: LabelSlices,
    tally: WorkloadTally,
}

/// The requests of one image-resolution bucket.
#[derive(Debug, Clone)]
struct ImageSlice {
    aggregator: StepAggregator,
    /// Images of its measured requests.
    images: u64,
    /// Images of its completed measured requests.
    completed_images: u64,
}

/// The requests of one image-generation setting.
#[derive(Debug, Clone)]
struct GenerationSlice {
    setting: Generation,
    aggregator: StepAggregator,
    /// Images its completed measured requests returned.
    images: u64,
}

/// The breakdown's sections of a step report.
pub(super) struct BreakdownReports {
    pub(super) buckets: Vec<BucketReport>,
    pub(super) turns: Vec<TurnReport>,
    pub(super) images: Vec<ImageBucketReport>,
    pub(super) generation: Vec<GenerationReport>,
    pub(super) labels: LabelRows,
    pub(super) stats: WorkloadStats,
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
            labels: LabelSlices::new(slo.clone(), window),
            slo,
            window,
            by_bucket,
            by_turn: BTreeMap::new(),
            by_resolution: BTreeMap::new(),
            by_generation: BTreeMap::new(),
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
        self.add_images(record);
        self.add_generation(record);
        self.labels.add(record);
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

    /// Files a request that carried images under its resolution bucket
    /// ([`Resolution::bucket`]).
    fn add_images(&mut self, record: &RequestRecord) {
        let Some(bucket) = Resolution::bucket(&record.images) else {
            return;
        };
        let (slo, window) = (&self.slo, self.window);
        let slice = self
            .by_resolution
            .entry(bucket)
            .or_insert_with(|| ImageSlice {
                aggregator: StepAggregator::bare(slo.clone(), window),
                images: 0,
                completed_images: 0,
            });
        slice.aggregator.add(record);
        if record.phase == Phase::Measure {
            let images = record.images.len() as u64;
            slice.images += images;
            slice.completed_images += if record.is_ok() { images } else { 0 };
        }
    }

    /// Files an image-generation request under the size and steps it asked for.
    fn add_generation(&mut self, record: &RequestRecord) {
        let Some(setting) = record.generation else {
            return;
        };
        let (slo, window) = (&self.slo, self.window);
        let slice = self
            .by_generation
            .entry(setting.order())
            .or_insert_with(|| GenerationSlice {
                setting,
                aggregator: StepAggregator::bare(slo.clone(), window),
                images: 0,
            });
        slice.aggregator.add(record);
        if record.phase == Phase::Measure && record.is_ok() {
            slice.images += u64::from(record.items);
        }
    }

    /// The image-generation settings with measured requests, from the fewest pixels to the
    /// most, then the fewest steps.
    fn generation(&self, interval: &Interval) -> Vec<GenerationReport> {
        self.by_generation
            .values()
            .filter(|slice| slice.aggregator.counts.scheduled > 0)
            .map(|slice| GenerationReport {
                size: slice.setting.size.map(|size| size.to_string()),
                steps: slice.setting.steps,
                images: slice.images,
                metrics: slice.aggregator.slice(interval),
            })
            .collect()
    }

    /// The resolution buckets with measured requests, from the fewest pixels to the most.
    fn images(&self, interval: &Interval) -> Vec<ImageBucketReport> {
        let mut rows: Vec<(u64, ImageBucketReport)> = self
            .by_resolution
            .iter()
            .filter(|(_, slice)| slice.aggregator.counts.scheduled > 0)
            .map(|(name, slice)| {
                let metrics = slice.aggregator.slice(interval);
                let completed = metrics.requests.completed;
                let per_request = if completed > 0 {
                    slice.completed_images as f64 / completed as f64
                } else {
                    0.0
                };
                let report = ImageBucketReport {
                    resolution: name.clone(),
                    images: slice.images,
                    images_per_sec: metrics.throughput.requests_per_sec * per_request,
                    metrics,
                };
                (pixels_of(name), report)
            })
            .collect();
        rows.sort_by(|a, b| {
            a.0.cmp(&b.0)
                .then_with(|| a.1.resolution.cmp(&b.1.resolution))
        });
        rows.into_iter().map(|(_, row)| row).collect()
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

/// The pixels of a bucket's largest size (its last), to order the rows.
fn pixels_of(bucket: &str) -> u64 {
    bucket
        .rsplit('+')
        .next()
        .and_then(Resolution::read)
        .map_or(u64::MAX, Resolution::pixels)
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

    /// Judges each SLO class's requests against its own SLO (call after
    /// [`StepAggregator::with_length_buckets`], before adding records). A class not named here,
    /// or whose SLO does not parse, is judged against the step's SLO.
    pub fn with_classes(mut self, classes: &[ClassInfo]) -> Self {
        let slos = classes
            .iter()
            .filter_map(|class| {
                let slo = Slo::parse(&class.slo).ok()?;
                Some((class.name.clone(), (slo, class.slo.clone())))
            })
            .collect();
        if let Some(breakdown) = &mut self.breakdown {
            breakdown.labels.set_classes(slos);
        }
        self
    }

    /// The buckets, turns, resolution buckets and workload statistics of the step whose
    /// throughput interval is `interval`.
    pub(super) fn breakdown_reports(&self, interval: &Interval) -> BreakdownReports {
        match &self.breakdown {
            Some(breakdown) => BreakdownReports {
                buckets: breakdown.buckets(interval),
                turns: breakdown.turns(interval),
                images: breakdown.images(interval),
                generation: breakdown.generation(interval),
                labels: breakdown.labels.rows(interval),
                stats: breakdown.stats(),
            },
            None => BreakdownReports {
                buckets: Vec::new(),
                turns: Vec::new(),
                images: Vec::new(),
                generation: Vec::new(),
                labels: LabelRows::empty(),
                stats: WorkloadStats::default(),
            },
        }
    }

    /// Every metric of this aggregator's requests, throughput over the step's `interval`
    /// counted by the step's method.
    pub(super) fn slice(&self, interval: &Interval) -> SliceMetrics {
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
