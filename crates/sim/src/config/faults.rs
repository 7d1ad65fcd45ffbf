//! Fault injection rates.

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// Fault injection: each field is the probability that a request suffers that fault.
/// Faults are drawn once per request, in the order listed, from the seeded generator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FaultConfig {
    /// Answer HTTP 500 with an error object.
    pub http_500: f64,
    /// Answer HTTP 429 with `Retry-After`.
    pub http_429: f64,
    /// `Retry-After` value sent with injected 429s, seconds.
    pub retry_after_secs: u64,
    /// Reset the connection after about half of the tokens.
    pub reset_mid_stream: f64,
    /// Stop sending after about half of the tokens.
    pub stall_mid_stream: f64,
    /// How long a stall lasts, ms (absent: forever, until the client gives up).
    pub stall_ms: Option<u64>,
    /// Send one line that is not valid SSE/JSON mid-stream.
    pub malformed_sse: f64,
    /// Send an error object mid-stream, then `[DONE]`.
    pub error_mid_stream: f64,
}

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig {
            http_500: 0.0,
            http_429: 0.0,
            retry_after_secs: 1,
            reset_mid_stream: 0.0,
            stall_mid_stream: 0.0,
            stall_ms: None,
            malformed_sse: 0.0,
            error_mid_stream: 0.0,
        }
    }
}

impl FaultConfig {
    /// The rates by name, in the order they are drawn.
    pub fn rates(&self) -> [(&'static str, f64); 6] {
        [
            ("http_500", self.http_500),
            ("http_429", self.http_429),
            ("reset_mid_stream", self.reset_mid_stream),
            ("stall_mid_stream", self.stall_mid_stream),
            ("malformed_sse", self.malformed_sse),
            ("error_mid_stream", self.error_mid_stream),
        ]
    }

    /// Checks that each rate is a probability and that they sum to at most 1.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let rates = self.rates();
        if let Some((name, _)) = rates.iter().find(|(_, r)| !(0.0..=1.0).contains(r)) {
            return Err(ConfigError::invalid(
                &format!("faults.{name}"),
                "must be in [0, 1]",
            ));
        }
        if rates.iter().map(|(_, r)| r).sum::<f64>() > 1.0 + 1e-9 {
            return Err(ConfigError::invalid(
                "faults",
                "rates must sum to at most 1",
            ));
        }
        Ok(())
    }
}
