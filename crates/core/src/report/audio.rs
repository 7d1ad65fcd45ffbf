//! `steps[].audio`: the audio APIs' figures (speech recognition and synthesis). Filled by
//! [`crate::metrics::audio`]; definitions in `docs/metrics.md` ("Audio").

use serde::{Deserialize, Serialize};

/// Audio sent and produced by a step's completed measured requests.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AudioReport {
    /// Completed measured requests that carried audio.
    pub requests: u64,
    /// Seconds of audio sent (transcriptions).
    pub input_seconds_total: f64,
    /// Seconds of audio produced (speech).
    pub output_seconds_total: f64,
    /// Audio seconds processed per second: the step's requests/s × the mean audio sent per
    /// completed request.
    pub input_seconds_per_sec: f64,
    /// Audio seconds produced per second: the step's requests/s × the mean audio produced
    /// per completed request.
    pub output_seconds_per_sec: f64,
    /// Real-time factor per request: E2E from the actual send ÷ the audio's length (produced,
    /// else sent); below 1 is faster than real time.
    pub real_time_factor: RatioStats,
}

/// Exact summary of a ratio per request.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RatioStats {
    /// Mean.
    pub mean: Option<f64>,
    /// Median (nearest rank).
    pub p50: Option<f64>,
    /// 95th percentile (nearest rank).
    pub p95: Option<f64>,
    /// 99th percentile (nearest rank).
    pub p99: Option<f64>,
    /// Maximum.
    pub max: Option<f64>,
    /// Samples.
    pub count: u64,
}
