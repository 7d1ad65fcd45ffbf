//! `steps[].load.phases[]`: the phases of a load that changes over the run. Parsed and checked
//! by [`crate::profile`].

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// One phase: arrivals at `rate_per_sec` for `duration`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RatePhase {
    /// Name shown in reports (`phase1`, … when not given).
    pub name: String,
    /// Arrival rate, requests per second.
    pub rate_per_sec: f64,
    /// Length of the phase.
    #[serde(with = "crate::units::serde_ms")]
    pub duration: Duration,
}
