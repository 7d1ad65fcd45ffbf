//! [`AudioBackend`]: the OpenAI audio APIs. **Speech recognition** (`--api transcriptions`):
//! `/v1/audio/transcriptions`, a multipart form with a WAV `file` (a tone of `--audio-seconds`
//! or a file of `--audio-dir`, request `i` taking clip `i mod n`), `model`, `response_format:
//! json`, `stream`, and `language` when given; the answer is one JSON `{"text", "usage"?}` or
//! an SSE stream of transcript deltas (OpenAI's `transcript.text.delta`/`.done` events, or
//! vLLM's chat-completion-chunk-style `choices[].delta.content`), each timed like a token.
//! **Speech synthesis** (`--api speech`): `/v1/audio/speech`, a JSON body (`model`, `input`:
//! the prompt, `voice`, `response_format`: `wav` or `pcm`, and `stream_format: audio` when
//! streamed); every chunk of audio bytes is timed like a token (one per chunk), and the audio
//! produced is read from the WAV header (or the PCM byte count at the sample rate).
//!
//! The record carries the audio's duration (`audio.input_seconds` sent, `audio.output_seconds`
//! produced); the step's `audio` figures (real-time factor, audio seconds per second) come
//! from it. An error event is a `stream_error` with the server's words, an event of unknown
//! type and a truncated or malformed WAV answer a `protocol` failure.

mod events;
mod speech;
mod speech_sse;
mod transcribe;
pub mod wav;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::Uri;
use http::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};

use super::{Activity, Backend, BoxFuture, RequestSpec};
use crate::backend::openai::reply::error_text;
use crate::http::HttpClient;
use crate::record::{Exchange, Failure, OutcomeKind};

/// Which audio API to call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AudioApi {
    /// `/v1/audio/transcriptions`: audio in, text out.
    Transcriptions,
    /// `/v1/audio/speech`: text in, audio out.
    Speech,
}

impl AudioApi {
    /// The endpoint below the API root.
    pub fn endpoint(self) -> &'static str {
        match self {
            AudioApi::Transcriptions => "audio/transcriptions",
            AudioApi::Speech => "audio/speech",
        }
    }
}

/// The audio format asked of a speech server: one whose duration can be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SpeechFormat {
    /// A WAV file (its header gives the rate and format).
    Wav,
    /// Raw 16-bit mono little-endian PCM at [`AudioConfig::pcm_rate`].
    Pcm,
}

impl SpeechFormat {
    /// The `response_format` value.
    pub fn name(self) -> &'static str {
        match self {
            SpeechFormat::Wav => "wav",
            SpeechFormat::Pcm => "pcm",
        }
    }
}

/// How a streamed speech answer arrives (`stream_format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SpeechStream {
    /// `audio`: the audio bytes themselves, chunk by chunk.
    #[default]
    Audio,
    /// `sse`: server-sent `speech.audio.delta` events of base64 audio, then
    /// `speech.audio.done` with the usage.
    Sse,
}

impl SpeechStream {
    /// The `stream_format` value.
    pub fn name(self) -> &'static str {
        match self {
            SpeechStream::Audio => "audio",
            SpeechStream::Sse => "sse",
        }
    }
}

/// One audio file a transcription request sends.
#[derive(Clone)]
pub struct Clip {
    /// Its name (the form's `filename`).
    pub name: String,
    /// The WAV bytes.
    pub wav: Bytes,
    /// Its length.
    pub duration: Duration,
}

impl fmt::Debug for Clip {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Clip")
            .field("name", &self.name)
            .field("bytes", &self.wav.len())
            .field("duration", &self.duration)
            .finish()
    }
}

impl Clip {
    /// A 440 Hz tone of `length` as 16-bit mono PCM WAV at `rate`.
    pub fn tone(rate: u32, length: Duration) -> Clip {
        let samples = super::realtime::audio::tone(rate, length);
        let wav = wav::pcm16(rate, &samples);
        let duration = wav::parse(&wav, false).map_or(length, |info| info.duration());
        Clip {
            name: "audio.wav".into(),
            wav: Bytes::from(wav),
            duration,
        }
    }

    /// A WAV file's bytes, checked: its duration read from its header.
    pub fn from_wav(name: &str, bytes: Vec<u8>) -> Result<Clip, wav::WavError> {
        let info = wav::parse(&bytes, false)?;
        Ok(Clip {
            name: name.to_string(),
            wav: Bytes::from(bytes),
            duration: info.duration(),
        })
    }
}

/// Each request's audio length from its index (`--audio-seconds` as a distribution, drawn
/// from the run's seed: `workload::audio_lengths`).
pub type AudioLength = Arc<dyn Fn(u64) -> Duration + Send + Sync>;

/// Transcriptions whose every request sends a tone of its own drawn length.
#[derive(Clone)]
pub struct DrawnTones {
    /// The tone's sample rate.
    pub rate: u32,
    /// Request `i`'s length.
    pub length: AudioLength,
}

impl fmt::Debug for DrawnTones {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DrawnTones")
            .field("rate", &self.rate)
            .finish_non_exhaustive()
    }
}

/// How to talk to the server.
#[derive(Clone)]
pub struct AudioConfig {
    /// Transcriptions or speech.
    pub api: AudioApi,
    /// `model`; omitted when empty.
    pub model: String,
    /// Ask for a streamed answer.
    pub stream: bool,
    /// Transcriptions: the clips, request `i` sending clip `i mod n` (at least one, unless
    /// `drawn`).
    pub clips: Vec<Clip>,
    /// Transcriptions: a tone of a drawn length for each request instead of `clips`.
    pub drawn: Option<DrawnTones>,
    /// Transcriptions: the `language` field, when given.
    pub language: Option<String>,
    /// Speech: the `voice`.
    pub voice: String,
    /// Speech: the format asked for.
    pub format: SpeechFormat,
    /// Speech, streamed: raw audio chunks or SSE events.
    pub speech_stream: SpeechStream,
    /// Speech: the sample rate of a `pcm` answer (OpenAI's is 24 kHz).
    pub pcm_rate: u32,
    /// Extra request headers.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// API key, sent as a bearer token.
    pub api_key: Option<String>,
    /// Longest SSE line accepted.
    pub max_line_bytes: usize,
    /// Longest body accepted (a speech answer's audio included).
    pub max_body_bytes: usize,
    /// Extra body keys, merged last (speech: JSON keys; transcriptions: form fields, strings
    /// as they are and other values as JSON).
    pub extra_body: serde_json::Map<String, serde_json::Value>,
}

impl fmt::Debug for AudioConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AudioConfig")
            .field("api", &self.api)
            .field("model", &self.model)
            .field("stream", &self.stream)
            .field("clips", &self.clips)
            .field("drawn", &self.drawn)
            .field("language", &self.language)
            .field("voice", &self.voice)
            .field("format", &self.format)
            .field("speech_stream", &self.speech_stream)
            .field("pcm_rate", &self.pcm_rate)
            .field("extra_body", &self.extra_body)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .finish_non_exhaustive()
    }
}

/// Why an [`AudioConfig`] cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AudioConfigError {
    /// Transcriptions without audio.
    #[error("no audio to send: give --audio-seconds or an --audio-dir with WAV files")]
    NoClips,
    /// The key cannot be a header.
    #[error("the API key contains characters not allowed in an HTTP header (check for newlines)")]
    InvalidApiKey,
    /// A zero limit or rate.
    #[error("`{0}` must be greater than zero")]
    Zero(&'static str),
}

/// The audio backend.
pub struct AudioBackend {
    config: AudioConfig,
    client: HttpClient,
    uri: Uri,
    headers: HeaderMap,
}

impl fmt::Debug for AudioBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AudioBackend")
            .field("uri", &self.uri)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The multipart boundary of transcription forms (no clip can hold it: WAV bytes are binary,
/// but the boundary is long and checked against each clip).
pub(crate) const BOUNDARY: &str = "goodput-audio-form-7d1c9a3e5b";

impl AudioBackend {
    /// A backend sending through `client` (whose target gives the API root).
    pub fn new(config: AudioConfig, client: HttpClient) -> Result<Self, AudioConfigError> {
        if config.api == AudioApi::Transcriptions
            && config.clips.is_empty()
            && config.drawn.is_none()
        {
            return Err(AudioConfigError::NoClips);
        }
        for (value, name) in [
            (config.max_body_bytes, "max_body_bytes"),
            (config.max_line_bytes, "max_line_bytes"),
            (config.pcm_rate as usize, "pcm_rate"),
        ] {
            if value == 0 {
                return Err(AudioConfigError::Zero(name));
            }
        }
        let mut headers = super::post::json_headers(config.api_key.as_deref(), &config.headers)
            .ok_or(AudioConfigError::InvalidApiKey)?;
        if config.api == AudioApi::Transcriptions
            && !config.headers.iter().any(|(name, _)| name == CONTENT_TYPE)
        {
            let form = format!("multipart/form-data; boundary={BOUNDARY}");
            if let Ok(value) = HeaderValue::try_from(form) {
                headers.insert(CONTENT_TYPE, value);
            }
        }
        let uri = client.target().endpoint(config.api.endpoint());
        Ok(AudioBackend {
            config,
            client,
            uri,
            headers,
        })
    }

    async fn run(&self, spec: &RequestSpec, exchange: &mut Exchange, activity: &Activity) {
        let target = (&self.uri, &self.headers, spec);
        match self.config.api {
            AudioApi::Transcriptions => {
                transcribe::send(&self.config, &self.client, target, exchange, activity).await;
            }
            AudioApi::Speech => {
                speech::send(&self.config, &self.client, target, exchange, activity).await;
            }
        }
    }
}

impl Backend for AudioBackend {
    fn send<'a>(
        &'a self,
        request: &'a RequestSpec,
        exchange: &'a mut Exchange,
        activity: &'a Activity,
    ) -> BoxFuture<'a, ()> {
        Box::pin(self.run(request, exchange, activity))
    }

    /// A transcription's prompt is audio: no input tokens unless the server reports them.
    fn text_input(&self) -> bool {
        self.config.api == AudioApi::Speech
    }

    /// Neither API takes `max_tokens`: the audio sets the length.
    fn asks_output_length(&self) -> bool {
        false
    }
}

/// A malformed answer or event: a `protocol` failure.
fn protocol(message: impl Into<String>) -> Failure {
    Failure::new(OutcomeKind::Protocol, message)
}

/// A server's error answer or event (`{"error": …}`, or the error object itself): a
/// `stream_error` with the server's words.
fn server_error(value: &serde_json::Value) -> Failure {
    let inner = value.get("error").filter(|e| !e.is_null()).unwrap_or(value);
    Failure::new(
        OutcomeKind::StreamError,
        format!("server error: {}", error_text(inner)),
    )
}

/// The model to name: the request's own (a mix), else the backend's.
fn model<'a>(config: &'a AudioConfig, spec: &'a RequestSpec) -> &'a str {
    spec.tags.model.as_deref().unwrap_or(&config.model)
}
