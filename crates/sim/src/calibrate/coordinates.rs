//! The coordinates the fit moves in and the loss it minimises: the logarithm of every rate
//! and of the latency, and for the small-batch factors the logarithm of each factor's step
//! above the next larger batch's, so the factors can only fall from the smallest batch to the
//! full rate's 1; residuals pass through a robust (Cauchy) loss.

use super::RATE_NAMES;

/// Largest logarithm of a factor (a GEMM 10⁹ times slower per token): the steps' sum stays
/// finite.
const MAX_LOG_FACTOR: f64 = 20.7;
/// The step a start gives factors that do not yet fall (all 1 at the start): small enough to
/// leave them near 1, large enough (in log) for the fit to grow or shrink them from there.
const START_STEP: f64 = 0.05;
/// Scale of the robust loss: a figure's log-ratio much beyond it pulls the constants little.
const ROBUST_SCALE: f64 = 0.02;

/// The fit's coordinates of constants whose logarithms are `natural` (in
/// [`Constants::values`](super::Constants::values) order, factors ascending by tokens): the
/// rates' and latency's as they are; each factor's as the log of its log-step over the next
/// (the last's over 1), a step at most 0 taken as [`START_STEP`].
pub(super) fn to_fit(natural: &[f64]) -> Vec<f64> {
    let (rates, factors) = natural.split_at(RATE_NAMES.len().min(natural.len()));
    let next = factors.iter().skip(1).copied().chain([0.0]);
    let steps = factors.iter().zip(next).map(|(here, next)| {
        let step = here - next;
        if step > 0.0 { step } else { START_STEP }.ln()
    });
    rates.iter().copied().chain(steps).collect()
}

/// The logarithms of the constants at the fit's coordinates `fit` (the inverse of
/// [`to_fit`] where the factors fall): every factor 1 or more, none below a larger batch's.
pub(super) fn to_natural(fit: &[f64]) -> Vec<f64> {
    let (rates, steps) = fit.split_at(RATE_NAMES.len().min(fit.len()));
    let mut factors: Vec<f64> = steps
        .iter()
        .rev()
        .scan(0.0, |sum: &mut f64, step| {
            *sum = (*sum + step.exp()).min(MAX_LOG_FACTOR);
            Some(*sum)
        })
        .collect();
    factors.reverse();
    rates.iter().copied().chain(factors).collect()
}

/// A residual whose square is the Cauchy loss `s² ln(1 + r²/s²)`: `r` itself while small; a
/// figure many scales off (a wave of requests the server split by microseconds of arrival, a
/// queue's noisy wait) pulls the constants about as one a few scales off would, so a few
/// figures the engine cannot reproduce do not bend every constant to them.
pub(super) fn robust(r: f64) -> f64 {
    let s = ROBUST_SCALE;
    r.signum() * s * (1.0 + (r / s).powi(2)).ln().sqrt()
}

/// The loss of plain least squares.
pub(super) fn squares(r: f64) -> f64 {
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn falling_factors_round_trip_and_flat_ones_start_falling_a_little() {
        let natural = [
            1.0,
            2.0,
            3.0,
            4.0,
            5.0,
            2.0_f64.ln(),
            1.5_f64.ln(),
            1.2_f64.ln(),
        ];
        let back = to_natural(&to_fit(&natural));
        for (a, b) in natural.iter().zip(&back) {
            assert!((a - b).abs() < 1e-12, "{natural:?} vs {back:?}");
        }
        let flat = to_natural(&to_fit(&[1.0, 2.0, 3.0, 4.0, 5.0, 0.0, 0.0]));
        assert_eq!(flat[..5], [1.0, 2.0, 3.0, 4.0, 5.0]);
        assert!((flat[5] - 2.0 * START_STEP).abs() < 1e-12, "{flat:?}");
        assert!((flat[6] - START_STEP).abs() < 1e-12, "{flat:?}");
    }

    #[test]
    fn any_coordinates_give_factors_of_1_or_more_falling_with_the_batch() {
        for fit in [[0.0, 0.0, 0.0, 0.0, 0.0, -30.0, 3.0, -2.0], [0.0; 8]] {
            let natural = to_natural(&fit);
            let factors = &natural[5..];
            assert!(factors.iter().all(|f| *f >= 0.0 && *f <= MAX_LOG_FACTOR));
            assert!(factors.windows(2).all(|w| w[0] >= w[1]), "{factors:?}");
        }
    }

    #[test]
    fn the_robust_loss_is_the_residual_while_small_and_grows_slowly_beyond() {
        assert!((robust(0.001) - 0.001).abs() < 1e-6);
        assert!((robust(-0.001) + 0.001).abs() < 1e-6);
        assert_eq!(robust(0.0), 0.0);
        // Ten scales off: the square is ln(101) ≈ 4.6 scales², not 100.
        let far = robust(10.0 * ROBUST_SCALE) / ROBUST_SCALE;
        assert!((far * far - 101.0_f64.ln()).abs() < 1e-9, "{far}");
    }
}
