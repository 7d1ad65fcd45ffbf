//! The repeats section: `goodput run --repeats N` measures one configuration N times, each run
//! a step of its own, and this section gives each headline figure across the runs — every
//! run's value, their mean, spread and the confidence interval of the mean; `goodput sweep
//! --repeats N` gives the same per load level (`levels`), `goodput capacity --repeats N` the
//! capacity each of N searches found, across the searches (`capacity`).

use serde::{Deserialize, Serialize};

/// The headline figures of N independent runs of one configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepeatsReport {
    /// Runs measured: of `goodput run`, the report's steps, in order; of a sweep, the rounds
    /// (each level's runs); of a capacity search, the searches.
    pub runs: u32,
    /// Confidence of each interval (0.95).
    pub confidence: f64,
    /// Each headline figure across the runs of `goodput run`; a figure no run has is left
    /// out. Empty for a sweep (see `levels`) or a capacity search (see `capacity`).
    pub figures: Vec<RepeatedFigure>,
    /// `goodput sweep --repeats N`: each level's headline figures across its runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub levels: Option<Vec<RepeatedLevel>>,
    /// `goodput capacity --repeats N`: each search's capacity and the capacity across them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<RepeatedCapacity>,
}

/// One load level of a repeated sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepeatedLevel {
    /// The level (`sweep.loads[i]`).
    pub load: f64,
    /// Its runs' step indices, in order (`round · levels + i`).
    pub steps: Vec<usize>,
    /// Its headline figures across those runs (each value `steps[steps[j]].<path>`).
    pub figures: Vec<RepeatedFigure>,
}

/// N independent capacity searches of one configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepeatedCapacity {
    /// Each search, in order.
    pub searches: Vec<RepeatedSearch>,
    /// The capacity (each search's `lower_bound`, the highest load it proved) across the
    /// searches; absent when no search proved a load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<RepeatedFigure>,
    /// The conclusion in one sentence.
    pub conclusion: String,
}

/// One search of a repeated capacity search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepeatedSearch {
    /// Its first step (its calibration run, or its first probe).
    pub first_step: usize,
    /// Its first probe's step.
    pub first_probe_step: usize,
    /// Steps it ran (calibration and probes).
    pub steps: usize,
    /// The highest load it proved sustainable (its capacity); absent when none was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lower_bound: Option<f64>,
    /// The lowest load it proved unsustainable; absent when none was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upper_bound: Option<f64>,
    /// Why it ended, as its own `capacity.conclusion` would say.
    pub conclusion: super::capacity::Conclusion,
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
