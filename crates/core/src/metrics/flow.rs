//! [`Flow`]: arrivals, ends and end-to-end latency at 10 ms resolution, so the stability verdict
//! can read the in-flight count and the latency trend at a resolution fitted to the run (a
//! 5-second run still has twenty points) rather than only at the report's window width.

use super::timeline::RESOLUTION_US;

/// Counts per 10 ms bin.
#[derive(Debug, Clone, Copy, Default)]
struct Bin {
    arrivals: u32,
    ends: u32,
    /// Arrivals the server turned away for overload or that timed out ([`crate::record::Failure::is_shed`]).
    shed: u32,
    e2e_count: u32,
    e2e_sum_us: u64,
}

/// Arrivals (by scheduled send), ends (successful or not), arrivals shed (turned away for
/// overload or timed out, by scheduled send) and the E2E of successful requests (by scheduled
/// send), over the whole run.
#[derive(Debug, Clone, Default)]
pub struct Flow {
    bins: Vec<Bin>,
}

/// One point of a resampled series.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlowPoint {
    /// End of the interval, seconds since the run start.
    pub at_secs: f64,
    /// Requests scheduled and not ended at `at_secs`.
    pub in_flight: f64,
    /// Arrivals in the interval.
    pub arrivals: u64,
    /// Ends in the interval.
    pub ends: u64,
    /// Arrivals in the interval that the server shed (HTTP 429/503/504) or that timed out.
    pub shed: u64,
    /// Mean E2E (ms) of the successful requests scheduled in the interval.
    pub mean_e2e_ms: Option<f64>,
}

impl Flow {
    fn at(&mut self, at_us: u64) -> &mut Bin {
        let index = usize::try_from(at_us / RESOLUTION_US)
            .unwrap_or(usize::MAX)
            .min(1 << 28);
        if self.bins.len() <= index {
            self.bins.resize(index + 1, Bin::default());
        }
        &mut self.bins[index]
    }

    /// A request scheduled at `scheduled_us` that ended at `end_us`, with its E2E when it
    /// succeeded and whether it was shed.
    pub fn add(&mut self, scheduled_us: u64, end_us: u64, e2e_us: Option<u64>, shed: bool) {
        let arrival = self.at(scheduled_us);
        arrival.arrivals += 1;
        arrival.shed += u32::from(shed);
        if let Some(e2e) = e2e_us {
            arrival.e2e_count += 1;
            arrival.e2e_sum_us += e2e;
        }
        self.at(end_us).ends += 1;
    }

    /// The series over `[from_us, from_us + n × step_us)` in `n` intervals of `step_us`
    /// (rounded to whole 10 ms bins).
    pub fn resample(&self, from_us: u64, step_us: u64, n: usize) -> Vec<FlowPoint> {
        let first = from_us / RESOLUTION_US;
        let per = (step_us / RESOLUTION_US).max(1);
        let bin = |i: u64| {
            usize::try_from(i)
                .ok()
                .and_then(|i| self.bins.get(i))
                .copied()
                .unwrap_or_default()
        };
        let mut in_flight: i64 = (0..first)
            .map(|i| {
                let b = bin(i);
                i64::from(b.arrivals) - i64::from(b.ends)
            })
            .sum();
        (0..n as u64)
            .map(|k| {
                let mut point = FlowPoint {
                    at_secs: ((first + (k + 1) * per) * RESOLUTION_US) as f64 / 1e6,
                    in_flight: 0.0,
                    arrivals: 0,
                    ends: 0,
                    shed: 0,
                    mean_e2e_ms: None,
                };
                let (mut count, mut sum) = (0u64, 0u64);
                for i in first + k * per..first + (k + 1) * per {
                    let b = bin(i);
                    point.arrivals += u64::from(b.arrivals);
                    point.ends += u64::from(b.ends);
                    point.shed += u64::from(b.shed);
                    count += u64::from(b.e2e_count);
                    sum += b.e2e_sum_us;
                }
                in_flight += point.arrivals as i64 - point.ends as i64;
                point.in_flight = in_flight.max(0) as f64;
                point.mean_e2e_ms = (count > 0).then(|| sum as f64 / count as f64 / 1000.0);
                point
            })
            .collect()
    }

    /// Requests scheduled and not ended at `at_us` (to the 10 ms bin).
    pub fn in_flight_at(&self, at_us: u64) -> f64 {
        let last = at_us / RESOLUTION_US;
        let total: i64 = self
            .bins
            .iter()
            .take(usize::try_from(last).unwrap_or(usize::MAX))
            .map(|b| i64::from(b.arrivals) - i64::from(b.ends))
            .sum();
        total.max(0) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resampled_in_flight_accumulates() {
        let mut flow = Flow::default();
        // Four arrivals a second, each lasting 2.5 s.
        for i in 0..30u64 {
            let at = i * 250_000;
            flow.add(at, at + 2_500_000, Some(2_500_000), i % 10 == 9);
        }
        let points = flow.resample(0, 1_000_000, 4);
        let in_flight: Vec<f64> = points.iter().map(|p| p.in_flight).collect();
        assert_eq!(in_flight, vec![4.0, 8.0, 10.0, 10.0]);
        assert_eq!(points[0].mean_e2e_ms, Some(2500.0));
        let shed: Vec<u64> = points.iter().map(|p| p.shed).collect();
        // The 10th arrival (2.25 s) by its scheduled send; the 20th (4.75 s) is past the four.
        assert_eq!(shed, vec![0, 0, 1, 0]);
        assert_eq!(flow.in_flight_at(1_000_000), 4.0);
    }
}
