//! [`BinnedTally`]: samples and misses of an SLO check by scheduled time, and their
//! overdispersion — how much more the misses cluster than independent samples would.
//!
//! Latency misses come in bursts (a busy period delays every request in it), so `n` requests
//! with `t` misses carry less evidence than `n` independent samples: a binomial verdict on
//! them would be overconfident. The variance of the misses over about twenty consecutive
//! blocks of the run, against the binomial variance, estimates the design effect
//! `φ ≥ 1`; verdicts then use `n / φ` samples with `t / φ` misses (the effective sample size).

/// Bin width of the tally, µs of scheduled time.
const BIN_US: u64 = 1_000_000;
/// Blocks the run is grouped into for the variance.
const BLOCKS: u64 = 20;

/// Samples and misses per second of scheduled time.
#[derive(Debug, Clone, Default)]
pub struct BinnedTally {
    bins: Vec<(u64, u64)>,
}

impl BinnedTally {
    /// Adds `samples` samples with `misses` misses of a request scheduled at `scheduled_us`.
    pub fn add(&mut self, scheduled_us: u64, samples: u64, misses: u64) {
        let index = usize::try_from(scheduled_us / BIN_US)
            .unwrap_or(usize::MAX)
            .min(1 << 24);
        if self.bins.len() <= index {
            self.bins.resize(index + 1, (0, 0));
        }
        self.bins[index].0 += samples;
        self.bins[index].1 += misses;
    }

    /// The design effect `φ ≥ 1` of the misses (1 when there is too little to tell).
    pub fn overdispersion(&self) -> f64 {
        let (n, t): (u64, u64) = self
            .bins
            .iter()
            .fold((0, 0), |(n, t), b| (n + b.0, t + b.1));
        if n == 0 || t == 0 || t == n {
            return 1.0;
        }
        let p = t as f64 / n as f64;
        let per_block = n.div_ceil(BLOCKS).max(1);
        let mut blocks: Vec<(u64, u64)> = Vec::new();
        let mut current = (0u64, 0u64);
        for &(samples, misses) in self.bins.iter().filter(|b| b.0 > 0) {
            current = (current.0 + samples, current.1 + misses);
            if current.0 >= per_block {
                blocks.push(current);
                current = (0, 0);
            }
        }
        if current.0 > 0 {
            blocks.push(current);
        }
        if blocks.len() < 4 {
            return 1.0;
        }
        let chi2: f64 = blocks
            .iter()
            .map(|&(samples, misses)| {
                let expected = samples as f64 * p;
                (misses as f64 - expected).powi(2) / (expected * (1.0 - p))
            })
            .sum();
        (chi2 / (blocks.len() - 1) as f64).max(1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn independent_misses_have_no_excess_and_bursts_do() {
        let mut spread = BinnedTally::default();
        let mut bursty = BinnedTally::default();
        for second in 0..200u64 {
            // 10 requests a second, one miss in ten: spread evenly, or in bursts of four
            // seconds every forty.
            spread.add(second * BIN_US, 10, 1);
            bursty.add(second * BIN_US, 10, if second % 40 < 4 { 10 } else { 0 });
        }
        assert!(spread.overdispersion() < 1.5, "{}", spread.overdispersion());
        assert!(bursty.overdispersion() > 5.0, "{}", bursty.overdispersion());
        assert_eq!(BinnedTally::default().overdispersion(), 1.0);
    }
}
