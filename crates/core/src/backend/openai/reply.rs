//! Reading OpenAI-compatible replies into an [`Exchange`]: SSE streams chunk by chunk, and
//! error bodies (message extracted from every shape servers use); whole JSON bodies are
//! `whole`'s.

use std::borrow::Cow;

use goodput_protocol::stream::{ChoiceView, ChunkView};
use http::StatusCode;
use http::header::{HeaderMap, LOCATION, RETRY_AFTER};
use serde_json::Value;
use tokio::time::{Duration, Instant};

use crate::backend::Activity;
use crate::backend::sse::{SseDecoder, SseError, SseEvent};
use crate::http::{Arrivals, HttpError, ResponseBody, closed_mid_body};
use crate::record::{Exchange, Failure, OutcomeKind, OutputParts};

/// Most bytes of an error body read.
const MAX_ERROR_BODY: usize = 64 << 10;
/// Longest server message kept in a failure.
const MAX_MESSAGE_CHARS: usize = 1000;
/// After `[DONE]` (or a stream error), how much to drain so the connection can be reused, how
/// long to wait for the body's end before returning (it normally follows at once), and how long
/// to keep draining in the background after that.
const DRAIN_BYTES: usize = 64 << 10;
const DRAIN_INLINE: Duration = Duration::from_millis(10);
const DRAIN_BACKGROUND: Duration = Duration::from_secs(2);

/// Size limits of one reply.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub(super) max_line_bytes: usize,
    pub(super) max_body_bytes: usize,
    /// The body is a Responses API answer (typed events, a `response` object).
    pub(super) responses: bool,
    /// The body is an Anthropic Messages answer (typed events, a `message` object).
    pub(super) messages: bool,
    /// The body is an encoder answer, for a request of this many inputs.
    pub(super) encoder: Option<(super::encoder::Encoder, usize)>,
}

/// Reads up to `limit` bytes; `Ok((bytes, true))` when the body ended within the limit.
pub(crate) async fn read_limited(
    body: &mut ResponseBody,
    limit: usize,
    activity: &Activity,
) -> Result<(Vec<u8>, bool), (Vec<u8>, HttpError)> {
    let mut bytes = Vec::new();
    while let Some(frame) = body.data().await {
        activity.bump();
        match frame {
            Ok(data) if bytes.len() + data.len() > limit => {
                bytes.extend_from_slice(&data[..limit - bytes.len()]);
                return Ok((bytes, false));
            }
            Ok(data) => bytes.extend_from_slice(&data),
            Err(error) => return Err((bytes, error)),
        }
    }
    Ok((bytes, true))
}

/// A non-2xx reply: always a [`Failure::http`] with the server's message.
pub(crate) async fn read_error(
    status: StatusCode,
    headers: &HeaderMap,
    mut body: ResponseBody,
    activity: &Activity,
) -> Result<(), Failure> {
    let bytes = match read_limited(&mut body, MAX_ERROR_BODY, activity).await {
        Ok((bytes, _)) | Err((bytes, _)) => bytes,
    };
    let text = if bytes.iter().all(u8::is_ascii_whitespace) {
        "(empty body)".to_string()
    } else {
        match serde_json::from_slice::<Value>(&bytes) {
            Ok(value) => error_text(&value),
            Err(_) => String::from_utf8_lossy(&bytes).trim().to_string(),
        }
    };
    let mut message = format!(
        "HTTP {} {}: {}",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        truncate(&text)
    );
    for (name, label) in [
        (RETRY_AFTER, "retry-after"),
        (LOCATION, "location; redirects are not followed"),
    ] {
        if let Some(value) = headers.get(name).and_then(|value| value.to_str().ok()) {
            message.push_str(&format!(" ({label}: {})", truncate(value)));
        }
    }
    Err(Failure::http(status.as_u16(), message))
}

/// The message of an error payload, whatever its shape: `{"error": {"message", "type"}}`,
/// `{"error": "text", "error_type"}`, `{"object": "error", "message"}`, `{"detail": …}`,
/// `{"code", "message", "type"}` (llama.cpp), a plain string, or else the JSON itself.
pub(crate) fn error_text(value: &Value) -> String {
    let Value::Object(map) = value else {
        return value
            .as_str()
            .map_or_else(|| value.to_string(), str::to_string);
    };
    let kind = map
        .get("type")
        .or_else(|| map.get("error_type"))
        .and_then(Value::as_str);
    let message = match map.get("error").filter(|inner| !inner.is_null()) {
        Some(inner @ Value::Object(_)) => return error_text(inner),
        Some(inner) => Some(error_text(inner)),
        None => map
            .get("message")
            .or_else(|| map.get("detail"))
            .map(error_text),
    };
    match (message, kind) {
        (Some(message), Some(kind)) => format!("{message} ({kind})"),
        (Some(message), None) => message,
        (None, _) => value.to_string(),
    }
}

fn truncate(text: &str) -> Cow<'_, str> {
    match text.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((end, _)) => Cow::Owned(format!("{}…", &text[..end])),
        None => Cow::Borrowed(text),
    }
}

fn sse_failure(error: &SseError) -> Failure {
    let message = match error {
        SseError::LineTooLong { limit } | SseError::EventTooLarge { limit } => {
            format!("oversized stream line: {error} (limit {limit} bytes, see max_line_bytes)")
        }
        SseError::InvalidUtf8 { .. } => format!("bad stream: {error}"),
    };
    Failure::new(OutcomeKind::Protocol, message)
}

enum Flow {
    More,
    Done,
}

/// State of one SSE reply.
struct StreamReader {
    decoder: SseDecoder,
    events: Vec<SseEvent>,
    /// JSON chunks parsed.
    chunks: u64,
    /// A `finish_reason` was seen (a stream may then end without `[DONE]`).
    finished: bool,
    /// Responses API events.
    responses: bool,
    /// Anthropic Messages events.
    messages: bool,
}

impl StreamReader {
    /// Decodes `bytes` that arrived at `arrivals`; events decoded before a decoding error
    /// still count.
    fn feed(
        &mut self,
        bytes: &[u8],
        arrivals: Arrivals,
        exchange: &mut Exchange,
    ) -> Result<Flow, Failure> {
        let decoded = self.decoder.feed(bytes, &mut self.events);
        if let Flow::Done = self.handle_events(arrivals, exchange)? {
            return Ok(Flow::Done);
        }
        decoded.map_err(|error| sse_failure(&error))?;
        Ok(Flow::More)
    }

    fn finish(&mut self, now: Instant, exchange: &mut Exchange) -> Result<(), Failure> {
        let decoded = self.decoder.finish(&mut self.events);
        if let Flow::Done = self.handle_events(Arrivals::at(now), exchange)? {
            return Ok(());
        }
        decoded.map_err(|error| sse_failure(&error))?;
        if self.finished {
            Ok(())
        } else {
            Err(Failure::new(
                OutcomeKind::Protocol,
                format!(
                    "stream ended before [DONE] after {} chunks (no finish_reason either)",
                    self.chunks
                ),
            ))
        }
    }

    fn handle_events(
        &mut self,
        arrivals: Arrivals,
        exchange: &mut Exchange,
    ) -> Result<Flow, Failure> {
        let mut events = std::mem::take(&mut self.events);
        let mut flow = Ok(Flow::More);
        for (index, event) in events.drain(..).enumerate() {
            flow = self.on_event(&event, arrivals.event(index), exchange);
            if !matches!(flow, Ok(Flow::More)) {
                break;
            }
        }
        events.clear();
        self.events = events;
        flow
    }

    fn on_event(
        &mut self,
        event: &SseEvent,
        now: Instant,
        exchange: &mut Exchange,
    ) -> Result<Flow, Failure> {
        exchange.first_event_at.get_or_insert(now);
        if event.is_error() {
            let text = match serde_json::from_str::<Value>(&event.data) {
                Ok(value) => error_text(&value),
                Err(_) => event.data.clone(),
            };
            return Err(stream_error(&text));
        }
        let data = event.data.trim_ascii();
        if data == "[DONE]" {
            return Ok(Flow::Done);
        }
        if data.is_empty() {
            return Ok(Flow::More);
        }
        self.chunks += 1;
        if self.responses || self.messages {
            let next = if self.messages {
                super::messages::on_event(data, now, exchange)?
            } else {
                super::responses::on_event(data, now, exchange)?
            };
            return match next {
                super::responses::Next::More => Ok(Flow::More),
                super::responses::Next::Done => {
                    self.finished = true;
                    Ok(Flow::Done)
                }
            };
        }
        let chunk = parse_chunk(data, self.chunks)?;
        let has_error = chunk.error.as_ref().is_some_and(|error| !error.is_null());
        if has_error || chunk.object.as_deref() == Some("error") {
            // The whole payload: siblings such as TGI's `error_type` belong to the message.
            let whole: Value = serde_json::from_str(data).unwrap_or(Value::Null);
            return Err(stream_error(&error_text(&whole)));
        }
        self.record_chunk(&chunk, now, exchange);
        Ok(Flow::More)
    }

    /// Records one parsed chunk: the answer's id, each choice's output and finish, usage and
    /// server timings.
    fn record_chunk(&mut self, chunk: &ChunkView<'_>, now: Instant, exchange: &mut Exchange) {
        if exchange.response_id.is_none()
            && let Some(id) = chunk.id.as_deref().filter(|id| !id.is_empty())
        {
            exchange.response_id = Some(id.to_string());
        }
        let cumulative = cumulative_tokens(chunk);
        for choice in chunk.choices.iter().flatten() {
            exchange.choices = exchange.choices.max(choice.index.saturating_add(1));
            if choice.has_output() {
                push_choice(exchange, now, choice, cumulative);
            }
            if let Some(reason) = &choice.finish_reason {
                exchange.finish_reason = Some(reason.to_string());
                self.finished = true;
            }
        }
        if chunk.usage.is_some() {
            exchange.usage = chunk.usage;
        }
        if chunk.timings.is_some() {
            exchange.server_timings = chunk.timings;
        }
    }
}

/// Output tokens so far according to the chunk: continuous usage, else llama.cpp's per-chunk
/// `timings.predicted_n` (sent with `timings_per_token`).
fn cumulative_tokens(chunk: &ChunkView<'_>) -> Option<u64> {
    chunk
        .usage
        .map(|usage| usage.completion_tokens)
        .or_else(|| {
            let predicted = chunk.timings.and_then(|timings| timings.predicted_n)?;
            (predicted.is_finite() && predicted >= 0.0).then_some(predicted as u64)
        })
}

/// The `number`th stream chunk, read without copying its text.
fn parse_chunk(data: &str, number: u64) -> Result<ChunkView<'_>, Failure> {
    serde_json::from_str(data).map_err(|error| {
        let start: String = data.chars().take(120).collect();
        Failure::new(
            OutcomeKind::Protocol,
            format!("invalid JSON in stream chunk {number}: {error} (data starts: {start:?})"),
        )
    })
}

/// Records one output-carrying choice delta, reasoning, answer and tool calls apart.
fn push_choice(
    exchange: &mut Exchange,
    now: Instant,
    choice: &ChoiceView<'_>,
    cumulative: Option<u64>,
) {
    let calls = choice.tool_calls();
    let (tool, tool_calls): (String, Vec<(u32, bool)>) = if calls.is_empty() {
        (String::new(), Vec::new())
    } else {
        (
            calls
                .iter()
                .flat_map(|call| call.generated_text())
                .collect(),
            calls
                .iter()
                .map(|call| (call.index, call.id.is_some()))
                .collect(),
        )
    };
    let parts = OutputParts {
        reasoning: choice.reasoning_text().unwrap_or(""),
        answer: choice.answer_text().unwrap_or(""),
        tool: &tool,
        tool_calls: &tool_calls,
    };
    exchange.push_parts(now, choice.index, parts, cumulative);
}

pub(super) fn stream_error(text: &str) -> Failure {
    Failure::new(
        OutcomeKind::StreamError,
        format!("server error in stream: {}", truncate(text)),
    )
}

/// A 2xx SSE reply, chunk by chunk.
pub(super) async fn read_stream(
    mut body: ResponseBody,
    exchange: &mut Exchange,
    activity: &Activity,
    limits: Limits,
) -> Result<(), Failure> {
    let mut reader = StreamReader {
        decoder: SseDecoder::new(limits.max_line_bytes),
        events: Vec::new(),
        chunks: 0,
        finished: false,
        responses: limits.responses,
        messages: limits.messages,
    };
    loop {
        let frame = body.data().await;
        let now = body.received_at();
        exchange.read_late = body.read_late();
        match frame {
            Some(Ok(bytes)) => {
                activity.bump();
                match reader.feed(&bytes, body.arrivals(), exchange) {
                    Ok(Flow::More) => {
                        if !exchange.chunks.is_empty() {
                            body.watch_arrivals(false);
                        }
                    }
                    Ok(Flow::Done) => {
                        body.finish(DRAIN_BYTES, DRAIN_INLINE, DRAIN_BACKGROUND)
                            .await;
                        return Ok(());
                    }
                    Err(failure) => {
                        if failure.kind == OutcomeKind::StreamError {
                            body.finish(DRAIN_BYTES, DRAIN_INLINE, DRAIN_BACKGROUND)
                                .await;
                        }
                        return Err(failure);
                    }
                }
            }
            Some(Err(error)) => {
                let progress = format!("mid-stream after {} chunks", reader.chunks);
                return Err(closed_mid_body(&error, &progress));
            }
            None => return reader.finish(now, exchange),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn error_shapes() {
        for (body, expected) in [
            (
                r#"{"error":{"message":"bad","type":"invalid_request_error","code":400}}"#,
                "bad (invalid_request_error)",
            ),
            (
                r#"{"error":"overloaded","error_type":"overloaded"}"#,
                "overloaded (overloaded)",
            ),
            (
                r#"{"object":"error","message":"old vllm","type":"BadRequestError"}"#,
                "old vllm (BadRequestError)",
            ),
            (
                r#"{"error":{"object":"error","message":"nested"}}"#,
                "nested",
            ),
            (r#"{"detail":"Not Found"}"#, "Not Found"),
            (
                r#"{"code":400,"message":"ctx","type":"exceed_context_size_error"}"#,
                "ctx (exceed_context_size_error)",
            ),
            (r#""plain""#, "plain"),
            (r#"{"weird":1}"#, r#"{"weird":1}"#),
        ] {
            assert_eq!(
                error_text(&serde_json::from_str(body).unwrap()),
                expected,
                "{body}"
            );
        }
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        let long = "é".repeat(MAX_MESSAGE_CHARS + 5);
        let short = truncate(&long);
        assert_eq!(short.chars().count(), MAX_MESSAGE_CHARS + 1);
        assert!(short.ends_with('…'));
    }
}
