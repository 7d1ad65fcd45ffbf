//! The throughput interval and how work inside it is counted (`docs/metrics.md`,
//! "Throughput"): from the end of start-up (the first completion of a measured request: every
//! request alive after it was sent into a running system, so lives have their steady length)
//! to the last measured arrival; each request counted by the fraction
//! of its life inside it — except when the queue grew (unstable), where the backlog at the end
//! is not work done and completions inside the interval are counted instead.

use crate::metrics::lives::Lives;
use crate::metrics::stability::Verdict;
use crate::metrics::timeline::{CompletedWork, CompletionTimeline};
use crate::report::{Throughput, ThroughputMethod};

/// The interval and its method.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Interval {
    /// Start, µs since the run start.
    pub(crate) start_us: u64,
    /// End (exclusive).
    pub(crate) end_us: u64,
    /// How work inside it is counted.
    pub(crate) method: ThroughputMethod,
    /// It holds every measured life whole (everything was sent before anything completed).
    pub(crate) whole: bool,
}

/// The edges the interval is chosen from.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Edges {
    /// First and last measured scheduled send.
    pub(crate) first_arrival_us: u64,
    pub(crate) last_arrival_us: u64,
    /// First successful completion of a measured request.
    pub(crate) first_completion_us: Option<u64>,
    /// First successful completion of any request (warm-up included).
    pub(crate) first_any_completion_us: Option<u64>,
    /// Last end of a measured request.
    pub(crate) last_end_us: u64,
}

impl Edges {
    /// End of start-up: the first measured request's completion. Before it the system was
    /// filling (and queueing transients shorten early lives, which would inflate the life
    /// fractions).
    pub(crate) fn startup_end_us(&self) -> u64 {
        self.first_arrival_us
            .max(self.first_completion_us.unwrap_or(self.first_arrival_us))
    }

    /// The interval for a run judged `verdict`. An unstable run counts completions from the
    /// first completion of any request on (the server completes at its own rate from then
    /// on); any other from the end of start-up, by life fractions.
    pub(crate) fn interval(&self, verdict: Verdict) -> Interval {
        let (start, method) = if verdict == Verdict::Unstable {
            let first = self
                .first_any_completion_us
                .unwrap_or(self.first_arrival_us);
            (
                first.max(self.first_arrival_us),
                ThroughputMethod::Completions,
            )
        } else {
            (self.startup_end_us(), ThroughputMethod::LifeFraction)
        };
        if self.last_arrival_us > start {
            return Interval {
                start_us: start,
                end_us: self.last_arrival_us,
                method,
                whole: false,
            };
        }
        // Everything was sent before anything completed (one request, or a closed loop that
        // started all at once): first send to last end, which holds every measured life whole.
        Interval {
            start_us: self.first_arrival_us,
            end_us: self.last_end_us.max(self.first_arrival_us + 1),
            method: ThroughputMethod::LifeFraction,
            whole: true,
        }
    }
}

impl Interval {
    /// No interval (no measured request).
    pub(crate) const EMPTY: Interval = Interval {
        start_us: 0,
        end_us: 0,
        method: ThroughputMethod::LifeFraction,
        whole: false,
    };

    /// Length in seconds.
    pub(crate) fn secs(&self) -> f64 {
        self.end_us.saturating_sub(self.start_us) as f64 / 1e6
    }

    /// The work inside the interval, counted by its method.
    /// An interval that holds every measured life whole counts them whole, not through the
    /// 10 ms buckets its edges cut.
    pub(crate) fn work(&self, lives: &Lives, ends: &CompletionTimeline) -> CompletedWork {
        match self.method {
            ThroughputMethod::LifeFraction if self.whole => {
                lives.holding_every_measured(self.start_us, self.end_us)
            }
            ThroughputMethod::LifeFraction => lives.between(self.start_us, self.end_us),
            ThroughputMethod::Completions => ends.between(self.start_us, self.end_us),
        }
    }

    /// `n` per second of the interval (0 for an empty one).
    pub(crate) fn per_sec(&self, n: f64) -> f64 {
        let secs = self.secs();
        if secs > 0.0 { n / secs } else { 0.0 }
    }

    /// Every figure per second of `work` over the interval, beside the `offered` rate.
    pub(crate) fn throughput(&self, work: &CompletedWork, offered: Option<f64>) -> Throughput {
        Throughput {
            offered_requests_per_sec: offered,
            requests_per_sec: self.per_sec(work.requests),
            input_tokens_per_sec: self.per_sec(work.input_tokens),
            output_tokens_per_sec: self.per_sec(work.output_tokens),
            total_tokens_per_sec: self.per_sec(work.input_tokens + work.output_tokens),
            items_per_sec: self.per_sec(work.items),
        }
    }
}
