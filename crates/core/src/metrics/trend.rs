//! Trends over the measurement windows, for soak runs: a least-squares slope per series with
//! its t-statistic (corrected for the autocorrelation of neighbouring windows), flagging gradual degradation — completions or output tokens per second
//! falling, or mean TTFT/E2E rising — when the slope is significant (|t| > 3) and the change
//! over the span is material (throughput −5 %, latency +10 %).

use super::windows::WindowReport;
pub use crate::report::stability::Trend;

/// |t| above which a slope is significant.
pub const SIGNIFICANT_T: f64 = 3.0;
/// Relative fall of a throughput series over the span that counts as degradation.
pub const THROUGHPUT_FALL: f64 = 0.05;
/// Relative rise of a latency series over the span that counts as degradation.
pub const LATENCY_RISE: f64 = 0.10;

/// A least-squares fit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Fit {
    /// Slope, y units per x unit.
    pub slope: f64,
    /// The slope's t-statistic (±∞ for a perfect fit).
    pub t_stat: f64,
    /// Mean of y.
    pub mean: f64,
    /// x span.
    pub span: f64,
    /// Standard deviation of the residuals around the line.
    pub residual_sd: f64,
}

/// Least-squares fit of `points`; `None` with fewer than 3 points or no x spread.
pub fn fit(points: &[(f64, f64)]) -> Option<Fit> {
    let n = points.len();
    if n < 3 {
        return None;
    }
    let nf = n as f64;
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / nf;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / nf;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    let slope = sxy / sxx;
    let residuals: Vec<f64> = points
        .iter()
        .map(|p| p.1 - mean_y - slope * (p.0 - mean_x))
        .collect();
    let residual: f64 = residuals.iter().map(|r| r * r).sum();
    // Neighbouring windows share requests, so residuals are autocorrelated; widen the
    // standard error by the AR(1) variance inflation sqrt((1 + ρ) / (1 − ρ)).
    let lag1: f64 = residuals.windows(2).map(|w| w[0] * w[1]).sum();
    let rho = if residual > 0.0 {
        (lag1 / residual).clamp(0.0, 0.9)
    } else {
        0.0
    };
    let se = (residual / (nf - 2.0) / sxx).sqrt() * ((1.0 + rho) / (1.0 - rho)).sqrt();
    let t_stat = if se > 0.0 {
        slope / se
    } else if slope == 0.0 {
        0.0
    } else {
        slope.signum() * f64::INFINITY
    };
    let (min_x, max_x) = points
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
            (lo.min(p.0), hi.max(p.0))
        });
    Some(Fit {
        slope,
        t_stat,
        mean: mean_y,
        span: max_x - min_x,
        residual_sd: (residual / (nf - 2.0)).sqrt(),
    })
}

/// A named series: (name, whether it is a throughput, points).
type Series<'a> = (&'a str, bool, Vec<(f64, f64)>);

/// Trends of the throughput and latency series over `rows` (windows of `width_secs`).
pub fn trends(rows: &[&WindowReport], width_secs: f64) -> Vec<Trend> {
    let per_sec = |v: u64| v as f64 / width_secs;
    let series: [Series<'_>; 4] = [
        (
            "completions_per_sec",
            true,
            rows.iter()
                .map(|w| (w.start_secs, per_sec(w.completions)))
                .collect(),
        ),
        (
            "output_tokens_per_sec",
            true,
            rows.iter()
                .map(|w| (w.start_secs, per_sec(w.output_tokens)))
                .collect(),
        ),
        (
            "mean_ttft_ms",
            false,
            rows.iter()
                .filter_map(|w| Some((w.start_secs, w.mean_ttft_ms?)))
                .collect(),
        ),
        (
            "mean_e2e_ms",
            false,
            rows.iter()
                .filter_map(|w| Some((w.start_secs, w.mean_e2e_ms?)))
                .collect(),
        ),
    ];
    series
        .into_iter()
        .filter_map(|(name, is_throughput, points)| {
            let fit = fit(&points)?;
            let relative_change = if fit.mean.abs() > 0.0 {
                fit.slope * fit.span / fit.mean
            } else {
                0.0
            };
            let degrading = if is_throughput {
                fit.t_stat < -SIGNIFICANT_T && relative_change < -THROUGHPUT_FALL
            } else {
                fit.t_stat > SIGNIFICANT_T && relative_change > LATENCY_RISE
            };
            Some(Trend {
                series: name.to_string(),
                slope_per_sec: fit.slope,
                t_stat: fit.t_stat,
                relative_change,
                degrading,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(t: f64, completions: u64, ttft: f64) -> WindowReport {
        WindowReport {
            start_secs: t,
            arrivals: completions,
            sent: completions,
            completions,
            failures: 0,
            output_tokens: completions * 100,
            in_flight: 3,
            mean_ttft_ms: Some(ttft),
            mean_e2e_ms: Some(ttft * 10.0),
            slo_attained: None,
        }
    }

    #[test]
    fn steady_series_do_not_degrade_and_drifting_ones_do() {
        let steady: Vec<WindowReport> = (0..60)
            .map(|i| row(f64::from(i), 20 + (i % 3) as u64, 100.0 + f64::from(i % 5)))
            .collect();
        let refs: Vec<&WindowReport> = steady.iter().collect();
        assert!(
            trends(&refs, 1.0).iter().all(|t| !t.degrading),
            "{:?}",
            trends(&refs, 1.0)
        );
        let drifting: Vec<WindowReport> = (0..60)
            .map(|i| {
                row(
                    f64::from(i),
                    30 - (i / 6) as u64,
                    100.0 + 2.0 * f64::from(i),
                )
            })
            .collect();
        let refs: Vec<&WindowReport> = drifting.iter().collect();
        let found = trends(&refs, 1.0);
        let degrading: Vec<&str> = found
            .iter()
            .filter(|t| t.degrading)
            .map(|t| t.series.as_str())
            .collect();
        assert_eq!(
            degrading,
            [
                "completions_per_sec",
                "output_tokens_per_sec",
                "mean_ttft_ms",
                "mean_e2e_ms"
            ]
        );
    }

    #[test]
    fn fit_is_exact_on_a_line() {
        let fit = fit(&[(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)]).unwrap();
        assert_eq!(fit.slope, 2.0);
        assert_eq!(fit.t_stat, f64::INFINITY);
        assert!(super::fit(&[(1.0, 1.0), (1.0, 2.0), (1.0, 3.0)]).is_none());
    }
}
