//! Live figures for a running benchmark: [`LiveSink`] is a record sink (it runs on the
//! runner's delivering task, like the aggregator) that folds finished requests into
//! histograms and per-second counts and publishes a [`LiveSnapshot`] over a
//! `tokio::sync::watch` channel at most every [`PUBLISH_INTERVAL`]. A UI only reads the latest
//! snapshot: no lock is shared with the hot path, and no statistics are computed in the UI.

use std::collections::BTreeMap;
use std::io;
use std::time::{Duration, Instant};

use tokio::sync::watch;

use crate::metrics::LatencyHistogram;
use crate::record::{Phase, RequestRecord};
use crate::runner::RecordSink;

/// Shortest time between two published snapshots.
pub const PUBLISH_INTERVAL: Duration = Duration::from_millis(200);

/// Seconds of per-second history kept for sparklines.
pub const HISTORY_SECS: usize = 120;

/// p50 / p90 / p99 of one latency so far, ms.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LivePercentiles {
    /// Median.
    pub p50: Option<f64>,
    /// 90th percentile.
    pub p90: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
    /// Samples.
    pub count: u64,
}

impl LivePercentiles {
    fn of(histogram: &LatencyHistogram) -> Self {
        let ms = |p| histogram.percentile_us(p).map(|us| us as f64 / 1000.0);
        LivePercentiles {
            p50: ms(50.0),
            p90: ms(90.0),
            p99: ms(99.0),
            count: histogram.count(),
        }
    }
}

/// Work finished in one second of the run (by request end time).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SecondCounts {
    /// Requests that completed.
    pub completions: u64,
    /// Requests that failed.
    pub failures: u64,
    /// Output tokens of the requests that ended.
    pub output_tokens: u64,
}

/// What a live view shows, as of the last publish.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LiveSnapshot {
    /// Finished requests seen (warmup included).
    pub finished: u64,
    /// Of which completed successfully.
    pub completed: u64,
    /// Of which failed, by kind.
    pub failed_by_kind: BTreeMap<String, u64>,
    /// Warmup requests among the finished.
    pub warmup: u64,
    /// TTFT so far (measured, successful requests), from the schedule.
    pub ttft: LivePercentiles,
    /// TPOT so far.
    pub tpot: LivePercentiles,
    /// E2E so far, from the schedule.
    pub e2e: LivePercentiles,
    /// Per-second counts, the last [`HISTORY_SECS`] seconds of run time, oldest first.
    pub per_second: Vec<SecondCounts>,
    /// Run time of the newest record, seconds.
    pub latest_secs: f64,
}

/// The sink that feeds a live view.
#[derive(Debug)]
pub struct LiveSink {
    sender: watch::Sender<LiveSnapshot>,
    snapshot: LiveSnapshot,
    ttft: LatencyHistogram,
    tpot: LatencyHistogram,
    e2e: LatencyHistogram,
    first_second: u64,
    last_publish: Option<Instant>,
}

impl LiveSink {
    /// A sink and the receiver a UI watches.
    pub fn new() -> (Self, watch::Receiver<LiveSnapshot>) {
        let (sender, receiver) = watch::channel(LiveSnapshot::default());
        let sink = LiveSink {
            sender,
            snapshot: LiveSnapshot::default(),
            ttft: LatencyHistogram::new(),
            tpot: LatencyHistogram::new(),
            e2e: LatencyHistogram::new(),
            first_second: 0,
            last_publish: None,
        };
        (sink, receiver)
    }

    /// Folds in one finished request, publishing when [`PUBLISH_INTERVAL`] has passed.
    pub fn add(&mut self, record: &RequestRecord) {
        let s = &mut self.snapshot;
        s.finished += 1;
        s.warmup += u64::from(record.phase == Phase::Warmup);
        match &record.failure {
            None => s.completed += 1,
            Some(failure) => {
                *s.failed_by_kind
                    .entry(failure.kind.as_str().to_string())
                    .or_insert(0) += 1
            }
        }
        self.count_second(record);
        if record.phase == Phase::Measure && record.is_ok() {
            for (histogram, value) in [
                (&mut self.ttft, record.ttft()),
                (&mut self.tpot, record.tpot()),
                (&mut self.e2e, record.e2e()),
            ] {
                if let Some(value) = value {
                    histogram.record(value);
                }
            }
        }
        let now = Instant::now();
        if self
            .last_publish
            .is_none_or(|last| now.duration_since(last) >= PUBLISH_INTERVAL)
        {
            self.last_publish = Some(now);
            self.publish();
        }
    }

    fn count_second(&mut self, record: &RequestRecord) {
        let second = record.end_us / 1_000_000;
        let s = &mut self.snapshot;
        s.latest_secs = s.latest_secs.max(record.end_us as f64 / 1e6);
        let newest = self.first_second + s.per_second.len() as u64;
        if second >= newest {
            s.per_second.resize(
                s.per_second.len() + (second + 1 - newest) as usize,
                SecondCounts::default(),
            );
        }
        let overflow = s.per_second.len().saturating_sub(HISTORY_SECS);
        if overflow > 0 {
            s.per_second.drain(..overflow);
            self.first_second += overflow as u64;
        }
        let Some(index) = second.checked_sub(self.first_second) else {
            return; // older than the kept history
        };
        if let Some(counts) = s.per_second.get_mut(index as usize) {
            if record.is_ok() {
                counts.completions += 1;
            } else {
                counts.failures += 1;
            }
            counts.output_tokens += record.output_tokens;
        }
    }

    /// Publishes the current figures now (e.g. at the end of the run).
    pub fn publish(&mut self) {
        self.snapshot.ttft = LivePercentiles::of(&self.ttft);
        self.snapshot.tpot = LivePercentiles::of(&self.tpot);
        self.snapshot.e2e = LivePercentiles::of(&self.e2e);
        self.sender.send_replace(self.snapshot.clone());
    }
}

impl RecordSink for LiveSink {
    fn record(&mut self, record: &RequestRecord) -> io::Result<()> {
        self.add(record);
        Ok(())
    }
}
