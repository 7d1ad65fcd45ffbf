//! `POST /v1/audio/speech`: a JSON body (`input`, `voice`, `response_format` `wav` or `pcm`,
//! `stream_format: audio` to stream the bytes, `sse` for OpenAI's `speech.audio.delta` events
//! of base64 audio and a `speech.audio.done` with the usage) answered with 16-bit mono PCM at [`SPEECH_RATE`] Hz, a
//! WAV header first when `wav` is asked (its data length exact: the audio's length is known
//! before it is generated).
//!
//! Cost model: the input is a prefill of its words (one token each, at least one); the speech
//! lasts [`SECONDS_PER_WORD`] per word, and is generated as [`CODEC_TOKENS_PER_SECOND`] audio
//! codec tokens per second of speech, decoded by the engine exactly as a streamed
//! `/v1/completions` of that length. Each streamed piece carries the audio of one codec token
//! (the last piece any remainder), so audio arrives as it is decoded.

use std::sync::Arc;

use bytes::Bytes;
use goodput_protocol::base64;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::ServerState;
use super::audio::{bad_request, generate};
use super::body::SimBody;
use super::completion_stream::Piece;
use super::routes::error_response;

/// Samples per second of the audio produced (OpenAI's `pcm` rate).
pub(crate) const SPEECH_RATE: u32 = 24_000;
/// Seconds of speech per word of input (150 words a minute).
pub(crate) const SECONDS_PER_WORD: f64 = 0.4;
/// Audio codec tokens per second of speech the decoder generates (an assumption in the range
/// of neural codecs: 12.5 Hz for Mimi, 75 Hz for EnCodec at 24 kHz).
pub(crate) const CODEC_TOKENS_PER_SECOND: f64 = 25.0;

/// How a speech answer is streamed (`stream_format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Streamed {
    /// Not streamed: one body.
    No,
    /// `audio`: the bytes as they are decoded.
    Audio,
    /// `sse`: `speech.audio.delta` events of base64 audio, then `speech.audio.done`.
    Sse,
}

/// What a speech request asks for.
struct Ask {
    words: usize,
    wav: bool,
    stream: Streamed,
}

fn ask(body: &[u8]) -> Result<Ask, String> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let input = value.get("input").and_then(Value::as_str).unwrap_or("");
    if input.trim().is_empty() {
        return Err("`input` must be a non-empty string".into());
    }
    let wav = match value.get("response_format").and_then(Value::as_str) {
        None | Some("wav") => true,
        Some("pcm") => false,
        Some(other) => {
            return Err(format!(
                "response_format {other:?}: the simulator speaks wav and pcm"
            ));
        }
    };
    let stream = match value.get("stream_format").and_then(Value::as_str) {
        None => Streamed::No,
        Some("audio") => Streamed::Audio,
        Some("sse") => Streamed::Sse,
        Some(other) => {
            return Err(format!(
                "stream_format {other:?}: the simulator streams `audio` or `sse`"
            ));
        }
    };
    Ok(Ask {
        words: input.split_whitespace().count().max(1),
        wav,
        stream,
    })
}

/// A canonical 44-byte header of `data` bytes of 16-bit mono PCM at [`SPEECH_RATE`].
fn wav_header(data: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(44);
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&data.saturating_add(36).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt \x10\0\0\0\x01\0\x01\0");
    out.extend_from_slice(&SPEECH_RATE.to_le_bytes());
    out.extend_from_slice(&(SPEECH_RATE * 2).to_le_bytes());
    out.extend_from_slice(b"\x02\0\x10\0data");
    out.extend_from_slice(&data.to_le_bytes());
    out
}

/// Answers a speech request.
pub(super) async fn answer(state: Arc<ServerState>, body: &[u8]) -> Response<SimBody> {
    let ask = match ask(body) {
        Ok(ask) => ask,
        Err(message) => return bad_request(&message),
    };
    let seconds = ask.words as f64 * SECONDS_PER_WORD;
    let tokens = (seconds * CODEC_TOKENS_PER_SECOND).round().max(1.0) as u64;
    let total = 2 * (seconds * f64::from(SPEECH_RATE)).round() as usize;
    let per_token = (total / tokens as usize) & !1;
    let mut received = generate(&state, ask.words, tokens);
    let header = if ask.wav {
        wav_header(u32::try_from(total).unwrap_or(u32::MAX))
    } else {
        Vec::new()
    };
    let kind = if ask.wav { "audio/wav" } else { "audio/pcm" };
    if ask.stream == Streamed::No {
        while let Some(piece) = received.recv().await {
            if let Err(message) = piece {
                return error_response(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "server_error",
                    &message,
                    None,
                );
            }
        }
        let mut audio = header;
        audio.resize(audio.len() + total, 0);
        return audio_response(SimBody::full(audio), kind);
    }
    let sse = ask.stream == Streamed::Sse;
    let usage = json!({"input_tokens": ask.words, "output_tokens": tokens,
        "total_tokens": ask.words as u64 + tokens});
    let body = stream_audio(received, (header, total, per_token), sse, usage);
    let kind = if sse { "text/event-stream" } else { kind };
    audio_response(body, kind)
}

/// The streamed answer's body: each decoded piece's audio as it comes — the bytes, or (`sse`)
/// a `speech.audio.delta` event of them, then `speech.audio.done` with `usage`.
fn stream_audio(
    mut received: mpsc::UnboundedReceiver<Piece>,
    (header, total, per_token): (Vec<u8>, usize, usize),
    sse: bool,
    usage: Value,
) -> SimBody {
    let (body, sink) = SimBody::channel(64);
    let frame = move |bytes: Vec<u8>| match sse {
        true => {
            let audio = base64::encode(&bytes, base64::BASE64_STANDARD);
            let event = json!({"type": "speech.audio.delta", "audio": audio});
            Bytes::from(format!("data: {event}\n\n"))
        }
        false => Bytes::from(bytes),
    };
    tokio::spawn(async move {
        let (mut sent, mut first) = (0usize, Some(header));
        while let Some(piece) = received.recv().await {
            let Ok((_, finished)) = piece else {
                return sink.abort().await;
            };
            let size = if finished {
                total - sent
            } else {
                per_token.min(total - sent)
            };
            let mut bytes = first.take().unwrap_or_default();
            bytes.resize(bytes.len() + size, 0);
            sent += size;
            if sink.send(frame(bytes)).await.is_err() {
                return;
            }
        }
        if sent < total && sink.send(frame(vec![0u8; total - sent])).await.is_err() {
            return;
        }
        if sse {
            let done = json!({"type": "speech.audio.done", "usage": usage});
            let _ = sink.send(Bytes::from(format!("data: {done}\n\n"))).await;
        }
    });
    body
}

fn audio_response(body: SimBody, kind: &'static str) -> Response<SimBody> {
    let mut response = Response::new(body);
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(kind));
    response
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn asks_and_headers() {
        let a =
            ask(br#"{"input":"one two three","response_format":"pcm","stream_format":"audio"}"#)
                .unwrap();
        assert_eq!((a.words, a.wav, a.stream), (3, false, Streamed::Audio));
        let sse = ask(br#"{"input":"x","stream_format":"sse"}"#).unwrap();
        assert_eq!(sse.stream, Streamed::Sse);
        assert!(ask(br#"{"input":"x","response_format":"mp3"}"#).is_err());
        assert!(ask(br#"{"input":"  "}"#).is_err());
        let header = wav_header(48_000);
        assert_eq!(header.len(), 44);
        let mut file = header;
        file.resize(44 + 48_000, 0);
        assert_eq!(super::super::audio::wav_seconds(&file).unwrap(), 1.0);
    }
}
