//! The audio a request carried: seconds sent for speech recognition, produced by speech
//! synthesis (`requests.jsonl`'s `audio`; the step's `audio` figures are computed from it).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Seconds of audio a request sent and received.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct AudioRecord {
    /// Seconds of audio sent (a transcription's file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_seconds: Option<f64>,
    /// Seconds of audio received (a speech answer's, read from its WAV header or PCM bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_seconds: Option<f64>,
}

impl AudioRecord {
    /// Audio sent.
    pub fn sent(length: Duration) -> Self {
        AudioRecord {
            input_seconds: Some(length.as_secs_f64()),
            output_seconds: None,
        }
    }

    /// Audio produced.
    pub fn produced(length: Duration) -> Self {
        AudioRecord {
            input_seconds: None,
            output_seconds: Some(length.as_secs_f64()),
        }
    }

    /// The audio a real-time factor divides by: what was produced, else what was sent.
    pub fn seconds(&self) -> Option<f64> {
        self.output_seconds
            .or(self.input_seconds)
            .filter(|s| *s > 0.0)
    }
}
