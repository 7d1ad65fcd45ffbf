//! Quantile points of the latency distributions (`distributions_ms` in the report): the
//! values behind the CDF charts and the distribution comparison of `goodput compare` when no
//! journal is at hand. Computed from the aggregator's HDR histograms with the same percentile
//! method as every other figure (nearest rank, upper bucket edge, clamped to the exact
//! extremes), so `p50`, `p90`… of the summary appear here unchanged.

use super::histogram::LatencyHistogram;
pub use crate::report::distributions::{Distributions, QuantilePoint};

/// The percentiles reported as points: the exact minimum (0), every whole percentile from 1
/// to 99, then 99.5, 99.9, 99.99 and the exact maximum (100).
pub fn cdf_percentiles() -> Vec<f64> {
    let mut percentiles: Vec<f64> = (0..=99).map(f64::from).collect();
    percentiles.extend([99.5, 99.9, 99.99, 100.0]);
    percentiles
}

impl Distributions {
    /// The points of each histogram.
    pub fn from_histograms(
        ttft: &LatencyHistogram,
        tpot: &LatencyHistogram,
        itl: &LatencyHistogram,
        e2e: &LatencyHistogram,
    ) -> Self {
        Distributions {
            ttft: quantile_points(ttft),
            tpot: quantile_points(tpot),
            itl: quantile_points(itl),
            e2e: quantile_points(e2e),
        }
    }

    /// The points of a metric by name (`ttft`, `tpot`, `itl`, `e2e`).
    pub fn get(&self, metric: &str) -> Option<&[QuantilePoint]> {
        match metric {
            "ttft" => Some(&self.ttft),
            "tpot" => Some(&self.tpot),
            "itl" => Some(&self.itl),
            "e2e" => Some(&self.e2e),
            _ => None,
        }
    }
}

/// The points of [`cdf_percentiles`] for one histogram, ms; empty when it holds nothing.
pub fn quantile_points(histogram: &LatencyHistogram) -> Vec<QuantilePoint> {
    let (Some(min), Some(max)) = (histogram.min_us(), histogram.max_us()) else {
        return Vec::new();
    };
    cdf_percentiles()
        .into_iter()
        .map(|p| {
            let us = match p {
                0.0 => min,
                100.0 => max,
                _ => histogram.percentile_us(p).unwrap_or(max),
            };
            [p, us as f64 / 1000.0]
        })
        .collect()
}

/// The value at `percentile` (0–100) of a distribution given by its points, interpolating
/// linearly between neighbouring points; `None` for an empty distribution.
pub fn value_at(points: &[QuantilePoint], percentile: f64) -> Option<f64> {
    let first = points.first()?;
    if percentile <= first[0] {
        return Some(first[1]);
    }
    for pair in points.windows(2) {
        let ([p0, v0], [p1, v1]) = (pair[0], pair[1]);
        if percentile <= p1 {
            let weight = if p1 > p0 {
                (percentile - p0) / (p1 - p0)
            } else {
                1.0
            };
            return Some(v0 + weight * (v1 - v0));
        }
    }
    points.last().map(|point| point[1])
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::time::Duration;

    use super::*;

    #[test]
    fn points_match_the_summary_percentiles_and_exact_extremes() {
        let mut h = LatencyHistogram::new();
        for ms in 1..=200u64 {
            h.record(Duration::from_millis(ms));
        }
        let points = quantile_points(&h);
        assert_eq!(points.len(), cdf_percentiles().len());
        assert_eq!(points[0], [0.0, 1.0]);
        assert_eq!(*points.last().unwrap(), [100.0, 200.0]);
        let p90 = points.iter().find(|p| p[0] == 90.0).unwrap()[1];
        assert_eq!(p90, h.percentile_us(90.0).unwrap() as f64 / 1000.0);
        assert!(points.windows(2).all(|w| w[0][1] <= w[1][1]), "monotone");
        assert!(quantile_points(&LatencyHistogram::new()).is_empty());
    }

    #[test]
    fn interpolates_between_points() {
        let points = [[0.0, 10.0], [50.0, 20.0], [100.0, 40.0]];
        assert_eq!(value_at(&points, 25.0), Some(15.0));
        assert_eq!(value_at(&points, 75.0), Some(30.0));
        assert_eq!(value_at(&points, 100.0), Some(40.0));
        assert_eq!(value_at(&[], 50.0), None);
    }
}
