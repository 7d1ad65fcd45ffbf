//! Mergeable HDR histograms: [`LatencyHistogram`] of durations (microseconds) and
//! [`CountHistogram`] of counts (tokens per request), each with an exact count, sum, minimum
//! and maximum kept beside it.
//!
//! Percentile method: `p` is the smallest recorded value such that at least `p`% of samples are
//! ≤ it (nearest rank), reported as the upper edge of its HDR bucket (so never below the true
//! value) and clamped to the exact maximum; with 3 significant digits the relative error is
//! below 0.1 %. Mean, minimum and maximum are exact.

use std::ops::AddAssign;
use std::time::Duration;

use hdrhistogram::Histogram;

/// Significant decimal digits kept by the histogram.
pub const SIGNIFICANT_DIGITS: u8 = 3;

/// A distribution of durations.
#[derive(Debug, Clone)]
pub struct LatencyHistogram {
    histogram: Histogram<u64>,
    count: u64,
    sum_us: u128,
    min_us: u64,
    max_us: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    /// An empty histogram.
    pub fn new() -> Self {
        LatencyHistogram {
            // Auto-resizing from 1 µs; 3 digits are always a valid configuration.
            histogram: Histogram::new(SIGNIFICANT_DIGITS)
                .unwrap_or_else(|_| unreachable!("3 significant digits are valid")),
            count: 0,
            sum_us: 0,
            min_us: u64::MAX,
            max_us: 0,
        }
    }

    /// Records one sample.
    pub fn record(&mut self, value: Duration) {
        self.record_n(value, 1);
    }

    /// Records `n` samples of the same value (e.g. the per-token gaps of one chunk).
    pub fn record_n(&mut self, value: Duration, n: u64) {
        if n == 0 {
            return;
        }
        let us = u64::try_from(value.as_micros()).unwrap_or(u64::MAX);
        self.record_micros_n(us, n);
    }

    /// Records `n` samples of `us` microseconds.
    pub fn record_micros_n(&mut self, us: u64, n: u64) {
        if n == 0 {
            return;
        }
        // Auto-resize makes recording infallible for any u64.
        let _ = self.histogram.record_n(us, n);
        self.count += n;
        self.sum_us += u128::from(us) * u128::from(n);
        self.min_us = self.min_us.min(us);
        self.max_us = self.max_us.max(us);
    }

    /// Samples recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Exact mean, µs.
    pub fn mean_us(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_us as f64 / self.count as f64)
    }

    /// Exact minimum, µs.
    pub fn min_us(&self) -> Option<u64> {
        (self.count > 0).then_some(self.min_us)
    }

    /// Exact maximum, µs.
    pub fn max_us(&self) -> Option<u64> {
        (self.count > 0).then_some(self.max_us)
    }

    /// The `percentile` (0–100) value, µs (see the module doc for the method).
    pub fn percentile_us(&self, percentile: f64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        let value = self
            .histogram
            .value_at_percentile(percentile.clamp(0.0, 100.0));
        Some(value.clamp(self.min_us, self.max_us))
    }

    /// Fraction of samples ≤ `threshold`.
    pub fn fraction_at_or_below(&self, threshold: Duration) -> Option<f64> {
        if self.count == 0 {
            return None;
        }
        let us = u64::try_from(threshold.as_micros()).unwrap_or(u64::MAX);
        let below = self.histogram.count_between(0, us);
        Some(below as f64 / self.count as f64)
    }
}

impl AddAssign<&LatencyHistogram> for LatencyHistogram {
    fn add_assign(&mut self, other: &LatencyHistogram) {
        if other.count == 0 {
            return;
        }
        // Both histograms auto-resize, so adding cannot fail.
        let _ = self.histogram.add(&other.histogram);
        self.count += other.count;
        self.sum_us += other.sum_us;
        self.min_us = self.min_us.min(other.min_us);
        self.max_us = self.max_us.max(other.max_us);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn nearest_rank_percentiles_within_a_tenth_of_a_percent() {
        let mut h = LatencyHistogram::new();
        for ms in 1..=100u64 {
            h.record(Duration::from_millis(ms));
        }
        for (p, expected_ms) in [(50.0, 50.0), (90.0, 90.0), (99.0, 99.0), (100.0, 100.0)] {
            let got = h.percentile_us(p).unwrap() as f64 / 1000.0;
            assert!(
                (got - expected_ms).abs() / expected_ms < 0.001,
                "p{p}: {got}"
            );
        }
        assert_eq!(h.mean_us(), Some(50_500.0));
        assert_eq!(h.max_us(), Some(100_000));
        assert_eq!(h.min_us(), Some(1_000));
    }

    #[test]
    fn merging_parts_equals_recording_the_whole() {
        let values: Vec<u64> = (0..1000).map(|i| (i * 7919) % 50_000 + 1).collect();
        let mut whole = LatencyHistogram::new();
        let mut a = LatencyHistogram::new();
        let mut b = LatencyHistogram::new();
        for (i, &v) in values.iter().enumerate() {
            whole.record_micros_n(v, 1);
            if i % 3 == 0 {
                a.record_micros_n(v, 1)
            } else {
                b.record_micros_n(v, 1)
            }
        }
        a += &b;
        assert_eq!(a.count(), whole.count());
        assert_eq!(a.mean_us(), whole.mean_us());
        for p in [50.0, 90.0, 99.0, 99.9] {
            assert_eq!(a.percentile_us(p), whole.percentile_us(p));
        }
    }

    #[test]
    fn weighted_samples_and_fractions() {
        let mut h = LatencyHistogram::new();
        h.record_n(Duration::from_millis(10), 3);
        h.record(Duration::from_millis(40));
        assert_eq!(h.count(), 4);
        // The upper edge of 10 ms's bucket: within 0.1 % above the exact value.
        let p75 = h.percentile_us(75.0).unwrap();
        assert!((10_000..=10_010).contains(&p75), "{p75}");
        assert_eq!(
            h.fraction_at_or_below(Duration::from_millis(20)),
            Some(0.75)
        );
        assert!(LatencyHistogram::new().percentile_us(50.0).is_none());
    }
}

/// A distribution of non-negative counts (e.g. tokens per request).
#[derive(Debug, Clone, Default)]
pub struct CountHistogram(LatencyHistogram);

impl CountHistogram {
    /// Records one value.
    pub fn record(&mut self, value: u64) {
        self.0.record_micros_n(value, 1);
    }

    /// Values recorded.
    pub fn count(&self) -> u64 {
        self.0.count()
    }

    /// Exact mean.
    pub fn mean(&self) -> Option<f64> {
        self.0.mean_us()
    }

    /// Exact maximum.
    pub fn max(&self) -> Option<u64> {
        self.0.max_us()
    }

    /// Exact minimum.
    pub fn min(&self) -> Option<u64> {
        self.0.min_us()
    }

    /// The `percentile` (0–100) value (nearest rank, 3 significant digits).
    pub fn percentile(&self, percentile: f64) -> Option<u64> {
        self.0.percentile_us(percentile)
    }
}

impl AddAssign<&CountHistogram> for CountHistogram {
    fn add_assign(&mut self, other: &CountHistogram) {
        self.0 += &other.0;
    }
}
