//! [`CompletionTimeline`]: completed work binned by completion time at 10 ms resolution, so the
//! throughput of any interval can be read back afterwards, whatever order records arrived in.
//!
//! Throughput is the work *completed inside* the measurement interval divided by its length.
//! Work is attributed to the instant its request completed; the two partial buckets at the
//! interval's edges are counted in proportion to their overlap. About 14 MB per hour of run.

use std::ops::AddAssign;

/// Bucket width, µs.
pub const RESOLUTION_US: u64 = 10_000;

/// Completed work in one bucket (or summed over an interval).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CompletedWork {
    /// Requests completed successfully.
    pub requests: f64,
    /// Items (choices) of those requests.
    pub items: f64,
    /// Their prompt tokens.
    pub input_tokens: f64,
    /// Their generated tokens.
    pub output_tokens: f64,
    /// Of the requests, those meeting every SLO threshold.
    pub compliant_requests: f64,
    /// Generated tokens of the compliant requests.
    pub compliant_output_tokens: f64,
}

impl AddAssign for CompletedWork {
    fn add_assign(&mut self, other: CompletedWork) {
        self.requests += other.requests;
        self.items += other.items;
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.compliant_requests += other.compliant_requests;
        self.compliant_output_tokens += other.compliant_output_tokens;
    }
}

impl CompletedWork {
    /// One completed request's work.
    pub fn of(items: u32, input_tokens: u64, output_tokens: u64, compliant: bool) -> Self {
        let output = output_tokens as f64;
        CompletedWork {
            requests: 1.0,
            items: f64::from(items),
            input_tokens: input_tokens as f64,
            output_tokens: output,
            compliant_requests: if compliant { 1.0 } else { 0.0 },
            compliant_output_tokens: if compliant { output } else { 0.0 },
        }
    }

    /// Every field times `factor`.
    pub fn scaled(self, factor: f64) -> CompletedWork {
        CompletedWork {
            requests: self.requests * factor,
            items: self.items * factor,
            input_tokens: self.input_tokens * factor,
            output_tokens: self.output_tokens * factor,
            compliant_requests: self.compliant_requests * factor,
            compliant_output_tokens: self.compliant_output_tokens * factor,
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    requests: u32,
    items: u32,
    compliant: u32,
    input_tokens: u64,
    output_tokens: u64,
    compliant_output_tokens: u64,
}

/// Completed work over time.
#[derive(Debug, Clone, Default)]
pub struct CompletionTimeline {
    buckets: Vec<Bucket>,
}

impl CompletionTimeline {
    /// Adds a successful completion at `at_us`.
    pub fn add(
        &mut self,
        at_us: u64,
        items: u32,
        input_tokens: u64,
        output_tokens: u64,
        compliant: bool,
    ) {
        let index = usize::try_from(at_us / RESOLUTION_US).unwrap_or(usize::MAX);
        if index == usize::MAX {
            return;
        }
        if self.buckets.len() <= index {
            self.buckets.resize(index + 1, Bucket::default());
        }
        let bucket = &mut self.buckets[index];
        bucket.requests += 1;
        bucket.items += items;
        bucket.input_tokens += input_tokens;
        bucket.output_tokens += output_tokens;
        if compliant {
            bucket.compliant += 1;
            bucket.compliant_output_tokens += output_tokens;
        }
    }

    /// Work completed in `[from_us, to_us)`, edge buckets counted by overlap.
    pub fn between(&self, from_us: u64, to_us: u64) -> CompletedWork {
        let mut total = CompletedWork::default();
        if to_us <= from_us {
            return total;
        }
        let first = from_us / RESOLUTION_US;
        let last = (to_us - 1) / RESOLUTION_US;
        for index in first..=last {
            let Some(bucket) = usize::try_from(index)
                .ok()
                .and_then(|i| self.buckets.get(i))
            else {
                break;
            };
            let work = CompletedWork {
                requests: f64::from(bucket.requests),
                items: f64::from(bucket.items),
                input_tokens: bucket.input_tokens as f64,
                output_tokens: bucket.output_tokens as f64,
                compliant_requests: f64::from(bucket.compliant),
                compliant_output_tokens: bucket.compliant_output_tokens as f64,
            };
            total += work.scaled(overlap(index, from_us, to_us));
        }
        total
    }
}

/// The fraction of bucket `index` that lies inside `[from_us, to_us)` (the bucket must
/// overlap it).
pub(crate) fn overlap(index: u64, from_us: u64, to_us: u64) -> f64 {
    let start = index * RESOLUTION_US;
    let inside = to_us.min(start + RESOLUTION_US) - from_us.max(start);
    inside as f64 / RESOLUTION_US as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_buckets_count_fully_and_edges_by_overlap() {
        let mut timeline = CompletionTimeline::default();
        for i in 0..10u64 {
            timeline.add(i * RESOLUTION_US + 5_000, 1, 100, 10, i % 2 == 0);
        }
        let all = timeline.between(0, 10 * RESOLUTION_US);
        assert_eq!(all.requests, 10.0);
        assert_eq!(all.output_tokens, 100.0);
        assert_eq!(all.compliant_requests, 5.0);
        let half = timeline.between(RESOLUTION_US / 2, 3 * RESOLUTION_US);
        assert!((half.requests - 2.5).abs() < 1e-9);
        assert_eq!(timeline.between(7, 7).requests, 0.0);
        assert_eq!(
            timeline
                .between(50 * RESOLUTION_US, 60 * RESOLUTION_US)
                .requests,
            0.0
        );
    }
}
