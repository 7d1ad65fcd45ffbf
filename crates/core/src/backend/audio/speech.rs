//! `/v1/audio/speech`: the JSON body out, audio bytes in. Every arrival of bytes is timed like
//! a token (one each, however many reads it takes: time to first audio byte is the TTFT, the gaps between chunks the ITL);
//! at the end the audio's length is read — from the WAV header (a streaming server's
//! open-ended data length runs to the end of the bytes) or from the PCM byte count at the
//! sample rate. A WAV answer shorter than its header says is a `protocol` failure. With
//! `stream_format: sse` the audio arrives base64 in events (`speech_sse.rs`), each timed like
//! a token.

use std::time::Duration;

use http::{HeaderMap, Uri};
use serde_json::{Map, Value, json};

use super::{AudioConfig, SpeechFormat, SpeechStream, protocol, wav};
use crate::backend::{Activity, RequestInput, RequestSpec};
use crate::http::{HttpClient, ResponseBody, closed_mid_body};
use crate::record::audio::AudioRecord;
use crate::record::{Exchange, Failure, OutcomeKind};

/// The JSON body: `model`, `input`, `voice`, `response_format`, and `stream_format: audio`
/// when streamed.
pub(super) fn body(config: &AudioConfig, spec: &RequestSpec) -> Value {
    let mut body = Map::new();
    let model = super::model(config, spec);
    if !model.is_empty() {
        body.insert("model".into(), json!(model));
    }
    let input = match &spec.input {
        RequestInput::Text(text) => text.clone(),
        RequestInput::Messages(messages) => messages
            .iter()
            .map(|m| m.content.text())
            .collect::<Vec<_>>()
            .join("\n"),
        RequestInput::Batch(prompts) => prompts.join("\n"),
    };
    body.insert("input".into(), json!(input));
    body.insert("voice".into(), json!(config.voice));
    body.insert("response_format".into(), json!(config.format.name()));
    if config.stream {
        body.insert("stream_format".into(), json!(config.speech_stream.name()));
    }
    for (key, value) in &config.extra_body {
        body.insert(key.clone(), value.clone());
    }
    Value::Object(body)
}

/// Sends one speech request and reads its audio into `exchange`.
pub(super) async fn send(
    config: &AudioConfig,
    client: &HttpClient,
    target: (&Uri, &HeaderMap, &RequestSpec),
    exchange: &mut Exchange,
    activity: &Activity,
) {
    let body = body(config, target.2);
    let Some(mut reply) = crate::backend::post::post_json(
        client,
        target,
        &body,
        config.stream,
        None,
        exchange,
        activity,
    )
    .await
    else {
        return;
    };
    exchange.untokenized = true;
    let outcome = if config.stream && config.speech_stream == SpeechStream::Sse {
        super::speech_sse::read(&mut reply, config, exchange, activity).await
    } else {
        read_audio(&mut reply, config, exchange, activity).await
    };
    match outcome.and_then(|bytes| length(&bytes, config)) {
        Ok(length) => exchange.audio = Some(AudioRecord::produced(length)),
        Err(failure) => exchange.fail(failure),
    }
}

/// The audio's bytes, each chunk recorded as it arrives (a whole answer: one chunk at its
/// end).
async fn read_audio(
    body: &mut ResponseBody,
    config: &AudioConfig,
    exchange: &mut Exchange,
    activity: &Activity,
) -> Result<Vec<u8>, Failure> {
    let mut bytes = Vec::new();
    let mut chunks = 0u64;
    loop {
        let frame = body.data().await;
        let now = body.received_at();
        exchange.read_late = body.read_late();
        match frame {
            Some(Ok(data)) if data.is_empty() => {}
            Some(Ok(data)) => {
                activity.bump();
                if bytes.len() + data.len() > config.max_body_bytes {
                    return Err(Failure::new(
                        OutcomeKind::Protocol,
                        format!(
                            "audio answer exceeds {} bytes (see max_body_bytes)",
                            config.max_body_bytes
                        ),
                    ));
                }
                bytes.extend_from_slice(&data);
                // Reads of one arrival (a chunk bigger than the read buffer) are one chunk.
                let same_arrival = exchange.chunks.last().is_some_and(|c| c.at() == now);
                if config.stream && !same_arrival {
                    chunks += 1;
                    exchange.push_output(now, "", Some(chunks));
                }
            }
            Some(Err(error)) => {
                let progress = format!("after {} audio bytes", bytes.len());
                return Err(closed_mid_body(&error, &progress));
            }
            None => {
                if !config.stream && !bytes.is_empty() {
                    exchange.push_output(now, "", Some(1));
                }
                return Ok(bytes);
            }
        }
    }
}

/// The length of the audio received.
pub(super) fn length(bytes: &[u8], config: &AudioConfig) -> Result<Duration, Failure> {
    if bytes.is_empty() {
        return Err(protocol("the speech answer carried no audio"));
    }
    match config.format {
        SpeechFormat::Wav => wav::parse(bytes, config.stream)
            .map(|info| info.duration())
            .map_err(|error| protocol(format!("speech answer: {error}"))),
        SpeechFormat::Pcm => {
            if !bytes.len().is_multiple_of(2) {
                return Err(protocol(format!(
                    "speech answer: {} PCM bytes are not whole 16-bit samples",
                    bytes.len()
                )));
            }
            let samples = (bytes.len() / 2) as f64;
            Ok(Duration::from_secs_f64(
                samples / f64::from(config.pcm_rate),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn config(format: SpeechFormat, stream: bool) -> AudioConfig {
        AudioConfig {
            api: super::super::AudioApi::Speech,
            model: "tts".into(),
            stream,
            clips: Vec::new(),
            drawn: None,
            language: None,
            voice: "alloy".into(),
            format,
            speech_stream: SpeechStream::Audio,
            pcm_rate: 24_000,
            headers: Vec::new(),
            api_key: None,
            max_line_bytes: 1 << 20,
            max_body_bytes: 1 << 20,
            extra_body: Map::new(),
        }
    }

    #[test]
    fn lengths_from_wav_headers_and_pcm_bytes() {
        let pcm = config(SpeechFormat::Pcm, true);
        assert_eq!(length(&[0; 48_000], &pcm).unwrap(), Duration::from_secs(1));
        assert_eq!(
            length(&[0; 3], &pcm).unwrap_err().kind,
            OutcomeKind::Protocol
        );
        let wav_config = config(SpeechFormat::Wav, false);
        let file = wav::pcm16(16_000, &[0; 16_000]);
        assert_eq!(
            length(&file, &wav_config).unwrap(),
            Duration::from_millis(500)
        );
        let cut = length(&file[..1_000], &wav_config).unwrap_err();
        assert_eq!(cut.kind, OutcomeKind::Protocol);
        assert!(cut.message.contains("truncated WAV"), "{cut:?}");
    }

    #[test]
    fn the_body() {
        let spec = RequestSpec {
            index: 0,
            input: RequestInput::Text("Say hi".into()),
            expected_input_tokens: None,
            max_output_tokens: None,
            turn: None,
            tags: Default::default(),
        };
        let value = body(&config(SpeechFormat::Pcm, true), &spec);
        assert_eq!(
            value,
            json!({"model": "tts", "input": "Say hi", "voice": "alloy",
                "response_format": "pcm", "stream_format": "audio"})
        );
    }
}
