//! The journal record a real client would have written for a request served in virtual time:
//! its engine requests' timelines (one per prompt) merged into one reply, with the failure a
//! client would have seen for a refusal, an abort or a timeout.

use std::time::Duration;

use goodput_core::backend::RequestSpec;
use goodput_core::record::{Failure, OutcomeKind, Phase, RequestRecord, TokenSource};
use goodput_sim::engine::Rejection;
use goodput_sim::virtual_time::RequestTimeline;

/// What the client knows of one request besides the engine's timelines.
#[derive(Debug, Clone)]
pub(crate) struct Sent {
    /// The request as the workload made it.
    pub(crate) spec: RequestSpec,
    /// Warm-up or measured.
    pub(crate) phase: Phase,
    /// When the load scheduled it.
    pub(crate) scheduled: Duration,
    /// When it reached the server (later than `scheduled` behind a client-side cap).
    pub(crate) sent: Duration,
    /// Prompt tokens as the server counted them (all prompts).
    pub(crate) input_tokens: u64,
    /// Whether the answer is streamed.
    pub(crate) stream: bool,
    /// Whether usage reports prefix-cache hits.
    pub(crate) cached_details: bool,
    /// An encoder request (embeddings, rerank): one whole body, no output tokens.
    pub(crate) encoder: bool,
    /// Prompt tokens served from the prefix cache.
    pub(crate) cached_tokens: u64,
    /// The server refused the body before any engine saw it (HTTP 400).
    pub(crate) invalid: Option<String>,
    /// The request timed out at this instant.
    pub(crate) timed_out: Option<Duration>,
}

fn micros(at: Duration) -> u64 {
    u64::try_from(at.as_micros()).unwrap_or(u64::MAX)
}

/// How the request failed, as the client saw it (`None`: it completed).
fn failure(sent: &Sent, timelines: &[&RequestTimeline]) -> Option<Failure> {
    if let Some(message) = &sent.invalid {
        return Some(Failure::http(400, message.clone()));
    }
    if let Some(rejection) = timelines.iter().find_map(|t| t.rejected.as_ref()) {
        let status = match rejection {
            Rejection::QueueFull { .. } => 429,
            Rejection::TooLong(_) | Rejection::Invalid(_) => 400,
        };
        return Some(Failure::http(status, rejection.to_string()));
    }
    if let Some(reason) = timelines.iter().find_map(|t| t.aborted.as_ref()) {
        return Some(Failure::new(OutcomeKind::StreamError, reason.clone()));
    }
    if let Some(at) = sent.timed_out {
        return Some(Failure::new(
            OutcomeKind::Timeout,
            format!(
                "no complete answer within the request timeout ({:?})",
                at.saturating_sub(sent.sent)
            ),
        ));
    }
    timelines
        .iter()
        .any(|t| t.finished.is_none())
        .then(|| Failure::new(OutcomeKind::Cancelled, "never finished"))
}

/// What the client received: its chunks (`[µs, tokens]`), tokens and when it ended.
struct Reply {
    chunks: Vec<[u64; 2]>,
    output_tokens: u64,
    end: Duration,
}

impl Reply {
    fn of(sent: &Sent, timelines: &[&RequestTimeline], failed: bool) -> Reply {
        let mut deliveries: Vec<(Duration, u32)> = timelines
            .iter()
            .flat_map(|t| t.deliveries.iter().copied())
            .filter(|(at, _)| sent.timed_out.is_none_or(|end| *at <= end))
            .collect();
        deliveries.sort_by_key(|(at, _)| *at);
        let finished = timelines.iter().map(|t| t.finished.map(|(at, _)| at)).max();
        let last = deliveries.last().map(|(at, _)| *at);
        let end = match (sent.timed_out, finished.flatten()) {
            (Some(at), _) => at,
            (None, Some(at)) if !failed => at,
            _ => last.unwrap_or(sent.sent),
        };
        let output_tokens: u64 = deliveries.iter().map(|(_, n)| u64::from(*n)).sum();
        if sent.encoder {
            // The vectors or scores arrive in one body; the one generated token is internal.
            let chunks = if failed {
                Vec::new()
            } else {
                vec![[micros(end), 0]]
            };
            return Reply {
                chunks,
                output_tokens: 0,
                end,
            };
        }
        let chunks = if !sent.stream && output_tokens > 0 {
            vec![[micros(end), output_tokens]]
        } else {
            deliveries
                .iter()
                .map(|(at, n)| [micros(*at), u64::from(*n)])
                .collect()
        };
        Reply {
            chunks,
            output_tokens,
            end,
        }
    }
}

/// The record of request `sent` from its engine requests' timelines.
pub(crate) fn record(sent: &Sent, timelines: &[&RequestTimeline]) -> RequestRecord {
    let failure = failure(sent, timelines);
    let Reply {
        chunks,
        output_tokens,
        end,
    } = Reply::of(sent, timelines, failure.is_some());
    let first_token_us = chunks.first().map(|c| c[0]).filter(|_| sent.stream);
    let answered = failure.is_none() || !chunks.is_empty();
    RequestRecord {
        index: sent.spec.index,
        phase: sent.phase,
        scheduled_us: micros(sent.scheduled),
        dequeued_us: micros(sent.sent),
        sent_us: Some(micros(sent.sent)),
        response_us: answered.then(|| first_token_us.unwrap_or(micros(end))),
        first_token_us,
        last_token_us: chunks.last().map(|c| c[0]),
        end_us: micros(end),
        streamed: sent.stream,
        input_tokens: Some(sent.input_tokens),
        input_tokens_source: TokenSource::Usage,
        expected_input_tokens: sent.spec.expected_input_tokens,
        output_tokens,
        output_tokens_source: TokenSource::Usage,
        requested_output_tokens: sent.spec.max_output_tokens,
        tokenizer_output_tokens: None,
        chunks,
        items: u32::try_from(timelines.len()).unwrap_or(u32::MAX).max(1),
        status: Some(failure.as_ref().and_then(|f| f.status).unwrap_or(200)),
        finish_reason: finish_reason(timelines).filter(|_| failure.is_none()),
        failure,
        retries: 0,
        headers: Vec::new(),
        server_timings: None,
        turn: sent.spec.turn,
        step: 0,
        session: None,
        reasoning_tokens: None,
        reasoning_tokens_source: None,
        first_answer_us: first_token_us,
        tool_calls: 0,
        first_tool_call_us: None,
        tool_call_tokens: None,
        ended_in_tool_call: false,
        cached_input_tokens: sent.cached_details.then_some(sent.cached_tokens),
        expected_prefix_tokens: None,
        tool_result_turn: false,
        read_late_us: None,
        images: Vec::new(),
        request_id: None,
        server_request_id: None,
        response_id: None,
        model: None,
        adapter: None,
        class: None,
        target: None,
        replica: None,
    }
}

/// The last prompt's finish reason (all prompts of a batch share their settings).
fn finish_reason(timelines: &[&RequestTimeline]) -> Option<String> {
    timelines
        .iter()
        .rev()
        .find_map(|t| t.finished.map(|(_, reason)| reason.as_str().to_string()))
}
