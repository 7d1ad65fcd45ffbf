//! `steps[].stability`: the stability verdict and the trends behind it. Filled by
//! [`crate::metrics::stability`] and [`crate::metrics::trend`].

use serde::{Deserialize, Serialize};

/// The stability verdict (`report.json` → `steps[].stability`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stability {
    /// Whether the queue was judged stable (`verdict == "stable"`).
    pub stable: bool,
    /// Stable, unstable or inconclusive.
    #[serde(default)]
    pub verdict: Verdict,
    /// Least-squares growth of the in-flight count over the assessed span, requests per second.
    pub queue_growth_per_sec: Option<f64>,
    /// Ends ÷ arrivals over the assessed span.
    pub completion_ratio: Option<f64>,
    /// Share of the assessed arrivals the server shed — turned away with HTTP 429, 503 or 504,
    /// or that timed out; 5 % or more (and at least 3) makes the step unstable.
    #[serde(default)]
    pub shed_ratio: Option<f64>,
    /// Least-squares change of the mean E2E over the assessed span, ms per second of run.
    #[serde(default)]
    pub e2e_growth_ms_per_sec: Option<f64>,
    /// Intervals the verdict is based on.
    pub windows_assessed: usize,
    /// Their width, seconds.
    #[serde(default)]
    pub assessed_window_secs: f64,
    /// The assessed span, seconds since the run start.
    #[serde(default)]
    pub assessed_from_secs: Option<f64>,
    /// End of the assessed span (the last measured arrival).
    #[serde(default)]
    pub assessed_to_secs: Option<f64>,
    /// Why, in words (always agreeing with the figures above).
    pub reason: String,
    /// Trends of throughput and latency over the measured windows (soak degradation).
    #[serde(default)]
    pub trends: Vec<Trend>,
}

/// The three verdicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The queue did not grow: the throughput is sustainable.
    Stable,
    /// Work accumulated: the load exceeds what the target sustains.
    Unstable,
    /// The run cannot tell (too short, or the signals are within the noise).
    #[default]
    Inconclusive,
}

/// The trend of one series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Trend {
    /// `completions_per_sec`, `output_tokens_per_sec`, `mean_ttft_ms` or `mean_e2e_ms`.
    pub series: String,
    /// Least-squares slope, series units per second of run.
    pub slope_per_sec: f64,
    /// The slope's t-statistic.
    pub t_stat: f64,
    /// Slope × span ÷ mean: the change over the span relative to the mean.
    pub relative_change: f64,
    /// Whether this trend is a degradation.
    pub degrading: bool,
}
