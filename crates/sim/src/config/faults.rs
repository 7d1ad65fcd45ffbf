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
    /// Answer HTTP 400 with an error object.
    pub http_400: f64,
    /// Accept the request and send nothing at all, not even the status line (for `stall_ms`,
    /// then cut the connection; absent: until the client gives up).
    pub stall_before_response: f64,
    /// Send one chunk whose JSON is cut off mid-object (the event itself is well formed).
    pub invalid_json_chunk: f64,
    /// Send one `data` line of bytes that are not UTF-8 text (a broken event stream).
    pub sse_garbage: f64,
    /// Send one `data` line of `oversized_line_bytes` bytes mid-stream.
    pub oversized_line: f64,
    /// Length of the line sent by `oversized_line`, bytes.
    pub oversized_line_bytes: u64,
    /// Never end the response: after about half of the tokens, send only keep-alive comments
    /// every `keep_alive_ms`, forever (non-streamed: whitespace), until the client leaves.
    pub endless_response: f64,
    /// Interval of the keep-alive comments of `endless_response`, ms (simulated time).
    pub keep_alive_ms: u64,
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
            http_400: 0.0,
            stall_before_response: 0.0,
            invalid_json_chunk: 0.0,
            sse_garbage: 0.0,
            oversized_line: 0.0,
            oversized_line_bytes: 8 << 20,
            endless_response: 0.0,
            keep_alive_ms: 100,
        }
    }
}

impl FaultConfig {
    /// The rates by name, in the order they are drawn (faults added later come last, so a
    /// configuration draws the same faults as before they existed).
    pub fn rates(&self) -> [(&'static str, f64); 12] {
        [
            ("http_500", self.http_500),
            ("http_429", self.http_429),
            ("reset_mid_stream", self.reset_mid_stream),
            ("stall_mid_stream", self.stall_mid_stream),
            ("malformed_sse", self.malformed_sse),
            ("error_mid_stream", self.error_mid_stream),
            ("http_400", self.http_400),
            ("stall_before_response", self.stall_before_response),
            ("invalid_json_chunk", self.invalid_json_chunk),
            ("sse_garbage", self.sse_garbage),
            ("oversized_line", self.oversized_line),
            ("endless_response", self.endless_response),
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
        if self.keep_alive_ms == 0 {
            return Err(ConfigError::invalid(
                "faults.keep_alive_ms",
                "must be at least 1",
            ));
        }
        Ok(())
    }
}
