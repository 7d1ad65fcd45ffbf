//! `steps[].windows[]` and `steps[].recovery`: the per-window series and the recovery after
//! an overload phase. Filled by [`crate::metrics::windows`] and [`crate::metrics::recovery`].

use serde::{Deserialize, Serialize};

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
    /// Mean TTFT of the successful requests scheduled in the window, ms.
    #[serde(default)]
    pub mean_ttft_ms: Option<f64>,
    /// Mean E2E of the successful requests scheduled in the window, ms.
    #[serde(default)]
    pub mean_e2e_ms: Option<f64>,
    /// Fraction of the requests scheduled in the window that met every SLO threshold
    /// (failures count as misses); `None` without an SLO.
    #[serde(default)]
    pub slo_attained: Option<f64>,
}

/// Recovery figures of a phase profile (`steps[].recovery`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecoveryReport {
    /// The overload phase.
    pub overload_phase: String,
    /// Its start, seconds since the run start.
    pub overload_start_secs: f64,
    /// Its end.
    pub overload_end_secs: f64,
    /// Mean in-flight in the nominal phase before it.
    pub baseline_in_flight: f64,
    /// Highest in-flight count seen.
    pub peak_in_flight: u64,
    /// Requests queued by the overload: in-flight at its end minus the baseline.
    pub backlog_requests: f64,
    /// From the end of the overload until the queue was back to its nominal level, seconds.
    pub drain_secs: Option<f64>,
    /// From the end of the overload until arriving requests met the SLO again, seconds.
    pub slo_recovery_secs: Option<f64>,
}
