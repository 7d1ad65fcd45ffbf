//! The `sweep` section: the levels swept and the knee. Filled by [`crate::decide::sweep`].

use serde::{Deserialize, Serialize};

/// What a sweep varies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SweepDimension {
    /// Closed-loop concurrency.
    Concurrency,
    /// Open-loop arrival rate, requests per second.
    Rate,
    /// Prompts per request (completions API), at fixed concurrency.
    Batch,
}

/// The knee of a sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Knee {
    /// Index of the knee step (with repeats: of the knee level, which is its step in the first
    /// round; the knee is then found on the levels' means across the rounds).
    pub step: usize,
    /// Its load level.
    pub load: f64,
    /// Relative throughput gain of the next step (level).
    pub next_throughput_gain: f64,
    /// Relative E2E p50 rise of the next step.
    pub next_latency_rise: f64,
}

/// A sweep's summary (`report.json` → `sweep`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepReport {
    /// What varied.
    pub dimension: SweepDimension,
    /// The load levels, in order: the load of each step (with `repeats`, of each step of a
    /// round: step `round · loads.len() + level`).
    pub loads: Vec<f64>,
    /// `goodput sweep --repeats N`: every level measured N times, all levels once and then
    /// again (N rounds), so slow drift of the server spreads over every level; absent for one
    /// round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeats: Option<u32>,
    /// Throughput gain below which a step is past the knee.
    pub knee_min_gain: f64,
    /// The knee, when the sweep reached one.
    pub knee: Option<Knee>,
}
