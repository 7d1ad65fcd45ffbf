//! `steps[].distributions_ms`: the latency distributions as percentile points. Filled by
//! [`crate::metrics::quantiles`].

use serde::{Deserialize, Serialize};

/// One point of a distribution: `[percentile (0–100), value in ms]`.
pub type QuantilePoint = [f64; 2];

/// Quantile points of the main latency distributions of a step, milliseconds. Empty when the
/// metric was not measured (e.g. TTFT of non-streamed requests).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Distributions {
    /// Time to first token, from the scheduled send.
    pub ttft: Vec<QuantilePoint>,
    /// Time per output token.
    pub tpot: Vec<QuantilePoint>,
    /// Inter-token latency (per token).
    pub itl: Vec<QuantilePoint>,
    /// End to end, from the scheduled send.
    pub e2e: Vec<QuantilePoint>,
}
