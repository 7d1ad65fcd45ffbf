//! Statistical verdicts on an attainment target, the way MLPerf LoadGen's early stopping
//! judges a p99 from a finite run: with `n` requests of which `t` missed, the target "at least
//! a fraction `p` of requests comply" is
//!
//! * **proven** when `P[Binomial(n, 1 − p) ≤ t] ≤ 1 − c` — had the true miss rate been as high
//!   as `1 − p`, so few misses would have been this unlikely (confidence `c`);
//! * **refuted** when `P[Binomial(n, 1 − p) ≥ t] ≤ 1 − c` — so many misses would have been this
//!   unlikely had the true miss rate been at most `1 − p`;
//! * **inconclusive** otherwise (more requests are needed).
//!
//! For `p = 0.99`, `c = 0.99`: 459 requests with no miss prove it, 662 with one, 2010 with ten.

pub use crate::report::capacity::Verdict;

/// `ln P[X = k]` for `X ~ Binomial(n, q)`, `0 < q < 1`, evaluated iteratively from `k = 0`.
fn log_pmfs(n: u64, q: f64, up_to: u64) -> impl Iterator<Item = f64> {
    let ratio = (q / (1.0 - q)).ln();
    let mut log_pmf = n as f64 * (1.0 - q).ln();
    (0..=up_to.min(n)).map(move |k| {
        let current = log_pmf;
        log_pmf += ((n - k) as f64).ln() - ((k + 1) as f64).ln() + ratio;
        current
    })
}

fn log_sum_exp(values: impl Iterator<Item = f64>) -> f64 {
    let values: Vec<f64> = values.collect();
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if max == f64::NEG_INFINITY {
        return max;
    }
    max + values.iter().map(|v| (v - max).exp()).sum::<f64>().ln()
}

/// `P[X ≤ k]` for `X ~ Binomial(n, q)`.
pub fn binomial_cdf(k: u64, n: u64, q: f64) -> f64 {
    if k >= n || q <= 0.0 {
        return 1.0;
    }
    if q >= 1.0 {
        return 0.0;
    }
    log_sum_exp(log_pmfs(n, q, k)).exp().min(1.0)
}

/// The fewest requests that prove attainment `p` at confidence `c` when `misses` of them
/// missed (MLPerf's `h + t`).
pub fn min_requests(misses: u64, p: f64, confidence: f64) -> u64 {
    let q = 1.0 - p;
    let alpha = 1.0 - confidence;
    let proves = |n: u64| binomial_cdf(misses, n, q) <= alpha;
    let mut high = misses.max(1) * 2 + 16;
    while !proves(high) {
        high *= 2;
        if high > 1 << 40 {
            return u64::MAX;
        }
    }
    let mut low = misses;
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if proves(mid) { high = mid } else { low = mid }
    }
    high
}

/// The verdict on attainment `p` from `n` requests with `misses` misses, at `confidence`.
pub fn judge(n: u64, misses: u64, p: f64, confidence: f64) -> Verdict {
    let q = 1.0 - p;
    let alpha = 1.0 - confidence;
    if n == 0 {
        return Verdict::Inconclusive;
    }
    if binomial_cdf(misses, n, q) <= alpha {
        return Verdict::Proven;
    }
    let at_least_misses = if misses == 0 {
        1.0
    } else {
        1.0 - binomial_cdf(misses - 1, n, q)
    };
    if at_least_misses <= alpha {
        Verdict::Refuted
    } else {
        Verdict::Inconclusive
    }
}

/// Requests a probe should measure so that a server whose true miss rate is half the budget
/// `1 − p` can still be proven compliant: the smallest `n` with
/// `min_requests(⌊n·(1 − p)/2⌋) ≤ n`.
pub fn probe_requests(p: f64, confidence: f64) -> u64 {
    let half_budget = (1.0 - p) / 2.0;
    let mut n = min_requests(0, p, confidence);
    loop {
        let allowed = (n as f64 * half_budget).floor() as u64;
        let needed = min_requests(allowed, p, confidence);
        if needed <= n || needed == u64::MAX {
            return n;
        }
        n = needed;
    }
}

/// The order statistics that bound the `p`-quantile of a distribution at `confidence`, from
/// `n` independent samples, free of any assumption on its shape: 1-based ranks `(lo, hi)` of
/// the sorted samples such that `x(lo) ≤ Q(p) ≤ x(hi)` with probability at least
/// `confidence` — each side missing with at most half the rest (`x(l) > Q(p)` when fewer
/// than `l` samples fall at or below it: `P[Binomial(n, p) < l]`). `None` when `n` samples
/// cannot bound it so (fewer than 6 for a median at 95 %). A measured median of 21 requests at
/// 95 % lies between the 6th and the 16th: where a server's latencies come in two modes — a
/// request's prompt alone in a step or beside another's — the median of so few requests
/// may sit in either, and a prediction is only wrong beyond that range.
pub fn quantile_ranks(n: u64, p: f64, confidence: f64) -> Option<(u64, u64)> {
    if n == 0 || !(0.0..=1.0).contains(&p) || !(0.0..1.0).contains(&confidence) {
        return None;
    }
    let tail = (1.0 - confidence) / 2.0;
    // The largest `lo` with `P[X ≤ lo − 1] ≤ tail`, the smallest `hi` with `P[X ≥ hi] ≤ tail`.
    let lo = (1..=n)
        .take_while(|&l| binomial_cdf(l - 1, n, p) <= tail)
        .last()?;
    let hi = (1..=n).find(|&h| 1.0 - binomial_cdf(h - 1, n, p) <= tail)?;
    Some((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reproduces_mlperf_early_stopping_counts() {
        for (misses, expected) in [
            (0, 459),
            (1, 662),
            (2, 838),
            (5, 1307),
            (10, 2010),
            (50, 6898),
            (100, 12_571),
        ] {
            assert_eq!(
                min_requests(misses, 0.99, 0.99),
                expected,
                "p99, {misses} misses"
            );
        }
        for (misses, expected) in [(0, 44), (10, 197), (100, 1246)] {
            assert_eq!(
                min_requests(misses, 0.90, 0.99),
                expected,
                "p90, {misses} misses"
            );
        }
    }

    #[test]
    fn verdicts() {
        assert_eq!(judge(459, 0, 0.99, 0.99), Verdict::Proven);
        assert_eq!(judge(458, 0, 0.99, 0.99), Verdict::Inconclusive);
        assert_eq!(judge(1000, 30, 0.99, 0.99), Verdict::Refuted);
        assert_eq!(judge(1000, 10, 0.99, 0.99), Verdict::Inconclusive);
        assert_eq!(judge(0, 0, 0.99, 0.99), Verdict::Inconclusive);
    }

    #[test]
    fn probes_are_long_enough_to_prove_half_the_budget() {
        let n = probe_requests(0.99, 0.99);
        assert!((1500..2100).contains(&n), "{n}");
        assert_eq!(judge(n, n / 200, 0.99, 0.99), Verdict::Proven);
        let n90 = probe_requests(0.90, 0.99);
        assert!((150..260).contains(&n90), "{n90}");
    }

    #[test]
    fn cdf_edges() {
        assert_eq!(binomial_cdf(5, 5, 0.3), 1.0);
        assert!((binomial_cdf(0, 10, 0.5) - 0.5f64.powi(10)).abs() < 1e-12);
        assert!((binomial_cdf(1, 2, 0.5) - 0.75).abs() < 1e-12);
    }

    #[test]
    fn quantile_ranks_match_the_binomial_tables() {
        // Median at 95 %: the ranks of the sign test's tables.
        for (n, expected) in [(6, (1, 6)), (10, (2, 9)), (21, (6, 16)), (45, (16, 30))] {
            assert_eq!(quantile_ranks(n, 0.5, 0.95), Some(expected), "n = {n}");
        }
        assert_eq!(quantile_ranks(5, 0.5, 0.95), None);
        // p90 of 100 samples at 95 %: between the 84th and the 96th.
        let (lo, hi) = quantile_ranks(100, 0.9, 0.95).unwrap();
        assert!(binomial_cdf(lo - 1, 100, 0.9) <= 0.025 && binomial_cdf(lo, 100, 0.9) > 0.025);
        assert!(1.0 - binomial_cdf(hi - 1, 100, 0.9) <= 0.025);
        assert!(1.0 - binomial_cdf(hi - 2, 100, 0.9) > 0.025);
        assert_eq!((lo, hi), (84, 96));
        assert_eq!(quantile_ranks(0, 0.5, 0.95), None);
        assert_eq!(quantile_ranks(21, 0.5, 1.0), None);
    }
}
