//! How many requests a server runs at once when it does not say (llama.cpp reports its slots;
//! vLLM, SGLang, TGI and most gateways do not): waves of identical requests sent together. A
//! request the server queued gets its first token only after one it runs has ended and freed
//! its place, so the wave's first tokens split in two with a gap of about a request's service
//! time between them; those before the gap ran together. A server answering faster than
//! [`MIN_SPAN_US`] cannot show that gap above the client's own jitter: the waves stop there.

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::{CalibrateError, CalibrationProbe, measure_with, probe_openai};
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
/// The shortest time from a wave's first first token to its first end, µs, at which a queue
/// is told from dispatch jitter.
pub const MIN_SPAN_US: u64 = 20_000;

/// How many of a wave's requests the server ran at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchLimit {
    /// Requests sent together.
    pub wave: u32,
    /// Of those, how many it ran at once ([`running_at_once`]; the whole wave when it answered
    /// too fast to tell).
    pub running: u32,
}

impl BatchLimit {
    /// Whether the server ran the whole wave, so `running` is only a lower bound.
    pub fn is_lower_bound(&self) -> bool {
        self.running >= self.wave
    }
}

/// Of a wave's requests, as `(first token, end)` times, how many the server ran at once: those
/// whose first token came before the first gap between consecutive first tokens longer than
/// half the span from the earliest first token to the earliest end, when that gap opens before
/// that end — else all of them (no queue shows; 0 for none).
pub fn running_at_once(requests: &[(u64, u64)]) -> u32 {
    let first_end = requests.iter().map(|(_, end)| *end).min().unwrap_or(0);
    let half_span = span(requests) / 2;
    let mut firsts: Vec<u64> = requests.iter().map(|(first, _)| *first).collect();
    firsts.sort_unstable();
    let split = firsts
        .windows(2)
        .position(|pair| pair[0] < first_end && pair[1] - pair[0] > half_span);
    u32::try_from(split.map_or(firsts.len(), |i| i + 1)).unwrap_or(u32::MAX)
}

/// From a wave's earliest first token to its earliest end, µs (0 for none).
fn span(requests: &[(u64, u64)]) -> u64 {
    let first_end = requests.iter().map(|(_, end)| *end).min().unwrap_or(0);
    let first_token = requests.iter().map(|(first, _)| *first).min().unwrap_or(0);
    first_end.saturating_sub(first_token)
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
/// wave's when the server ran every one whole (or failed a larger one, or answered too fast
/// to tell: under [`MIN_SPAN_US`]). `None` when no wave was sent; an error when the first
/// failed.
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
            (client.clone(), probe_openai(model)),
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
        // Answered too fast to tell a queue from jitter: the whole wave, a lower bound.
        let too_fast = span(&times.0) < MIN_SPAN_US;
        let limit = BatchLimit {
            wave,
            running: if too_fast {
                wave
            } else {
                running_at_once(&times.0)
            },
        };
        found = Some(limit);
        if !limit.is_lower_bound() || too_fast {
            break;
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_requests_running_at_once_are_those_before_the_gap_a_queue_opens() {
        // Four slots, eight requests: four first tokens at 100, ending at 400; the queued
        // four start as those end.
        let mut wave: Vec<(u64, u64)> = (0..4).map(|_| (100, 400)).collect();
        wave.extend((0..4).map(|_| (500, 800)));
        assert_eq!(running_at_once(&wave), 4);
        // A request whose first token comes as the first ends was queued.
        assert_eq!(running_at_once(&[(100, 400), (400, 700)]), 1);
        // First tokens spread by jitter, no gap of half a service: all ran at once.
        let spread: Vec<(u64, u64)> = (0..8).map(|k| (100 + 20 * k, 400 + 20 * k)).collect();
        assert_eq!(running_at_once(&spread), 8);
        // A prompt queue that staggers the first batch's first tokens does not split it.
        let mut staggered: Vec<(u64, u64)> = (0..4).map(|k| (100 + 30 * k, 700)).collect();
        staggered.extend((0..4).map(|_| (900, 1500)));
        assert_eq!(running_at_once(&staggered), 4);
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
