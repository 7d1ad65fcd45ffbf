//! Per-window time series over the run's timeline (arrivals, sends, completions, failures,
//! output tokens, in-flight), and the soak trends drawn from them. The stability verdict lives
//! in [`super::stability`].

use std::time::Duration;

pub use super::stability::{Stability, Verdict};
use super::trend::{Trend, trends};
pub use crate::report::windows::WindowReport;

/// Counts per window of fixed width, indexed from the run start.
#[derive(Debug, Clone)]
pub struct Windows {
    width_us: u64,
    windows: Vec<WindowCounts>,
}

/// What one window counted.
#[derive(Debug, Clone, Copy, Default)]
struct WindowCounts {
    arrivals: u64,
    sent: u64,
    completions: u64,
    failures: u64,
    output_tokens: u64,
    /// Arrivals judged against the SLO's per-request thresholds, and those that met them.
    judged: u64,
    compliant: u64,
    ttft_sum_us: u64,
    ttft_count: u64,
    e2e_sum_us: u64,
    e2e_count: u64,
}

impl Windows {
    /// Empty series of `width` windows.
    pub fn new(width: Duration) -> Self {
        Windows {
            width_us: u64::try_from(width.as_micros()).unwrap_or(u64::MAX).max(1),
            windows: Vec::new(),
        }
    }

    /// Window width.
    pub fn width(&self) -> Duration {
        Duration::from_micros(self.width_us)
    }

    fn index(&self, at_us: u64) -> usize {
        usize::try_from(at_us / self.width_us).unwrap_or(usize::MAX)
    }

    fn at(&mut self, at_us: u64) -> &mut WindowCounts {
        let index = self.index(at_us).min(1 << 24);
        if self.windows.len() <= index {
            self.windows.resize(index + 1, WindowCounts::default());
        }
        &mut self.windows[index]
    }

    /// A request scheduled at `at_us`.
    pub fn add_arrival(&mut self, at_us: u64) {
        self.at(at_us).arrivals += 1;
    }

    /// A request sent at `at_us`.
    pub fn add_sent(&mut self, at_us: u64) {
        self.at(at_us).sent += 1;
    }

    /// A request that ended at `at_us`, successfully or not.
    pub fn add_end(&mut self, at_us: u64, ok: bool) {
        let window = self.at(at_us);
        if ok {
            window.completions += 1
        } else {
            window.failures += 1
        }
    }

    /// `tokens` output tokens received at `at_us`.
    pub fn add_output_tokens(&mut self, at_us: u64, tokens: u64) {
        self.at(at_us).output_tokens += tokens;
    }

    /// The latencies and SLO verdict of a request scheduled at `scheduled_us` (latencies of
    /// successful requests only; `complies` is `None` without an SLO).
    pub fn add_outcome(
        &mut self,
        scheduled_us: u64,
        ttft: Option<Duration>,
        e2e: Option<Duration>,
        complies: Option<bool>,
    ) {
        let window = self.at(scheduled_us);
        if let Some(ttft) = ttft {
            window.ttft_sum_us += u64::try_from(ttft.as_micros()).unwrap_or(u64::MAX);
            window.ttft_count += 1;
        }
        if let Some(e2e) = e2e {
            window.e2e_sum_us += u64::try_from(e2e.as_micros()).unwrap_or(u64::MAX);
            window.e2e_count += 1;
        }
        if let Some(complies) = complies {
            window.judged += 1;
            window.compliant += u64::from(complies);
        }
    }

    /// The whole series as report rows.
    pub fn report(&self) -> Vec<WindowReport> {
        let mean_ms =
            |sum: u64, count: u64| (count > 0).then(|| sum as f64 / count as f64 / 1000.0);
        let mut in_flight: i64 = 0;
        self.windows
            .iter()
            .enumerate()
            .map(|(i, w)| {
                let ended = w.completions + w.failures;
                in_flight += i64::try_from(w.arrivals).unwrap_or(i64::MAX)
                    - i64::try_from(ended).unwrap_or(0);
                WindowReport {
                    start_secs: (i as u64 * self.width_us) as f64 / 1e6,
                    arrivals: w.arrivals,
                    sent: w.sent,
                    completions: w.completions,
                    failures: w.failures,
                    output_tokens: w.output_tokens,
                    in_flight: u64::try_from(in_flight.max(0)).unwrap_or(0),
                    mean_ttft_ms: mean_ms(w.ttft_sum_us, w.ttft_count),
                    mean_e2e_ms: mean_ms(w.e2e_sum_us, w.e2e_count),
                    slo_attained: (w.judged > 0).then(|| w.compliant as f64 / w.judged as f64),
                }
            })
            .collect()
    }

    /// Soak trends over the measured windows `[start_us, end_us)` (the last one is partial and
    /// left out, as is the first).
    pub fn trends(&self, start_us: u64, end_us: u64) -> Vec<Trend> {
        let rows = self.report();
        let measured: Vec<&WindowReport> = rows
            .iter()
            .take(self.index(end_us))
            .skip(self.index(start_us) + 1)
            .collect();
        trends(&measured, self.width_us as f64 / 1e6)
    }
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
    fn in_flight_accumulates_across_windows() {
        let rows = series(3, 1, 3).report();
        let in_flight: Vec<u64> = rows.iter().map(|w| w.in_flight).collect();
        assert_eq!(in_flight, vec![2, 4, 6]);
    }
}
