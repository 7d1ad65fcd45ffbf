//! Whether two latency distributions differ: the Mann–Whitney U test over per-request values
//! (when both journals are at hand), or a bootstrap over the reports' quantile points
//! (otherwise). A difference is **significant** when it is both statistically significant
//! (two-sided p below `alpha`) and large enough to matter (the median moved by at least
//! `min_effect` of the baseline median): identical reruns never differ by the second test,
//! and with thousands of samples a 0.1 % shift is "significant" by the first alone.

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::metrics::quantiles::{QuantilePoint, value_at};

/// Which test produced a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Mann–Whitney U over per-request values (normal approximation with tie correction).
    MannWhitney,
    /// Bootstrap of the median difference, resampling distributions rebuilt from quantile
    /// points.
    BootstrapQuantiles,
}

impl Method {
    /// A name for people.
    pub fn describe(self) -> &'static str {
        match self {
            Method::MannWhitney => "Mann-Whitney U over per-request values",
            Method::BootstrapQuantiles => {
                "bootstrap of the median over the reports' quantile points"
            }
        }
    }
}

/// The thresholds of a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// Two-sided p-value below which a difference is statistically significant.
    pub alpha: f64,
    /// Smallest relative change of the median that counts (0.05 = 5 %).
    pub min_effect: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            alpha: 0.01,
            min_effect: 0.05,
        }
    }
}

/// The outcome of comparing two samples of one metric (`a` the baseline, `b` the candidate).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestResult {
    /// The test used.
    pub method: Method,
    /// Samples of the baseline.
    pub n_a: u64,
    /// Samples of the candidate.
    pub n_b: u64,
    /// Baseline median.
    pub median_a: f64,
    /// Candidate median.
    pub median_b: f64,
    /// `(median_b − median_a) / median_a` (`None` when the baseline median is 0).
    pub relative_shift: Option<f64>,
    /// Two-sided p-value.
    pub p_value: f64,
    /// 95 % interval of `median_b − median_a` (bootstrap only).
    pub shift_interval: Option<[f64; 2]>,
    /// Statistically significant and at least `min_effect`.
    pub significant: bool,
}

/// Mann–Whitney U test of `a` against `b` (both non-empty).
pub fn mann_whitney(a: &[f64], b: &[f64], thresholds: Thresholds) -> Option<TestResult> {
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let (n_a, n_b) = (a.len() as f64, b.len() as f64);
    let mut all: Vec<(f64, bool)> = a
        .iter()
        .map(|&v| (v, true))
        .chain(b.iter().map(|&v| (v, false)))
        .collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    let (mut rank_sum_a, mut tie_term) = (0.0, 0.0);
    let mut i = 0;
    while i < all.len() {
        let mut j = i;
        while j + 1 < all.len() && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let average_rank = (i + j) as f64 / 2.0 + 1.0;
        let ties = (j - i + 1) as f64;
        tie_term += ties * ties * ties - ties;
        rank_sum_a += average_rank * all[i..=j].iter().filter(|(_, in_a)| *in_a).count() as f64;
        i = j + 1;
    }
    let u_a = rank_sum_a - n_a * (n_a + 1.0) / 2.0;
    let n = n_a + n_b;
    let mean = n_a * n_b / 2.0;
    let variance = n_a * n_b / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)).max(1.0));
    let p_value = if variance <= 0.0 {
        1.0
    } else {
        let z = ((u_a - mean).abs() - 0.5).max(0.0) / variance.sqrt();
        (2.0 * normal_upper_tail(z)).min(1.0)
    };
    let (median_a, median_b) = (median(a), median(b));
    Some(verdict(
        Method::MannWhitney,
        (a.len() as u64, b.len() as u64),
        (median_a, median_b),
        p_value,
        None,
        thresholds,
    ))
}

/// Bootstrap test of the median difference between two distributions known by their quantile
/// points and sample counts. Each side is rebuilt as `n` values at evenly spaced quantiles
/// (at most `MAX_REBUILT` of them: fewer makes the interval wider, never narrower), then both
/// are resampled with replacement `resamples` times with a fixed seed, so the verdict is
/// reproducible.
pub fn bootstrap_quantiles(
    a: (&[QuantilePoint], u64),
    b: (&[QuantilePoint], u64),
    resamples: usize,
    thresholds: Thresholds,
) -> Option<TestResult> {
    let rebuilt_a = rebuild(a.0, a.1)?;
    let rebuilt_b = rebuild(b.0, b.1)?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(0x9e37_79b9_7f4a_7c15);
    let mut shifts: Vec<f64> = (0..resamples.max(100))
        .map(|_| resampled_median(&rebuilt_b, &mut rng) - resampled_median(&rebuilt_a, &mut rng))
        .collect();
    shifts.sort_by(f64::total_cmp);
    let at = |q: f64| shifts[((shifts.len() - 1) as f64 * q).round() as usize];
    let interval = [at(0.025), at(0.975)];
    let below = shifts.iter().filter(|s| **s <= 0.0).count() as f64;
    let above = shifts.iter().filter(|s| **s >= 0.0).count() as f64;
    let total = shifts.len() as f64;
    let p_value = (2.0 * below.min(above) / total).min(1.0);
    let medians = (value_at(a.0, 50.0)?, value_at(b.0, 50.0)?);
    Some(verdict(
        Method::BootstrapQuantiles,
        (a.1, b.1),
        medians,
        p_value,
        Some(interval),
        thresholds,
    ))
}

/// Largest sample rebuilt from quantile points per side.
const MAX_REBUILT: u64 = 2000;

fn rebuild(points: &[QuantilePoint], count: u64) -> Option<Vec<f64>> {
    if points.is_empty() || count == 0 {
        return None;
    }
    let n = count.min(MAX_REBUILT);
    (0..n)
        .map(|i| value_at(points, 100.0 * (i as f64 + 0.5) / n as f64))
        .collect()
}

fn resampled_median(values: &[f64], rng: &mut Xoshiro256PlusPlus) -> f64 {
    let mut sample: Vec<f64> = (0..values.len())
        .map(|_| values[rng.random_range(0..values.len())])
        .collect();
    median_in_place(&mut sample)
}

fn verdict(
    method: Method,
    (n_a, n_b): (u64, u64),
    (median_a, median_b): (f64, f64),
    p_value: f64,
    shift_interval: Option<[f64; 2]>,
    thresholds: Thresholds,
) -> TestResult {
    let relative_shift = (median_a != 0.0).then(|| (median_b - median_a) / median_a);
    let large_enough = relative_shift.is_some_and(|s| s.abs() >= thresholds.min_effect);
    TestResult {
        method,
        n_a,
        n_b,
        median_a,
        median_b,
        relative_shift,
        p_value,
        shift_interval,
        significant: p_value < thresholds.alpha && large_enough,
    }
}

/// The median (mean of the two middle values for an even count).
pub fn median(values: &[f64]) -> f64 {
    median_in_place(&mut values.to_vec())
}

fn median_in_place(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_unstable_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

/// `P(Z > z)` for a standard normal `Z`, via the complementary error function (Numerical
/// Recipes' Chebyshev fit, relative error below 1.2e-7).
pub fn normal_upper_tail(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let value = t * poly.exp();
    if x >= 0.0 { value } else { 2.0 - value }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::metrics::LatencyHistogram;
    use crate::metrics::quantiles::quantile_points;

    fn sample(n: usize, center: f64, seed: u64) -> Vec<f64> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        (0..n)
            .map(|_| center * (0.8 + 0.4 * rng.random::<f64>()))
            .collect()
    }

    #[test]
    fn normal_tail_matches_tables() {
        assert!((normal_upper_tail(0.0) - 0.5).abs() < 1e-7);
        assert!((normal_upper_tail(1.959_964) - 0.025).abs() < 1e-6);
        assert!((normal_upper_tail(-1.0) - 0.841_344_7).abs() < 1e-6);
    }

    #[test]
    fn mann_whitney_detects_a_shift_and_not_noise() {
        let base = sample(300, 200.0, 1);
        let slower = sample(300, 240.0, 2);
        let rerun = sample(300, 200.0, 3);
        let t = Thresholds::default();
        let shifted = mann_whitney(&base, &slower, t).unwrap();
        assert!(
            shifted.significant && shifted.p_value < 1e-10,
            "{shifted:?}"
        );
        assert!((shifted.relative_shift.unwrap() - 0.2).abs() < 0.05);
        let same = mann_whitney(&base, &base, t).unwrap();
        assert_eq!(same.p_value, 1.0);
        assert!(!same.significant);
        assert!(!mann_whitney(&base, &rerun, t).unwrap().significant);
    }

    #[test]
    fn mann_whitney_small_exact_case() {
        // a = {1,2,3}, b = {4,5,6}: U_a = 0, z = (4.5 − 0.5)/sqrt(5.25) = 1.746, p = 0.0809.
        let r = mann_whitney(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0], Thresholds::default()).unwrap();
        assert!((r.p_value - 0.0809).abs() < 1e-3, "{}", r.p_value);
    }

    fn points(values: &[f64]) -> Vec<QuantilePoint> {
        let mut h = LatencyHistogram::new();
        for v in values {
            h.record_micros_n((v * 1000.0) as u64, 1);
        }
        quantile_points(&h)
    }

    #[test]
    fn bootstrap_over_quantile_points() {
        let base = sample(400, 200.0, 4);
        let slower = sample(400, 240.0, 5);
        let t = Thresholds::default();
        let (pa, pb) = (points(&base), points(&slower));
        let shifted = bootstrap_quantiles((&pa, 400), (&pb, 400), 1000, t).unwrap();
        assert!(shifted.significant, "{shifted:?}");
        let [low, high] = shifted.shift_interval.unwrap();
        assert!(low > 0.0 && high < 80.0, "{low} {high}");
        let same = bootstrap_quantiles((&pa, 400), (&pa, 400), 1000, t).unwrap();
        assert!(!same.significant && same.p_value > 0.2, "{same:?}");
    }
}
