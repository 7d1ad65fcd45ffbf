//! How many requests a server runs at once when it does not say (llama.cpp reports its slots;
//! vLLM, SGLang, TGI and most gateways do not): waves of identical requests sent together,
//! each counted by how many had their first token before the first of them ended. A request
//! the server queued gets its first token only after one it runs has ended and freed its
//! place, so those that did not are the ones it ran together.

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::{CalibrateError, CalibrationProbe, measure_with};
use crate::http::HttpClient;
use crate::record::RequestRecord;
use crate::runner::RecordSink;

/// The waves tried, smallest first, until one holds more requests than the server runs at
/// once; a server running all of the largest runs at least that many.
pub const WAVES: [u32; 3] = [8, 32, 128];
/// Prompt and answer of a wave's requests: a short prompt, and an answer long enough that
/// every request the server runs together has its first token before the first one ends.
const PROMPT_TOKENS: u32 = 16;
const ANSWER_TOKENS: u32 = 32;

/// How many of a wave's requests the server ran at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchLimit {
    /// Requests sent together.
    pub wave: u32,
    /// Of those, how many had their first token before the first one ended.
    pub running: u32,
}

impl BatchLimit {
    /// Whether the server ran the whole wave, so `running` is only a lower bound.
    pub fn is_lower_bound(&self) -> bool {
        self.running >= self.wave
    }
}

/// Of a wave's requests, as `(first token, end)` times, how many had their first token
/// before the first request ended (0 for none).
pub fn running_at_once(requests: &[(u64, u64)]) -> u32 {
    let Some(first_end) = requests.iter().map(|(_, end)| *end).min() else {
        return 0;
    };
    let running = requests
        .iter()
        .filter(|(first, _)| *first < first_end)
        .count();
    u32::try_from(running).unwrap_or(u32::MAX)
}

/// Each request's first-token and end times.
#[derive(Default)]
struct Times(Vec<(u64, u64)>);

impl RecordSink for Times {
    fn record(&mut self, record: &RequestRecord) -> std::io::Result<()> {
        if let Some(first) = record.first_token_us {
            self.0.push((first, record.end_us));
        }
        Ok(())
    }
}

/// Sends `waves` (each all at once, closed loop, one request per client) until one holds more
/// requests than the server runs together, and returns that wave's count — or the last
/// wave's when the server ran every one whole (or failed a larger one). `None` when no wave
/// was sent; an error when the first failed.
pub async fn batch_limit(
    client: &HttpClient,
    model: &str,
    waves: &[u32],
    (seed, cancel): (u64, &CancellationToken),
) -> Result<Option<BatchLimit>, CalibrateError> {
    let mut found = None;
    for (k, &wave) in waves.iter().enumerate() {
        let probe = CalibrationProbe {
            concurrency: wave,
            input_tokens: PROMPT_TOKENS,
            output_tokens: ANSWER_TOKENS,
            requests: wave,
        };
        let mut times = Times::default();
        let seed = seed.wrapping_add(k as u64);
        let measured = measure_with(
            client.clone(),
            model,
            &probe,
            (seed, cancel.clone()),
            &mut times,
        )
        .await;
        match measured {
            Ok(_) => {}
            // A larger wave refused (a gateway's limit, a queue bound): the smaller one's
            // count stands, as a lower bound.
            Err(_) if found.is_some() => break,
            Err(e) => return Err(e),
        }
        let limit = BatchLimit {
            wave,
            running: running_at_once(&times.0),
        };
        found = Some(limit);
        if !limit.is_lower_bound() {
            break;
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_requests_running_at_once_are_those_started_before_the_first_ended() {
        // Four slots, eight requests: four first tokens at 100 ms, ending at 400; the queued
        // four start as those end.
        let mut wave: Vec<(u64, u64)> = (0..4).map(|_| (100, 400)).collect();
        wave.extend((0..4).map(|_| (500, 800)));
        assert_eq!(running_at_once(&wave), 4);
        // A request whose first token comes exactly as the first ends was queued.
        assert_eq!(running_at_once(&[(100, 400), (400, 700)]), 1);
        assert_eq!(running_at_once(&[]), 0);
        let whole = BatchLimit {
            wave: 8,
            running: 8,
        };
        assert!(whole.is_lower_bound());
        assert!(
            !BatchLimit {
                running: 4,
                ..whole
            }
            .is_lower_bound()
        );
    }
}
