//! The server events of a realtime session, classified: text or audio deltas (timed like
//! tokens), the end of the response, an error, the events that only acknowledge, and anything
//! else — an unknown event type, a failure with the event's words.

use serde_json::Value;

/// What one server event means to the session.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Output arrived: its text (empty for audio).
    Delta(String),
    /// The response ended; its output tokens when it said.
    Done(Option<u64>),
    /// The server reported an error: its message.
    Error(String),
    /// An acknowledgement or lifecycle event with nothing to time.
    Other,
    /// An event type goodput does not know: the type and the event's start.
    Unknown(String),
}

/// Event types that acknowledge or describe, with nothing to time (OpenAI Realtime's and
/// vLLM's realtime transcription's).
const QUIET: [&str; 9] = [
    "session.",
    "transcription_session.",
    "input_audio_buffer.",
    "conversation.",
    "rate_limits.",
    "response.created",
    "response.output_item.",
    "response.content_part.",
    "output_audio_buffer.",
];

/// Classifies one text frame of the server.
pub fn classify(text: &str) -> Event {
    let Ok(value) = serde_json::from_str::<Value>(text) else {
        return Event::Unknown(format!("a frame that is not JSON: {text:.120}"));
    };
    let kind = value.get("type").and_then(Value::as_str).unwrap_or("");
    let delta = || {
        value
            .get("delta")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    match kind {
        "response.text.delta"
        | "response.output_text.delta"
        | "response.audio_transcript.delta"
        | "response.output_audio_transcript.delta"
        | "transcription.delta" => Event::Delta(delta()),
        "response.audio.delta" | "response.output_audio.delta" => Event::Delta(String::new()),
        "response.done" => done(&value),
        "transcription.done" => Event::Done(
            value
                .pointer("/usage/completion_tokens")
                .or_else(|| value.pointer("/usage/output_tokens"))
                .and_then(Value::as_u64),
        ),
        "error" => Event::Error(
            value
                .pointer("/error/message")
                .or_else(|| value.get("error"))
                .map_or_else(
                    || value.to_string(),
                    |m| m.as_str().map_or_else(|| m.to_string(), str::to_string),
                ),
        ),
        _ if kind.ends_with(".done") && kind.starts_with("response.") => Event::Other,
        _ if QUIET.iter().any(|prefix| kind.starts_with(prefix)) => Event::Other,
        _ => Event::Unknown(format!("unknown event type {kind:?}: {text:.120}")),
    }
}

/// `response.done`: a failed or cancelled response is an error with its reason.
fn done(value: &Value) -> Event {
    let status = value.pointer("/response/status").and_then(Value::as_str);
    if matches!(status, Some("failed" | "cancelled" | "incomplete")) {
        let reason = value
            .pointer("/response/status_details")
            .map_or_else(String::new, Value::to_string);
        return Event::Error(format!(
            "the response ended {}: {reason}",
            status.unwrap_or("")
        ));
    }
    Event::Done(
        value
            .pointer("/response/usage/output_tokens")
            .and_then(Value::as_u64),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_classified() {
        assert_eq!(
            classify(r#"{"type":"response.text.delta","delta":"hi"}"#),
            Event::Delta("hi".into())
        );
        assert_eq!(
            classify(r#"{"type":"transcription.delta","delta":"a"}"#),
            Event::Delta("a".into())
        );
        assert_eq!(
            classify(r#"{"type":"response.audio.delta","delta":"AAAA"}"#),
            Event::Delta(String::new())
        );
        assert_eq!(
            classify(
                r#"{"type":"response.done","response":{"status":"completed","usage":{"output_tokens":7}}}"#
            ),
            Event::Done(Some(7))
        );
        assert!(matches!(
            classify(r#"{"type":"response.done","response":{"status":"failed"}}"#),
            Event::Error(_)
        ));
        assert_eq!(
            classify(r#"{"type":"error","error":{"message":"bad"}}"#),
            Event::Error("bad".into())
        );
        assert_eq!(classify(r#"{"type":"session.created"}"#), Event::Other);
        assert_eq!(
            classify(r#"{"type":"response.text.done","text":"x"}"#),
            Event::Other
        );
        assert!(
            matches!(classify(r#"{"type":"surprise"}"#), Event::Unknown(m) if m.contains("surprise"))
        );
    }
}
