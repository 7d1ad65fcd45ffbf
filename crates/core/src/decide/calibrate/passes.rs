//! Probes measured in several passes: each probe's figures combined over its passes
//! ([`combine_passes`]: the median of each) and how closely the server repeated them
//! ([`Repeatability`]: the relative standard deviation of one pass's median).

use serde::{Deserialize, Serialize};

use super::{ProbeMeasurement, Tail};
use crate::decide::significance::median;

/// How closely the server repeated the same probes from one pass to the next: for each
/// figure, the relative standard deviation of one pass's median about the mean of its passes,
/// pooled (root mean square) over every probe measured at least twice.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Repeatability {
    /// The most passes any probe was measured in.
    pub passes: u32,
    /// Probes measured in at least two passes (the ones pooled).
    pub probes: u32,
    /// TTFT median's relative standard deviation.
    pub ttft: f64,
    /// TPOT median's (over the probes that measured one).
    pub tpot: f64,
    /// E2E median's.
    pub e2e: f64,
}

impl Repeatability {
    /// The pooled relative standard deviation of the figures a calibration fits (TTFT and
    /// TPOT): what its residuals would show if the engine were exact.
    pub fn fitted_figures(&self) -> f64 {
        ((self.ttft.powi(2) + self.tpot.powi(2)) / 2.0).sqrt()
    }
}

/// Each probe's measurements combined over the passes that measured it (`passes[k][i]`:
/// probe `i` in pass `k`; a later pass may stop short, as when the budget ends it), and the
/// server's repeatability (`None` when no probe was measured twice).
pub fn combine_passes(
    passes: &[Vec<ProbeMeasurement>],
) -> (Vec<ProbeMeasurement>, Option<Repeatability>) {
    let probes = passes.iter().map(Vec::len).max().unwrap_or(0);
    let by_probe: Vec<Vec<&ProbeMeasurement>> = (0..probes)
        .map(|i| passes.iter().filter_map(|pass| pass.get(i)).collect())
        .collect();
    let combined = by_probe.iter().filter_map(|ms| combine(ms)).collect();
    let repeated: Vec<&Vec<&ProbeMeasurement>> =
        by_probe.iter().filter(|ms| ms.len() >= 2).collect();
    if repeated.is_empty() {
        return (combined, None);
    }
    let pooled = |figure: fn(&ProbeMeasurement) -> f64| {
        let sds: Vec<f64> = repeated
            .iter()
            .filter_map(|ms| relative_sd(&ms.iter().map(|m| figure(m)).collect::<Vec<_>>()))
            .collect();
        (sds.iter().map(|s| s * s).sum::<f64>() / sds.len().max(1) as f64).sqrt()
    };
    let repeatability = Repeatability {
        passes: repeated.iter().map(|ms| ms.len()).max().unwrap_or(0) as u32,
        probes: repeated.len() as u32,
        ttft: pooled(|m| m.ttft),
        tpot: pooled(|m| m.tpot),
        e2e: pooled(|m| m.e2e),
    };
    (combined, Some(repeatability))
}

/// One probe's passes as one measurement: the median of each figure (of two, their mean).
fn combine(passes: &[&ProbeMeasurement]) -> Option<ProbeMeasurement> {
    let first = passes.first()?;
    let median_of = |figure: &dyn Fn(&ProbeMeasurement) -> f64| {
        median(&passes.iter().map(|m| figure(m)).collect::<Vec<_>>())
    };
    let tail = |i: usize| Tail {
        p95: median_of(&|m| m.tails[i].p95),
        p99: median_of(&|m| m.tails[i].p99),
    };
    Some(ProbeMeasurement {
        probe: first.probe,
        prompt_tokens: median_of(&|m| m.prompt_tokens),
        ttft: median_of(&|m| m.ttft),
        tpot: median_of(&|m| m.tpot),
        e2e: median_of(&|m| m.e2e),
        requests_per_sec: median_of(&|m| m.requests_per_sec),
        tails: [tail(0), tail(1), tail(2)],
    })
}

/// The sample standard deviation of `values` over their mean (`None` for fewer than two, or
/// a mean of 0: a figure not measured).
fn relative_sd(values: &[f64]) -> Option<f64> {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    if values.len() < 2 || mean <= 0.0 {
        return None;
    }
    let ss: f64 = values.iter().map(|v| (v / mean - 1.0).powi(2)).sum();
    Some((ss / (n - 1.0)).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::calibrate::CalibrationProbe;

    fn measured(concurrency: u32, ttft: f64, tpot: f64, e2e: f64) -> ProbeMeasurement {
        ProbeMeasurement {
            probe: CalibrationProbe {
                concurrency,
                input_tokens: 64,
                output_tokens: 48,
                requests: 3 * concurrency,
            },
            prompt_tokens: 90.0 + f64::from(concurrency),
            ttft,
            tpot,
            e2e,
            requests_per_sec: 1.0 / e2e,
            tails: [Tail::default(); 3],
        }
    }

    #[test]
    fn two_passes_combine_to_their_means_and_pool_the_relative_spread() {
        // Probe 1: TTFT 0.09 and 0.11 s (mean 0.1: one pass's sample sd 0.01·√2 → 14.14 %);
        // TPOT 0.01 both times (0 %). Probe 2: TTFT 0.2 both times, TPOT 0.018 and 0.022
        // (14.14 %). Pooled over the two probes: TTFT √((0.02 + 0)/2) = 10 %, TPOT 10 %.
        let passes = vec![
            vec![measured(1, 0.09, 0.010, 0.5), measured(4, 0.2, 0.018, 1.0)],
            vec![measured(1, 0.11, 0.010, 0.5), measured(4, 0.2, 0.022, 1.0)],
        ];
        let (combined, repeatability) = combine_passes(&passes);
        assert_eq!(combined.len(), 2);
        assert!((combined[0].ttft - 0.1).abs() < 1e-12);
        assert!((combined[1].tpot - 0.02).abs() < 1e-12);
        assert_eq!(combined[1].probe.concurrency, 4);
        let r = repeatability.unwrap();
        assert_eq!((r.passes, r.probes), (2, 2));
        assert!((r.ttft - 0.1).abs() < 1e-9, "{r:?}");
        assert!((r.tpot - 0.1).abs() < 1e-9, "{r:?}");
        assert!(r.e2e.abs() < 1e-12, "{r:?}");
        assert!((r.fitted_figures() - 0.1).abs() < 1e-9);
    }

    #[test]
    fn three_passes_take_the_median_and_a_short_last_pass_still_counts() {
        let passes = vec![
            vec![measured(1, 0.1, 0.01, 0.5), measured(2, 0.3, 0.02, 1.0)],
            vec![measured(1, 0.4, 0.01, 0.5), measured(2, 0.3, 0.02, 1.0)],
            vec![measured(1, 0.2, 0.01, 0.5)],
        ];
        let (combined, repeatability) = combine_passes(&passes);
        // Probe 1's TTFT: the median of 0.1, 0.4, 0.2, not the mean (0.233).
        assert!((combined[0].ttft - 0.2).abs() < 1e-12);
        assert!((combined[1].ttft - 0.3).abs() < 1e-12);
        let r = repeatability.unwrap();
        assert_eq!((r.passes, r.probes), (3, 2));
        // Probe 1: mean 0.2333, deviations −0.5714, +0.7143, −0.1429 → sd √(0.8571/2) = 65.5 %;
        // probe 2: 0. Pooled: √(0.4286/2) = 46.3 %.
        assert!((r.ttft - 0.4629).abs() < 1e-3, "{r:?}");
    }

    #[test]
    fn one_pass_is_its_own_combination_with_no_repeatability() {
        let pass = vec![measured(1, 0.1, 0.01, 0.5)];
        let (combined, repeatability) = combine_passes(std::slice::from_ref(&pass));
        assert_eq!(combined, pass);
        assert_eq!(repeatability, None);
        assert_eq!(combine_passes(&[]), (Vec::new(), None));
    }
}
