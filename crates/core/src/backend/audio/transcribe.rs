//! `/v1/audio/transcriptions`: the multipart form out, the transcript in — one JSON body, or
//! SSE events of transcript deltas (OpenAI's typed `transcript.text.*` events, or vLLM's
//! chat-completion-chunk-style `choices[].delta.content`).

use goodput_protocol::Usage;
use http::{HeaderMap, Uri};
use serde_json::Value;
use tokio::time::Instant;

use super::events::{Ended, Flow, each_event, event_json};
use super::{AudioConfig, BOUNDARY, Clip, protocol, server_error};
use crate::backend::sse::SseEvent;
use crate::backend::{Activity, RequestSpec};
use crate::http::{HttpClient, closed_mid_body};
use crate::record::audio::AudioRecord;
use crate::record::{Exchange, Failure, OutcomeKind};

/// The clip request `index` sends: a tone of its drawn length, else clip `index mod n`.
fn clip(config: &AudioConfig, index: u64) -> Option<Clip> {
    if let Some(drawn) = &config.drawn {
        return Some(Clip::tone(drawn.rate, (drawn.length)(index)));
    }
    let n = config.clips.len() as u64;
    config
        .clips
        .get(usize::try_from(index % n.max(1)).ok()?)
        .cloned()
}

/// The multipart form: `file`, `model`, `response_format`, `stream`, `language`.
pub(super) fn form(config: &AudioConfig, spec: &RequestSpec, clip: &Clip) -> Vec<u8> {
    let mut out = Vec::with_capacity(clip.wav.len() + 512);
    let name = clip.name.replace(['"', '\r', '\n'], "_");
    out.extend_from_slice(
        format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; \
             filename=\"{name}\"\r\nContent-Type: audio/wav\r\n\r\n"
        )
        .as_bytes(),
    );
    out.extend_from_slice(&clip.wav);
    out.extend_from_slice(b"\r\n");
    let model = super::model(config, spec);
    let mut field = |key: &str, value: &str| {
        out.extend_from_slice(
            format!(
                "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{key}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    };
    if !model.is_empty() {
        field("model", model);
    }
    field("response_format", "json");
    field("stream", if config.stream { "true" } else { "false" });
    if let Some(language) = &config.language {
        field("language", language);
    }
    for (key, value) in &config.extra_body {
        match value {
            Value::String(text) => field(key, text),
            other => field(key, &other.to_string()),
        }
    }
    out.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    out
}

/// Sends one transcription request and reads its answer into `exchange`.
pub(super) async fn send(
    config: &AudioConfig,
    client: &HttpClient,
    (uri, headers, spec): (&Uri, &HeaderMap, &RequestSpec),
    exchange: &mut Exchange,
    activity: &Activity,
) {
    let Some(clip) = clip(config, spec.index) else {
        return exchange.fail(Failure::new(OutcomeKind::Invalid, "no audio clip"));
    };
    exchange.audio = Some(AudioRecord::sent(clip.duration));
    let body = form(config, spec, &clip);
    let target = (uri, headers, spec);
    let Some(mut reply) = crate::backend::post::post_bytes(
        client,
        target,
        body,
        config.stream,
        None,
        exchange,
        activity,
    )
    .await
    else {
        return;
    };
    let outcome = if config.stream {
        read_stream(&mut reply, config.max_line_bytes, exchange, activity).await
    } else {
        match crate::backend::post::read_whole(
            &mut reply,
            config.max_body_bytes,
            activity,
            exchange,
        )
        .await
        {
            Ok(bytes) => read_json(&bytes, reply.received_at(), exchange),
            Err(failure) => Err(failure),
        }
    };
    if let Err(failure) = outcome {
        exchange.fail(failure);
    }
}

/// A whole JSON answer: `{"text": …, "usage"?}`.
pub(super) fn read_json(
    bytes: &[u8],
    now: Instant,
    exchange: &mut Exchange,
) -> Result<(), Failure> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|error| protocol(format!("invalid JSON transcription body: {error}")))?;
    if value.get("error").is_some_and(|e| !e.is_null()) {
        return Err(server_error(&value));
    }
    let Some(text) = value.get("text").and_then(Value::as_str) else {
        return Err(protocol("the transcription has no `text`"));
    };
    exchange.push_output(now, text, None);
    exchange.usage = value.get("usage").and_then(usage);
    Ok(())
}

/// Tokens of a transcription `usage`: `input_tokens`/`output_tokens` (OpenAI) or
/// `prompt_tokens`/`completion_tokens` (vLLM); a `duration` usage carries no tokens.
fn usage(value: &Value) -> Option<Usage> {
    let count = |keys: [&str; 2]| {
        keys.iter()
            .find_map(|k| value.get(*k).and_then(Value::as_u64))
    };
    let output = count(["output_tokens", "completion_tokens"])?;
    let input = count(["input_tokens", "prompt_tokens"]).unwrap_or(0);
    Some(Usage::new(input, output))
}

/// One SSE event of a transcription stream.
fn event(event: &SseEvent, now: Instant, exchange: &mut Exchange) -> Result<Flow, Failure> {
    let Some(value) = event_json(event, now, exchange, "transcription")? else {
        return Ok(Flow::Done);
    };
    match value.get("type").and_then(Value::as_str) {
        Some("transcript.text.delta") => {
            let delta = value.get("delta").and_then(Value::as_str).unwrap_or("");
            exchange.push_output(now, delta, None);
            Ok(Flow::More)
        }
        Some("transcript.text.done") => {
            if let Some(usage) = value.get("usage").and_then(usage) {
                exchange.usage = Some(usage);
            }
            Ok(Flow::Done)
        }
        Some("error") => Err(server_error(&value)),
        Some(other) => Err(protocol(format!(
            "unknown transcription event type {other:?}"
        ))),
        None => {
            let choices = value.get("choices").and_then(Value::as_array);
            for choice in choices.into_iter().flatten() {
                let delta = choice.pointer("/delta/content").and_then(Value::as_str);
                if let Some(text) = delta.filter(|t| !t.is_empty()) {
                    exchange.push_output(now, text, None);
                }
            }
            if let Some(usage) = value.get("usage").and_then(usage) {
                exchange.usage = Some(usage);
            }
            Ok(Flow::More)
        }
    }
}

/// A streamed transcript, event by event; the stream must end (`[DONE]`, a done event or the
/// body's end after at least one event).
async fn read_stream(
    body: &mut crate::http::ResponseBody,
    max_line_bytes: usize,
    exchange: &mut Exchange,
    activity: &Activity,
) -> Result<(), Failure> {
    match each_event(body, max_line_bytes, exchange, activity, event).await? {
        Ended::Cut(error) => {
            let progress = format!("mid-transcript after {} deltas", exchange.chunks.len());
            Err(closed_mid_body(&error, &progress))
        }
        Ended::BodyEnd if exchange.first_event_at.is_none() => {
            Err(protocol("the transcription stream ended without an event"))
        }
        Ended::Done | Ended::BodyEnd => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    use crate::backend::sse::data_event as sse;

    #[test]
    fn openai_and_vllm_stream_events() {
        let now = Instant::now();
        let mut exchange = Exchange::default();
        let delta = sse(r#"{"type":"transcript.text.delta","delta":"hello"}"#);
        assert!(matches!(event(&delta, now, &mut exchange), Ok(Flow::More)));
        let done = sse(
            r#"{"type":"transcript.text.done","text":"hello","usage":{"type":"tokens","input_tokens":50,"output_tokens":3}}"#,
        );
        assert!(matches!(event(&done, now, &mut exchange), Ok(Flow::Done)));
        assert_eq!(exchange.usage.unwrap().completion_tokens, 3);
        let chunk =
            sse(r#"{"object":"transcription.chunk","choices":[{"delta":{"content":" world"}}]}"#);
        assert!(matches!(event(&chunk, now, &mut exchange), Ok(Flow::More)));
        assert_eq!(exchange.text, "hello world");
        let unknown = sse(r#"{"type":"transcript.mystery"}"#);
        let failure = event(&unknown, now, &mut exchange).err().unwrap();
        assert_eq!(failure.kind, OutcomeKind::Protocol);
        assert!(
            failure.message.contains("transcript.mystery"),
            "{failure:?}"
        );
        let error = sse(r#"{"type":"error","error":{"message":"model overloaded"}}"#);
        let failure = event(&error, now, &mut exchange).err().unwrap();
        assert_eq!(failure.kind, OutcomeKind::StreamError);
        assert!(failure.message.contains("model overloaded"), "{failure:?}");
        // llama.cpp's `error:` field: an error whatever its payload says.
        let mut flagged = sse(r#"{"message":"slot lost"}"#);
        flagged.kind = crate::backend::sse::SseEventKind::Error;
        let failure = event(&flagged, now, &mut exchange).err().unwrap();
        assert_eq!(failure.kind, OutcomeKind::StreamError);
        assert!(failure.message.contains("slot lost"), "{failure:?}");
    }

    #[test]
    fn whole_answers_and_the_form() {
        let now = Instant::now();
        let mut exchange = Exchange::default();
        read_json(
            br#"{"text":"a b c","usage":{"type":"duration","seconds":2}}"#,
            now,
            &mut exchange,
        )
        .unwrap();
        assert_eq!((exchange.text.as_str(), exchange.usage), ("a b c", None));
        assert!(read_json(br#"{"transcript":"x"}"#, now, &mut Exchange::default()).is_err());
        let config = AudioConfig {
            api: super::super::AudioApi::Transcriptions,
            model: "whisper".into(),
            stream: true,
            clips: vec![Clip::tone(16_000, std::time::Duration::from_millis(10))],
            drawn: None,
            language: Some("en".into()),
            voice: String::new(),
            format: super::super::SpeechFormat::Wav,
            speech_stream: super::super::SpeechStream::Audio,
            pcm_rate: 24_000,
            headers: Vec::new(),
            api_key: None,
            max_line_bytes: 1 << 20,
            max_body_bytes: 1 << 20,
            extra_body: serde_json::Map::new(),
        };
        let spec = RequestSpec {
            index: 0,
            input: crate::backend::RequestInput::Text(String::new()),
            expected_input_tokens: None,
            max_output_tokens: None,
            turn: None,
            tags: Default::default(),
        };
        let body = form(&config, &spec, &config.clips[0]);
        let text = String::from_utf8_lossy(&body);
        for part in [
            "name=\"file\"; filename=\"audio.wav\"",
            "name=\"model\"\r\n\r\nwhisper",
            "name=\"stream\"\r\n\r\ntrue",
            "name=\"language\"\r\n\r\nen",
        ] {
            assert!(text.contains(part), "{part}");
        }
        assert!(text.ends_with(&format!("--{BOUNDARY}--\r\n")));
    }
}
