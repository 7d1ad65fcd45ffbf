//! The repeats section: `goodput run --repeats N` measures one configuration N times, each run
//! a step of its own, and this section gives each headline figure across the runs — every
//! run's value, their mean, spread and the confidence interval of the mean.

use serde::{Deserialize, Serialize};

/// The headline figures of N independent runs of one configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepeatsReport {
    /// Runs measured (the report's steps, in order).
    pub runs: u32,
    /// Confidence of each interval (0.95).
    pub confidence: f64,
    /// Each headline figure across the runs; a figure no run has is left out.
    pub figures: Vec<RepeatedFigure>,
}

/// One figure across the runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepeatedFigure {
    /// Name for people (`TTFT p99`).
    pub name: String,
    /// Path within a step (`latency_ms.ttft.p99`): each run's value is `steps[i].<path>`.
    pub path: String,
    /// Unit label (`ms`, `req/s`, `tok/s`, `%`).
    pub unit: String,
    /// Each run's value, in run order (`null` for a run without one: no request completed).
    pub values: Vec<Option<f64>>,
    /// Mean of the values present.
    pub mean: f64,
    /// Their sample standard deviation (`n − 1`); absent with fewer than two.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sd: Option<f64>,
    /// `sd / |mean|`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cv: Option<f64>,
    /// Lower end of the confidence interval of the mean (Student's t, `n − 1` degrees of
    /// freedom): where the figure's long-run mean lies, run-to-run noise included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci_low: Option<f64>,
    /// Upper end of that interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci_high: Option<f64>,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
}
