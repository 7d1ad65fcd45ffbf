//! Per-window time series over the run's timeline (arrivals, sends, completions, failures,
//! output tokens, in-flight) and the stability verdict drawn from them.
//!
//! Stability (documented in `docs/metrics.md`): over the second half of the measured arrival
//! span — so a start-up ramp does not count — the system is **unstable** when the in-flight
//! count grows (least-squares slope with t-statistic > 3 and total growth over that half above
//! max(2, 10 % of the mean in-flight)) or when completions fall behind arrivals (fewer than
//! 90 % as many completions as arrivals, with at least 20 arrivals).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Counts per window of fixed width, indexed from the run start.
#[derive(Debug, Clone)]
pub struct Windows {
    width_us: u64,
    arrivals: Vec<u64>,
    sent: Vec<u64>,
    completions: Vec<u64>,
    failures: Vec<u64>,
    output_tokens: Vec<u64>,
}

/// One window of the report's time series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowReport {
    /// Window start, seconds since the run start.
    pub start_secs: f64,
    /// Requests scheduled in the window.
    pub arrivals: u64,
    /// Requests sent in the window.
    pub sent: u64,
    /// Requests completed successfully in the window.
    pub completions: u64,
    /// Requests that failed in the window.
    pub failures: u64,
    /// Output tokens received in the window.
    pub output_tokens: u64,
    /// Requests scheduled but not finished at the window's end (client queue included).
    pub in_flight: u64,
}

/// The stability verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stability {
    /// Whether the queue stayed stable.
    pub stable: bool,
    /// Least-squares growth of the in-flight count, requests per second.
    pub queue_growth_per_sec: Option<f64>,
    /// Completions ÷ arrivals over the assessed span.
    pub completion_ratio: Option<f64>,
    /// Windows the verdict is based on.
    pub windows_assessed: usize,
    /// Why, in words.
    pub reason: String,
}

impl Windows {
    /// Empty series of `width` windows.
    pub fn new(width: Duration) -> Self {
        Windows {
            width_us: u64::try_from(width.as_micros()).unwrap_or(u64::MAX).max(1),
            arrivals: Vec::new(),
            sent: Vec::new(),
            completions: Vec::new(),
            failures: Vec::new(),
            output_tokens: Vec::new(),
        }
    }

    /// Window width.
    pub fn width(&self) -> Duration {
        Duration::from_micros(self.width_us)
    }

    fn bump(series: &mut Vec<u64>, index: usize, amount: u64) {
        if series.len() <= index {
            series.resize(index + 1, 0);
        }
        series[index] += amount;
    }

    fn index(&self, at_us: u64) -> usize {
        usize::try_from(at_us / self.width_us).unwrap_or(usize::MAX)
    }

    /// A request scheduled at `at_us`.
    pub fn add_arrival(&mut self, at_us: u64) {
        let i = self.index(at_us);
        Self::bump(&mut self.arrivals, i, 1);
    }

    /// A request sent at `at_us`.
    pub fn add_sent(&mut self, at_us: u64) {
        let i = self.index(at_us);
        Self::bump(&mut self.sent, i, 1);
    }

    /// A request that ended at `at_us`, successfully or not.
    pub fn add_end(&mut self, at_us: u64, ok: bool) {
        let i = self.index(at_us);
        Self::bump(
            if ok {
                &mut self.completions
            } else {
                &mut self.failures
            },
            i,
            1,
        );
    }

    /// `tokens` output tokens received at `at_us`.
    pub fn add_output_tokens(&mut self, at_us: u64, tokens: u64) {
        let i = self.index(at_us);
        Self::bump(&mut self.output_tokens, i, tokens);
    }

    fn len(&self) -> usize {
        [
            &self.arrivals,
            &self.sent,
            &self.completions,
            &self.failures,
            &self.output_tokens,
        ]
        .iter()
        .map(|s| s.len())
        .max()
        .unwrap_or(0)
    }

    /// The whole series as report rows.
    pub fn report(&self) -> Vec<WindowReport> {
        let at = |series: &Vec<u64>, i: usize| series.get(i).copied().unwrap_or(0);
        let mut in_flight: i64 = 0;
        (0..self.len())
            .map(|i| {
                let arrivals = at(&self.arrivals, i);
                let ended = at(&self.completions, i) + at(&self.failures, i);
                in_flight +=
                    i64::try_from(arrivals).unwrap_or(i64::MAX) - i64::try_from(ended).unwrap_or(0);
                WindowReport {
                    start_secs: (i as u64 * self.width_us) as f64 / 1e6,
                    arrivals,
                    sent: at(&self.sent, i),
                    completions: at(&self.completions, i),
                    failures: at(&self.failures, i),
                    output_tokens: at(&self.output_tokens, i),
                    in_flight: u64::try_from(in_flight.max(0)).unwrap_or(0),
                }
            })
            .collect()
    }

    /// Judges stability over the windows between `start_us` and `end_us` (the measured
    /// arrival span), using its second half.
    pub fn stability(&self, start_us: u64, end_us: u64) -> Stability {
        let rows = self.report();
        let span = end_us.saturating_sub(start_us);
        let from = self.index(start_us + span / 2).saturating_add(1);
        let to = self.index(end_us); // exclusive: the last window is partial
        let assessed: Vec<&WindowReport> = rows.iter().take(to).skip(from).collect();
        let arrivals: u64 = assessed.iter().map(|w| w.arrivals).sum();
        let completions: u64 = assessed.iter().map(|w| w.completions + w.failures).sum();
        let ratio = (arrivals > 0).then(|| completions as f64 / arrivals as f64);
        let trend = in_flight_trend(&assessed, self.width_us as f64 / 1e6);
        let mut stable = true;
        let mut reason = String::from("in-flight requests did not grow and completions kept pace");
        if let Some(trend) = &trend {
            let growth = trend.slope * trend.span_secs;
            if trend.slope > 0.0 && trend.t_stat > 3.0 && growth > (0.1 * trend.mean).max(2.0) {
                stable = false;
                reason = format!(
                    "in-flight requests grew by {:.1}/s ({growth:.0} over {:.0} s)",
                    trend.slope, trend.span_secs
                );
            }
        }
        if let Some(r) = ratio.filter(|r| *r < 0.9 && arrivals >= 20) {
            if stable {
                reason = format!(
                    "completions kept pace with only {:.0} % of arrivals",
                    r * 100.0
                );
            }
            stable = false;
        }
        if assessed.len() < 4 {
            reason.push_str(" (few windows: low confidence)");
        }
        Stability {
            stable,
            queue_growth_per_sec: trend.map(|t| t.slope),
            completion_ratio: ratio,
            windows_assessed: assessed.len(),
            reason,
        }
    }
}

struct Trend {
    slope: f64,
    t_stat: f64,
    mean: f64,
    span_secs: f64,
}

/// Least-squares slope of in-flight over window index, scaled to per-second.
fn in_flight_trend(rows: &[&WindowReport], width_secs: f64) -> Option<Trend> {
    let n = rows.len();
    if n < 3 {
        return None;
    }
    let xs: Vec<f64> = (0..n).map(|i| i as f64 * width_secs).collect();
    let ys: Vec<f64> = rows.iter().map(|w| w.in_flight as f64).collect();
    let (mean_x, mean_y) = (
        xs.iter().sum::<f64>() / n as f64,
        ys.iter().sum::<f64>() / n as f64,
    );
    let sxx: f64 = xs.iter().map(|x| (x - mean_x).powi(2)).sum();
    let sxy: f64 = xs
        .iter()
        .zip(&ys)
        .map(|(x, y)| (x - mean_x) * (y - mean_y))
        .sum();
    let slope = sxy / sxx;
    let residual: f64 = xs
        .iter()
        .zip(&ys)
        .map(|(x, y)| (y - mean_y - slope * (x - mean_x)).powi(2))
        .sum();
    let se = (residual / (n as f64 - 2.0) / sxx).sqrt();
    let t_stat = if se > 0.0 {
        slope / se
    } else if slope > 0.0 {
        f64::INFINITY
    } else {
        0.0
    };
    Some(Trend {
        slope,
        t_stat,
        mean: mean_y,
        span_secs: xs[n - 1] - xs[0],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(arrivals_per_sec: u64, completions_per_sec: u64, secs: u64) -> Windows {
        let mut windows = Windows::new(Duration::from_secs(1));
        for s in 0..secs {
            for i in 0..arrivals_per_sec {
                windows.add_arrival(s * 1_000_000 + i * 1_000_000 / arrivals_per_sec);
            }
            for i in 0..completions_per_sec {
                windows.add_end(
                    s * 1_000_000 + i * 1_000_000 / completions_per_sec + 500,
                    true,
                );
            }
        }
        windows
    }

    #[test]
    fn balanced_flow_is_stable() {
        let stability = series(20, 20, 30).stability(0, 30_000_000);
        assert!(stability.stable, "{stability:?}");
        assert!(stability.queue_growth_per_sec.unwrap().abs() < 0.5);
    }

    #[test]
    fn arrivals_beyond_capacity_are_unstable_with_positive_growth() {
        let stability = series(30, 22, 30).stability(0, 30_000_000);
        assert!(!stability.stable);
        let growth = stability.queue_growth_per_sec.unwrap();
        assert!((growth - 8.0).abs() < 0.5, "{growth}");
        assert!((stability.completion_ratio.unwrap() - 22.0 / 30.0).abs() < 0.02);
    }

    #[test]
    fn in_flight_accumulates_across_windows() {
        let rows = series(3, 1, 3).report();
        let in_flight: Vec<u64> = rows.iter().map(|w| w.in_flight).collect();
        assert_eq!(in_flight, vec![2, 4, 6]);
    }
}
