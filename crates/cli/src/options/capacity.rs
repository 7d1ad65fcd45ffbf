//! `goodput capacity`'s configuration: the base run, how the search probes and judges, and
//! its budget (the search settings are shared with `goodput calibrate --check`).

use std::time::Duration;

use goodput_core::decide::capacity::{Criteria, Dimension};

use super::run::RunOptions;

/// Everything `goodput capacity` runs with.
#[derive(Debug, Clone)]
pub(crate) struct CapacityOptions {
    /// The base run every probe shares (its SLO is the criteria's).
    pub(crate) run: RunOptions,
    /// How the search probes and judges.
    pub(crate) search: SearchOptions,
    /// `--budget`: most target time the whole search (each search of `repeats`) may spend
    /// probing.
    pub(crate) budget: Option<Duration>,
    /// `--repeats`: independent searches to run (1 without it).
    pub(crate) repeats: u32,
}

/// How a capacity search probes and judges, checked.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SearchOptions {
    /// `--dimension`.
    pub(crate) dimension: Dimension,
    /// `--start`: the first load probed (default: from a calibration run).
    pub(crate) start: Option<f64>,
    /// `--min-load`.
    pub(crate) min_load: f64,
    /// `--max-load`.
    pub(crate) max_load: f64,
    /// `--tolerance`, as a fraction.
    pub(crate) tolerance: f64,
    /// `--max-probes`.
    pub(crate) max_probes: usize,
    /// The SLO (`--slo`) at `--attainment` and `--confidence`.
    pub(crate) criteria: Criteria,
    /// Measured requests per probe (`--probe-requests`, or enough to prove the target).
    pub(crate) measured_requests: u64,
    /// `--probe-warmup`.
    pub(crate) probe_warmup: Duration,
    /// `--probe-min-duration`.
    pub(crate) probe_min_duration: Duration,
    /// `--max-probe-duration`.
    pub(crate) max_probe_duration: Duration,
}
