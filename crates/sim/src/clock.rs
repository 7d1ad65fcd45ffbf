//! The clock a simulator runs on: simulated time as `(tokio now − start) × time_scale`, and
//! back, so the same engine serves in real, scaled or (on a paused clock) virtual time.

use std::time::Duration;

use tokio::time::Instant;

use crate::engine::SimTime;

/// Maps between the real (tokio) clock and simulated time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimClock {
    start: Instant,
    time_scale: f64,
}

impl SimClock {
    /// A clock whose simulated time 0 is `start`; `time_scale` simulated seconds pass per real
    /// second (must be positive and finite).
    pub fn new(start: Instant, time_scale: f64) -> Self {
        SimClock { start, time_scale }
    }

    /// The current simulated time.
    pub fn now(&self) -> SimTime {
        self.to_sim(Instant::now().saturating_duration_since(self.start))
    }

    /// Simulated duration of a real one.
    pub fn to_sim(&self, real: Duration) -> Duration {
        goodput_protocol::time_scale::to_target(real, self.time_scale)
    }

    /// Real duration of a simulated one.
    pub fn to_real(&self, sim: Duration) -> Duration {
        goodput_protocol::time_scale::to_clock(sim, self.time_scale)
    }

    /// The real instant at which simulated time reaches `at` (a year from now if that is
    /// beyond what the clock can represent).
    pub fn instant_of(&self, at: SimTime) -> Instant {
        self.start
            .checked_add(self.to_real(at))
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(365 * 24 * 3600))
    }
}
