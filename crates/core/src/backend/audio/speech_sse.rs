//! A speech answer streamed as server-sent events (`stream_format: sse`, OpenAI's shape):
//! `speech.audio.delta` events whose `audio` is base64 of the next bytes of the audio, each
//! timed like a token (one output "token" each, as the raw stream's chunks), then
//! `speech.audio.done` (its `usage`, codec tokens, is not the record's). An `error` event is a `stream_error` with the server's words, an unknown
//! event type or undecodable audio a `protocol` failure; the stream must end with the done
//! event (or `[DONE]`, or the body's end after at least one delta).

use serde_json::Value;
use tokio::time::Instant;

use super::events::{Ended, Flow, each_event, event_json};
use super::{AudioConfig, protocol, server_error};
use crate::backend::Activity;
use crate::backend::sse::SseEvent;
use crate::http::{ResponseBody, closed_mid_body};
use crate::record::{Exchange, Failure};

/// The audio bytes of the stream, each delta recorded at `now` as it is read.
pub(super) async fn read(
    body: &mut ResponseBody,
    config: &AudioConfig,
    exchange: &mut Exchange,
    activity: &Activity,
) -> Result<Vec<u8>, Failure> {
    let mut audio = Vec::new();
    let on_event = |sse: &SseEvent, now, exchange: &mut Exchange| {
        event(sse, now, config, &mut audio, exchange)
    };
    match each_event(body, config.max_line_bytes, exchange, activity, on_event).await? {
        Ended::Cut(error) => Err(closed_mid_body(
            &error,
            &format!("after {} audio bytes", audio.len()),
        )),
        Ended::Done | Ended::BodyEnd => Ok(audio),
    }
}

/// One event: a delta's audio appended to `audio` and recorded as a chunk.
fn event(
    sse: &SseEvent,
    now: Instant,
    config: &AudioConfig,
    audio: &mut Vec<u8>,
    exchange: &mut Exchange,
) -> Result<Flow, Failure> {
    let Some(value) = event_json(sse, now, exchange, "speech")? else {
        return Ok(Flow::Done);
    };
    match value.get("type").and_then(Value::as_str) {
        Some("speech.audio.delta") => {
            let text = value.get("audio").and_then(Value::as_str).unwrap_or("");
            let bytes = crate::units::base64_decode(text)
                .ok_or_else(|| protocol("a speech.audio.delta's `audio` is not base64"))?;
            if audio.len() + bytes.len() > config.max_body_bytes {
                return Err(protocol(format!(
                    "audio answer exceeds {} bytes (see max_body_bytes)",
                    config.max_body_bytes
                )));
            }
            audio.extend_from_slice(&bytes);
            let chunks = exchange.chunks.len() as u64 + 1;
            exchange.push_output(now, "", Some(chunks));
            Ok(Flow::More)
        }
        // Its `usage` counts codec tokens; the record's output "tokens" stay the deltas, as
        // the raw stream's chunks, so TPOT and ITL are the gaps between deltas.
        Some("speech.audio.done") => Ok(Flow::Done),
        Some("error") => Err(server_error(&value)),
        Some(other) => Err(protocol(format!("unknown speech event type {other:?}"))),
        None => Err(protocol("a speech event without a `type`")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::record::OutcomeKind;

    use crate::backend::sse::data_event as sse;

    #[test]
    fn deltas_done_and_bad_events() {
        let config = AudioConfig {
            api: super::super::AudioApi::Speech,
            model: String::new(),
            stream: true,
            clips: Vec::new(),
            drawn: None,
            language: None,
            voice: "alloy".into(),
            format: super::super::SpeechFormat::Pcm,
            speech_stream: super::super::SpeechStream::Sse,
            pcm_rate: 24_000,
            headers: Vec::new(),
            api_key: None,
            max_line_bytes: 1 << 20,
            max_body_bytes: 1 << 20,
            extra_body: serde_json::Map::new(),
        };
        let (now, mut audio, mut exchange) = (Instant::now(), Vec::new(), Exchange::default());
        let delta = sse(r#"{"type":"speech.audio.delta","audio":"AAECAw=="}"#);
        let flow = event(&delta, now, &config, &mut audio, &mut exchange).unwrap();
        assert_eq!((flow, audio.as_slice()), (Flow::More, &[0u8, 1, 2, 3][..]));
        assert_eq!(exchange.chunks.len(), 1);
        let done = sse(
            r#"{"type":"speech.audio.done","usage":{"input_tokens":3,"output_tokens":9,"total_tokens":12}}"#,
        );
        let flow = event(&done, now, &config, &mut audio, &mut exchange).unwrap();
        assert_eq!(flow, Flow::Done);
        assert_eq!((exchange.usage, exchange.chunks.len()), (None, 1));
        for (bad, kind) in [
            (
                r#"{"type":"speech.audio.delta","audio":"@@"}"#,
                OutcomeKind::Protocol,
            ),
            (r#"{"type":"speech.audio.wat"}"#, OutcomeKind::Protocol),
            (
                r#"{"type":"error","error":{"message":"busy"}}"#,
                OutcomeKind::StreamError,
            ),
        ] {
            let failure = event(&sse(bad), now, &config, &mut audio, &mut exchange).unwrap_err();
            assert_eq!(failure.kind, kind, "{bad}: {failure:?}");
        }
    }
}
