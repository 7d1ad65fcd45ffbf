//! The audio figures of a step (`steps[].audio`): seconds of audio sent and produced, their
//! rates, and the real-time factor per request (E2E from the send ÷ the audio's length).
//! Definitions in `docs/metrics.md` ("Audio").

use crate::record::RequestRecord;
pub use crate::report::audio::{AudioReport, RatioStats};

/// Accumulates the audio figures of one step's completed measured requests.
#[derive(Debug, Clone, Default)]
pub struct AudioAggregator {
    requests: u64,
    completed: u64,
    input_total: f64,
    output_total: f64,
    rtf: Vec<f64>,
}

impl AudioAggregator {
    /// Folds in a completed measured request.
    pub fn add(&mut self, record: &RequestRecord) {
        self.completed += 1;
        let Some(audio) = record.audio else {
            return;
        };
        self.requests += 1;
        self.input_total += audio.input_seconds.unwrap_or(0.0);
        self.output_total += audio.output_seconds.unwrap_or(0.0);
        if let (Some(e2e), Some(seconds)) = (record.e2e_from_send(), audio.seconds()) {
            self.rtf.push(e2e.as_secs_f64() / seconds);
        }
    }

    /// The report (`None` without audio); rates from the step's completed `requests_per_sec`.
    pub fn report(&self, requests_per_sec: f64) -> Option<AudioReport> {
        if self.requests == 0 {
            return None;
        }
        let per_request = |total: f64| total / self.completed.max(1) as f64;
        Some(AudioReport {
            requests: self.requests,
            input_seconds_total: self.input_total,
            output_seconds_total: self.output_total,
            input_seconds_per_sec: requests_per_sec * per_request(self.input_total),
            output_seconds_per_sec: requests_per_sec * per_request(self.output_total),
            real_time_factor: ratio_stats(&self.rtf),
        })
    }
}

/// Mean, nearest-rank quantiles and maximum of `values`.
pub fn ratio_stats(values: &[f64]) -> RatioStats {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    if n == 0 {
        return RatioStats::default();
    }
    let rank = |q: f64| sorted[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
    RatioStats {
        mean: Some(sorted.iter().sum::<f64>() / n as f64),
        p50: Some(rank(0.50)),
        p95: Some(rank(0.95)),
        p99: Some(rank(0.99)),
        max: sorted.last().copied(),
        count: n as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_quantiles() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        let stats = ratio_stats(&values);
        assert_eq!(
            (stats.p50, stats.p95, stats.p99, stats.max, stats.count),
            (Some(50.0), Some(95.0), Some(99.0), Some(100.0), 100)
        );
        assert_eq!(stats.mean, Some(50.5));
        assert_eq!(ratio_stats(&[]), RatioStats::default());
    }
}
