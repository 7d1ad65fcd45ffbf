//! The validated, clap-free description of a run: load (closed or open loop), when to stop,
//! warmup, timeouts, SLO and seed. The CLI builds it from flags; a library user builds it
//! directly. [`RunConfig::validate`] names the field to fix.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::metrics::Slo;
pub use crate::profile::Arrival;

/// How load is applied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum LoadSpec {
    /// Fixed concurrency: each of `concurrency` workers sends its next request when the
    /// previous one finishes.
    Closed {
        /// Requests in flight at all times.
        concurrency: u32,
    },
    /// Fixed arrival rate: requests are sent on a precomputed schedule regardless of
    /// completions.
    Open {
        /// Mean arrivals per second.
        rate_per_sec: f64,
        /// Arrival process.
        arrival: Arrival,
        /// Client-side cap on requests in flight; arrivals beyond it wait in a FIFO queue and
        /// the wait counts in their latency.
        max_concurrency: Option<u32>,
    },
    /// Open loop whose rate changes by phase (e.g. nominal → overload → nominal); the run
    /// lasts as long as the phases together.
    Profile {
        /// The phases, in order.
        phases: Vec<crate::profile::RatePhase>,
        /// Arrival process within each phase.
        arrival: Arrival,
        /// Client-side cap on requests in flight.
        max_concurrency: Option<u32>,
    },
    /// Trace replay: each request is sent at the offset its workload gives
    /// ([`crate::workload::Workload::arrival_offsets`]), regardless of completions.
    Replay {
        /// Client-side cap on requests in flight, as in open loop.
        max_concurrency: Option<u32>,
    },
}

/// Which leading part of the run is excluded from the metrics.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Warmup {
    /// Nothing excluded.
    None,
    /// The first N scheduled requests.
    Requests(u64),
    /// Requests scheduled in the first span of the run.
    #[serde(with = "crate::units::serde_ms")]
    Duration(Duration),
    /// The leading fraction (0–1) of the requests (with `--requests`) or of the duration.
    Fraction(f64),
}

/// A run's parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunConfig {
    /// How load is applied.
    pub load: LoadSpec,
    /// Stop scheduling after this many requests (warmup included).
    pub max_requests: Option<u64>,
    /// Stop scheduling after this long (warmup included); in-flight requests then drain.
    #[serde(default, with = "optional_ms")]
    pub duration: Option<Duration>,
    /// Leading part excluded from metrics.
    pub warmup: Warmup,
    /// Longest a request may take from leaving the client queue to its end.
    #[serde(with = "crate::units::serde_ms")]
    pub request_timeout: Duration,
    /// The run is abandoned when requests are in flight and nothing has been received for
    /// this long.
    #[serde(with = "crate::units::serde_ms")]
    pub no_progress_timeout: Duration,
    /// Per-request thresholds and percentile objectives.
    pub slo: Option<Slo>,
    /// Seed of the schedule and the workload.
    pub seed: u64,
    /// Width of time-series windows.
    #[serde(with = "crate::units::serde_ms")]
    pub window: Duration,
    /// How many times faster than real time the target's clock runs (the embedded
    /// simulator's time scale). Schedules, durations, recorded times and every metric are in
    /// the target's time; only the request and no-progress timeouts are real time.
    #[serde(default = "one")]
    pub time_scale: f64,
}

fn one() -> f64 {
    1.0
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            load: LoadSpec::Closed { concurrency: 1 },
            max_requests: Some(100),
            duration: None,
            warmup: Warmup::None,
            request_timeout: Duration::from_secs(300),
            no_progress_timeout: Duration::from_secs(60),
            slo: None,
            seed: 0,
            window: Duration::from_secs(1),
            time_scale: 1.0,
        }
    }
}

/// A run configuration that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ConfigError {
    /// The offending setting (named as the command-line flag).
    pub field: &'static str,
    /// What is wrong and how to fix it.
    pub message: String,
}

fn invalid(field: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError {
        field,
        message: message.into(),
    }
}

impl LoadSpec {
    /// The arrival process and client-side cap of an open-loop load (Poisson and no cap for
    /// any other): what a sweep or capacity search keeps when it sets the rate itself.
    pub fn open_loop_shape(&self) -> (Arrival, Option<u32>) {
        match self {
            LoadSpec::Open {
                arrival,
                max_concurrency,
                ..
            } => (*arrival, *max_concurrency),
            _ => (Arrival::Poisson, None),
        }
    }

    /// Checks the load's parameters.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let LoadSpec::Profile {
            phases,
            arrival,
            max_concurrency,
        } = self
        {
            crate::profile::validate_phases(phases)
                .map_err(|e| invalid("--phases", e.to_string()))?;
            let first = LoadSpec::Open {
                rate_per_sec: phases[0].rate_per_sec,
                arrival: *arrival,
                max_concurrency: *max_concurrency,
            };
            return first.validate();
        }
        match *self {
            LoadSpec::Closed { concurrency: 0 } => {
                Err(invalid("--concurrency", "must be at least 1"))
            }
            LoadSpec::Closed { .. } | LoadSpec::Profile { .. } => Ok(()),
            LoadSpec::Open {
                rate_per_sec,
                arrival,
                max_concurrency,
            } => {
                if !(rate_per_sec.is_finite() && rate_per_sec > 0.0) {
                    return Err(invalid(
                        "--rate",
                        "must be a positive number of requests per second",
                    ));
                }
                if let Arrival::Gamma { burstiness } = arrival
                    && !(burstiness.is_finite() && burstiness > 0.0)
                {
                    return Err(invalid("--burstiness", "must be a positive number"));
                }
                if max_concurrency == Some(0) {
                    return Err(invalid("--max-concurrency", "must be at least 1"));
                }
                Ok(())
            }
            LoadSpec::Replay {
                max_concurrency: Some(0),
            } => Err(invalid("--max-concurrency", "must be at least 1")),
            LoadSpec::Replay { .. } => Ok(()),
        }
    }
}

impl RunConfig {
    /// Checks every setting and their combinations.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.load.validate()?;
        self.validate_stop()?;
        if self.request_timeout.is_zero() {
            return Err(invalid("--request-timeout", "must be longer than zero"));
        }
        if self.no_progress_timeout.is_zero() {
            return Err(invalid("--no-progress-timeout", "must be longer than zero"));
        }
        if self.window < Duration::from_millis(10) {
            return Err(invalid("--window", "must be at least 10ms"));
        }
        if !(self.time_scale.is_finite() && self.time_scale > 0.0) {
            return Err(invalid("--time-scale", "must be a positive number"));
        }
        Ok(())
    }

    /// Checks that the run ends and that the warmup leaves something to measure.
    fn validate_stop(&self) -> Result<(), ConfigError> {
        if self.max_requests.is_none() && self.duration.is_none() {
            return Err(invalid(
                "--requests",
                "give --requests and/or --duration so the run ends",
            ));
        }
        if self.max_requests == Some(0) {
            return Err(invalid("--requests", "must be at least 1"));
        }
        if self.duration.is_some_and(|d| d.is_zero()) {
            return Err(invalid("--duration", "must be longer than zero"));
        }
        match self.warmup {
            Warmup::Fraction(f) if !(0.0..1.0).contains(&f) => Err(invalid(
                "--warmup",
                "a fraction must be in [0, 1), e.g. 10%",
            )),
            Warmup::Requests(n) if self.max_requests.is_some_and(|max| n >= max) => Err(invalid(
                "--warmup",
                "leaves no measured request; lower it or raise --requests",
            )),
            Warmup::Duration(d) if self.duration.is_some_and(|max| d >= max) => Err(invalid(
                "--warmup",
                "is as long as the run; lower it or raise --duration",
            )),
            _ => Ok(()),
        }
    }

    /// Whether request `index`, due `offset` (target time) after the start, may still be
    /// scheduled: within `--requests` and `--duration`. The one rule every runner, session
    /// and journal merge applies.
    pub fn admits(&self, index: u64, offset: Duration) -> bool {
        self.max_requests.is_none_or(|max| index < max)
            && self.duration.is_none_or(|duration| offset < duration)
    }

    /// Whether request `index`, scheduled `offset` after the start, falls in the warm-up
    /// (read from the same offset as [`RunConfig::admits`]).
    pub fn is_warmup(&self, index: u64, offset: Duration) -> bool {
        match self.warmup {
            Warmup::None => false,
            Warmup::Requests(n) => index < n,
            Warmup::Duration(d) => offset < d,
            Warmup::Fraction(f) => match (self.max_requests, self.duration) {
                (Some(max), _) => (index as f64) < f * max as f64,
                (None, Some(duration)) => offset < duration.mul_f64(f),
                (None, None) => false,
            },
        }
    }
}

/// Serde adapter for optional millisecond durations.
mod optional_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        value: &Option<Duration>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match value {
            Some(d) => s.serialize_some(&crate::units::to_ms(*d)),
            None => s.serialize_none(),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Option<Duration>, D::Error> {
        let ms: Option<f64> = Option::deserialize(d)?;
        ms.map(|ms| {
            Duration::try_from_secs_f64(ms / 1000.0).map_err(|_| {
                serde::de::Error::custom("expected a non-negative number of milliseconds")
            })
        })
        .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_must_end() {
        let config = RunConfig {
            max_requests: None,
            duration: None,
            ..RunConfig::default()
        };
        assert_eq!(config.validate().unwrap_err().field, "--requests");
    }

    #[test]
    fn warmup_forms() {
        let config = RunConfig {
            warmup: Warmup::Fraction(0.1),
            max_requests: Some(100),
            ..RunConfig::default()
        };
        assert!(config.is_warmup(9, Duration::ZERO));
        assert!(!config.is_warmup(10, Duration::ZERO));
        let config = RunConfig {
            warmup: Warmup::Fraction(0.25),
            max_requests: None,
            duration: Some(Duration::from_secs(40)),
            ..RunConfig::default()
        };
        assert!(config.is_warmup(1000, Duration::from_secs(9)));
        assert!(!config.is_warmup(0, Duration::from_secs(10)));
        let config = RunConfig {
            warmup: Warmup::Requests(100),
            max_requests: Some(100),
            ..RunConfig::default()
        };
        assert!(
            config
                .validate()
                .unwrap_err()
                .message
                .contains("no measured request")
        );
    }

    #[test]
    fn open_loop_needs_a_positive_rate() {
        let load = LoadSpec::Open {
            rate_per_sec: 0.0,
            arrival: Arrival::Poisson,
            max_concurrency: None,
        };
        let config = RunConfig {
            load,
            ..RunConfig::default()
        };
        assert_eq!(config.validate().unwrap_err().field, "--rate");
    }
}
