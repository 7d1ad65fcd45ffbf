//! Whether a llama.cpp server's slots share one KV cache: started with `-np N` each slot has a
//! cache of its own (`/props` reports each slot's share of `-c`), with `--kv-unified` (its
//! default without `-np`) the slots share one of the size each reports. The slot probe
//! ([`super::slot_split`]) tells them apart only where two micro-batches cost more than one;
//! this probe asks the cache directly: every slot gets a prompt that fits its own share, the
//! prompts together half as much again as one slot's context. A cache per slot runs them all;
//! a shared one fills and llama-server refuses the rest ("Context size has been exceeded").

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::{CalibrateError, CalibrationProbe, Kept, probe_openai, run_probe};
use crate::http::HttpClient;
use crate::record::{OutcomeKind, RequestRecord};

/// The prompts together, in slot contexts: more than one (a shared cache overflows) with room
/// for the server counting fewer tokens than `cl100k_base`.
const TOGETHER: f64 = 1.5;
/// The longest prompt, in slot contexts: room in its own slot for a template, a tokenizer that
/// counts more, and the answer.
const LONGEST: f64 = 0.7;
/// The most prompt tokens the probe sends in all: beyond, a CPU server would take minutes.
pub const MAX_CACHE_PROBE_TOKENS: u32 = 32_768;
/// Answer tokens of each request: enough decode steps that every request still holds its cells
/// when the last arrives, even from a client slowed down by a loaded machine (with 4, a CI run
/// of 2026-12-04 read a shared cache as one per slot; with 32, one of 2026-12-06 read nothing).
const ANSWER: u32 = 64;
/// Times the probe runs before it says nothing: each run whose requests all completed but
/// were never in the cache together (a client or server slowed down between the sends) is
/// run again with other prompts.
const ATTEMPTS: u64 = 3;

/// The probe for `slots` slots of `context` tokens each: one request per slot, all sent
/// together; `None` for fewer than two slots or more than [`MAX_CACHE_PROBE_TOKENS`] in all.
pub fn cache_probe(slots: u32, context: u32) -> Option<CalibrationProbe> {
    if slots < 2 || context < 64 {
        return None;
    }
    let together = TOGETHER * f64::from(context);
    let prompt = (together / f64::from(slots))
        .min(LONGEST * f64::from(context))
        .ceil() as u32;
    let total = u64::from(prompt) * u64::from(slots);
    (total <= u64::from(MAX_CACHE_PROBE_TOKENS)).then_some(CalibrationProbe {
        concurrency: slots,
        input_tokens: prompt,
        output_tokens: ANSWER,
        requests: slots,
    })
}

/// What the cache probe found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheReading {
    /// Every request ran, all of them in the cache at once: each slot has a cache of its own.
    PerSlot,
    /// The server refused `refused` of the requests for want of context: the slots share one.
    Shared {
        /// Requests refused.
        refused: u32,
    },
}

/// Runs `probe` ([`cache_probe`]) on the server; `Ok(None)` when requests failed for another
/// reason than the context, or, three runs over, all ran but one ended before another's
/// prompt was in (nothing read).
pub async fn kv_sharing(
    (client, model): (&HttpClient, &str),
    probe: &CalibrationProbe,
    (seed, cancel): (u64, &CancellationToken),
) -> Result<Option<CacheReading>, CalibrateError> {
    for attempt in 0..ATTEMPTS {
        let mut kept = Kept::default();
        let backend = (client.clone(), probe_openai(model));
        let seed = seed.wrapping_add(attempt);
        run_probe(backend, probe, (seed, cancel.clone()), &mut kept).await?;
        let reading = read_cache(&kept.0);
        if reading.is_some() || !ran_apart(&kept.0) || cancel.is_cancelled() {
            return Ok(reading);
        }
    }
    Ok(None)
}

/// Whether every request completed, so that nothing was read only because they never held the
/// cache together: worth another run.
fn ran_apart(records: &[RequestRecord]) -> bool {
    !records.is_empty() && records.iter().all(|record| record.failure.is_none())
}

/// The reading of the probe's records: all completed, all held in the cache at once (the last
/// first token before the first end), a cache per slot; some refused for want of context and
/// every other completed, a shared cache; anything else, `None` — requests that ran one after
/// another say nothing of a cache they never filled together.
pub fn read_cache(records: &[RequestRecord]) -> Option<CacheReading> {
    let mut refused = 0u32;
    for record in records {
        match &record.failure {
            None => {}
            Some(failure) if refused_for_context(failure.kind, &failure.message) => refused += 1,
            Some(_) => return None,
        }
    }
    // Held together: every prompt in the cache (its first token out) before any answer ended.
    let first: Option<Vec<u64>> = records.iter().map(|r| r.first_token_us).collect();
    let last_first = first.and_then(|first| first.into_iter().max());
    let first_end = records.iter().map(|r| r.end_us).min();
    let together = last_first
        .zip(first_end)
        .is_some_and(|(first, end)| first < end);
    match (together, refused) {
        (_, refused) if refused > 0 => Some(CacheReading::Shared { refused }),
        (true, _) => Some(CacheReading::PerSlot),
        (false, _) => None,
    }
}

/// Whether a failure is llama-server's for a full cache: "Context size has been exceeded." in
/// the stream, the prompt under way. A prompt too long for its own slot is refused before
/// (HTTP 400, "exceeds the available context size"): that says nothing of the sharing.
fn refused_for_context(kind: OutcomeKind, message: &str) -> bool {
    kind == OutcomeKind::StreamError && message.to_ascii_lowercase().contains("context")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn record(index: usize, failure: Option<(&str, &str)>) -> RequestRecord {
        sent_at(index, failure, 0)
    }

    fn sent_at(index: usize, failure: Option<(&str, &str)>, sent_us: u64) -> RequestRecord {
        let mut value = json!({
            "index": index, "phase": "measure", "scheduled_us": sent_us, "dequeued_us": sent_us,
            "sent_us": sent_us, "first_token_us": sent_us + 500, "end_us": sent_us + 1000,
            "streamed": true, "input_tokens": 600,
            "input_tokens_source": "usage", "output_tokens": 4, "output_tokens_source": "usage",
            "chunks": [], "items": 1, "status": 200
        });
        if let Some((kind, message)) = failure {
            value["failure"] = json!({"kind": kind, "message": message});
            value["output_tokens"] = json!(0);
        }
        serde_json::from_value(value).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_probe_overflows_one_slots_context_and_fits_in_each() {
        // The real-server test's `-np 4 -c 4096`: 4 × 384 tokens, 1.5 slot contexts.
        let probe = cache_probe(4, 1024).unwrap_or_else(|| panic!("no probe"));
        assert_eq!((probe.concurrency, probe.requests), (4, 4));
        assert_eq!(probe.input_tokens, 384);
        // Two slots: 0.7 of a context each, 1.4 together.
        let two = cache_probe(2, 1000).unwrap_or_else(|| panic!("no probe"));
        assert_eq!(two.input_tokens, 700);
        assert_eq!(cache_probe(1, 4096), None);
        // llama-server's default (4 slots of a model's 131,072 tokens): minutes of prefill.
        assert_eq!(cache_probe(4, 131_072), None);
        assert!(cache_probe(4, 8192).is_some());
    }

    #[test]
    fn refusals_for_context_read_as_a_shared_cache() {
        let exceeded = Some((
            "stream_error",
            "server error in stream: Context size has been exceeded. (server_error)",
        ));
        let all_ran: Vec<_> = (0..4).map(|i| record(i, None)).collect();
        assert_eq!(read_cache(&all_ran), Some(CacheReading::PerSlot));
        // llama-server with `--kv-unified`: every request of the batch refused (2026-12-04).
        let refused: Vec<_> = (0..4).map(|i| record(i, exceeded)).collect();
        assert_eq!(
            read_cache(&refused),
            Some(CacheReading::Shared { refused: 4 })
        );
        let some = vec![record(0, None), record(1, exceeded)];
        assert_eq!(read_cache(&some), Some(CacheReading::Shared { refused: 1 }));
        // A prompt too long for its own slot (the server counting many more tokens) is
        // refused before it runs: nothing read. Nor from another failure.
        let too_long = Some((
            "http",
            "HTTP 400 Bad Request: request (1149 tokens) exceeds the available context size \
             (1024 tokens), try increasing it (exceed_context_size_error)",
        ));
        assert_eq!(read_cache(&[record(0, None), record(1, too_long)]), None);
        let reset = vec![record(0, None), record(1, Some(("transport", "reset")))];
        assert_eq!(read_cache(&reset), None);
        assert_eq!(read_cache(&[]), None);
    }

    #[test]
    fn requests_that_ran_one_after_another_read_nothing() {
        // Each request takes 1 ms, its first token at 0.5: sent 0.1 ms apart, the last first
        // token 0.2 ms before the first end — all in the cache at once.
        let together: Vec<_> = (0..4).map(|i| sent_at(i, None, 100 * i as u64)).collect();
        assert_eq!(read_cache(&together), Some(CacheReading::PerSlot));
        // Sent 0.25 ms apart, all before the first ended, but the last prompt in 0.25 ms after
        // it: a shared cache need never have held them together.
        let late: Vec<_> = (0..4).map(|i| sent_at(i, None, 250 * i as u64)).collect();
        assert_eq!(read_cache(&late), None);
        let apart: Vec<_> = (0..4).map(|i| sent_at(i, None, 1000 * i as u64)).collect();
        assert_eq!(read_cache(&apart), None);
        // Those are run again; a failure of another kind, or nothing run, is not.
        assert!(ran_apart(&late) && ran_apart(&apart));
        let reset = vec![
            sent_at(0, None, 0),
            sent_at(1, Some(("transport", "reset")), 0),
        ];
        assert!(!ran_apart(&reset) && !ran_apart(&[]));
        // A refusal for want of context says a shared cache whenever they were sent.
        let exceeded = Some(("stream_error", "Context size has been exceeded."));
        let refused = vec![sent_at(0, None, 0), sent_at(1, exceeded, 5000)];
        assert_eq!(
            read_cache(&refused),
            Some(CacheReading::Shared { refused: 1 })
        );
    }
}
