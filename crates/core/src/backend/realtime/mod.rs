//! [`RealtimeBackend`]: realtime sessions over WebSocket (`--api realtime`), one session per
//! request — sessions are the unit of concurrency. A session connects to `{target}/v1/realtime`
//! (`?model=` for OpenAI's dialect), configures itself (`session.update`), speaks its audio —
//! a PCM16 tone of `--audio-seconds`, in `input_audio_buffer.append` chunks of
//! `--audio-chunk`, each sent when its audio would have been spoken (paced at real time) —
//! then ends its speech (`input_audio_buffer.commit`, and `response.create` in OpenAI's
//! dialect; `commit` with `final: true` in vLLM's) and reads the response: every text or
//! audio delta is timed like a token (output tokens counted by the tokenizer over the delta
//! text), `response.done` (`transcription.done`) ends it.
//!
//! The request's send time is the **end of speech** (the last audio chunk sent), so the
//! latencies "from send" are from the end of speech: `latency_from_send_ms.ttft` is the time
//! from the end of speech to the first response delta (deltas before the end of speech are
//! not recorded). An `error` event, a failed response,
//! an unknown event type (a `protocol` failure) or a WebSocket closed mid-session are failures
//! with the server's words; what arrived before is kept.

pub mod audio;
pub mod events;

use std::fmt;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use http::HeaderValue;
use serde_json::json;
use tokio::time::Instant;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

use self::events::Event;
use super::{Activity, Backend, BoxFuture, RequestSpec};
use crate::http::{BoxIo, HttpClient};
use crate::record::{Exchange, Failure, OutcomeKind};

/// Whose realtime protocol the server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RealtimeDialect {
    /// OpenAI Realtime: PCM16 at 24 kHz; `commit` then `response.create`; `response.*` events.
    OpenAi,
    /// vLLM's realtime transcription: PCM16 at 16 kHz; `commit` (ready), the audio, `commit`
    /// with `final: true`; `transcription.*` events.
    Vllm,
}

impl RealtimeDialect {
    /// The sample rate of its PCM16 audio.
    pub fn sample_rate(self) -> u32 {
        match self {
            RealtimeDialect::OpenAi => 24_000,
            RealtimeDialect::Vllm => 16_000,
        }
    }
}

/// A configuration that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RealtimeError {
    /// The URL is not a WebSocket URL goodput can open.
    #[error("cannot open a realtime session at {0:?}: {1}")]
    Url(String, String),
}

/// How to open and play a session.
#[derive(Clone)]
pub struct RealtimeConfig {
    /// The WebSocket URL (`ws://host:port/v1/realtime`).
    pub url: String,
    /// The model.
    pub model: String,
    /// The protocol.
    pub dialect: RealtimeDialect,
    /// How much audio each session speaks.
    pub audio: Duration,
    /// Each session's own length instead of `audio` (`--audio-seconds` as a distribution),
    /// from its request index.
    pub audio_length: Option<crate::backend::audio::AudioLength>,
    /// The audio in each `input_audio_buffer.append`.
    pub chunk: Duration,
    /// Target-time seconds per second of this machine's clock (`--time-scale`; the virtual
    /// clock's dilation): the audio is paced at real time on the target's clock, a chunk every
    /// `chunk / time_scale` here.
    pub time_scale: f64,
    /// API key, sent as a bearer token.
    pub api_key: Option<String>,
    /// Extra handshake headers.
    pub headers: Vec<(http::HeaderName, HeaderValue)>,
}

impl fmt::Debug for RealtimeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RealtimeConfig")
            .field("url", &self.url)
            .field("model", &self.model)
            .field("dialect", &self.dialect)
            .field("audio", &self.audio)
            .field("chunk", &self.chunk)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .finish_non_exhaustive()
    }
}

/// The realtime backend: the audio chunks are made once and sent by every session.
#[derive(Debug)]
pub struct RealtimeBackend {
    config: RealtimeConfig,
    /// The `input_audio_buffer.append` events, in order.
    appends: Vec<String>,
    /// Opens each session's connection (TCP live, in-memory pipes in virtual time).
    client: HttpClient,
    /// The wait between appends on this machine's clock.
    pace: Duration,
}

type Socket = WebSocketStream<BoxIo>;

impl RealtimeBackend {
    /// A backend of `config` whose sessions `client`'s connector opens; the URL is checked
    /// here.
    pub fn new(config: RealtimeConfig, client: HttpClient) -> Result<Self, RealtimeError> {
        let bad = |why: &str| RealtimeError::Url(config.url.clone(), why.to_string());
        let request = config
            .url
            .as_str()
            .into_client_request()
            .map_err(|e| bad(&e.to_string()))?;
        if request.uri().scheme_str() != Some("ws") {
            return Err(bad("only ws:// URLs (TLS is not supported yet)"));
        }
        request.uri().host().ok_or_else(|| bad("no host"))?;
        let appends = appends(&config, config.audio);
        if !(config.time_scale.is_finite() && config.time_scale > 0.0) {
            return Err(bad("the time scale must be a positive number"));
        }
        let pace = goodput_protocol::time_scale::to_clock(config.chunk, config.time_scale);
        Ok(RealtimeBackend {
            config,
            appends,
            client,
            pace,
        })
    }

    async fn connect(&self) -> Result<Socket, Failure> {
        let transport = |message: String| Failure::new(OutcomeKind::Transport, message);
        let mut request = self
            .config
            .url
            .as_str()
            .into_client_request()
            .map_err(|e| transport(e.to_string()))?;
        for (name, value) in &self.config.headers {
            request.headers_mut().append(name.clone(), value.clone());
        }
        if let Some(key) = &self.config.api_key
            && let Ok(value) = HeaderValue::try_from(format!("Bearer {key}"))
        {
            request
                .headers_mut()
                .insert(http::header::AUTHORIZATION, value);
        }
        let stream = self
            .client
            .connect_raw()
            .await
            .map_err(|e| transport(e.to_string()))?;
        let (socket, _) = tokio_tungstenite::client_async(request, stream)
            .await
            .map_err(|e| match e {
                tokio_tungstenite::tungstenite::Error::Http(response) => Failure::new(
                    OutcomeKind::Http,
                    format!(
                        "the WebSocket handshake was refused: HTTP {}",
                        response.status()
                    ),
                ),
                other => transport(format!("WebSocket handshake: {other}")),
            })?;
        Ok(socket)
    }

    /// The events that open a session, before its audio.
    fn opening(&self) -> Vec<String> {
        match self.config.dialect {
            RealtimeDialect::OpenAi => vec![
                json!({"type": "session.update", "session": {"modalities": ["text"],
                    "input_audio_format": "pcm16", "turn_detection": null}})
                .to_string(),
            ],
            RealtimeDialect::Vllm => vec![
                json!({"type": "session.update", "model": self.config.model}).to_string(),
                json!({"type": "input_audio_buffer.commit"}).to_string(),
            ],
        }
    }

    /// The events that end the speech.
    fn closing(&self) -> Vec<String> {
        match self.config.dialect {
            RealtimeDialect::OpenAi => vec![
                json!({"type": "input_audio_buffer.commit"}).to_string(),
                json!({"type": "response.create"}).to_string(),
            ],
            RealtimeDialect::Vllm => {
                vec![json!({"type": "input_audio_buffer.commit", "final": true}).to_string()]
            }
        }
    }

    async fn run(&self, index: u64, exchange: &mut Exchange, activity: &Activity) {
        let mut socket = match self.connect().await {
            Ok(socket) => socket,
            Err(failure) => return exchange.fail(failure),
        };
        exchange.response_at = Some(Instant::now());
        exchange.status = Some(101);
        let drawn = self.config.audio_length.as_ref().map(|length| {
            let length = length(index);
            (length, appends(&self.config, length))
        });
        let (length, appends) = match &drawn {
            Some((length, appends)) => (*length, appends.as_slice()),
            None => (self.config.audio, self.appends.as_slice()),
        };
        exchange.audio = Some(crate::record::audio::AudioRecord::sent(length));
        let outcome = self.session(&mut socket, appends, exchange, activity).await;
        if let Err(failure) = outcome {
            exchange.fail(failure);
        }
        let _ = socket.close(None).await;
    }

    /// Speaks, then reads the response; server events are read all along.
    async fn session(
        &self,
        socket: &mut Socket,
        appends: &[String],
        exchange: &mut Exchange,
        activity: &Activity,
    ) -> Result<(), Failure> {
        for event in self.opening() {
            send(socket, event).await?;
        }
        let start = Instant::now();
        let mut next = 0usize;
        loop {
            let speaking = next <= appends.len();
            let due = start
                + self
                    .pace
                    .saturating_mul(u32::try_from(next).unwrap_or(u32::MAX));
            tokio::select! {
                biased;
                message = socket.next() => {
                    if self.on_message(message, exchange, activity)? {
                        return Ok(());
                    }
                }
                () = tokio::time::sleep_until(due), if speaking => {
                    match appends.get(next) {
                        Some(append) => send(socket, append.clone()).await?,
                        None => {
                            // The speech has ended: the request's send time.
                            exchange.sent_at = Some(Instant::now());
                            for event in self.closing() {
                                send(socket, event).await?;
                            }
                        }
                    }
                    next += 1;
                }
            }
        }
    }

    /// Handles one message; `Ok(true)` when the response is done.
    fn on_message(
        &self,
        message: Option<Result<Message, tokio_tungstenite::tungstenite::Error>>,
        exchange: &mut Exchange,
        activity: &Activity,
    ) -> Result<bool, Failure> {
        let now = Instant::now();
        let closed = |detail: String| {
            Failure::new(
                OutcomeKind::Transport,
                format!("the WebSocket closed mid-session{detail}"),
            )
        };
        let text = match message {
            None => return Err(closed(String::new())),
            Some(Err(error)) => return Err(closed(format!(": {error}"))),
            Some(Ok(Message::Close(frame))) => {
                let detail =
                    frame.map_or_else(String::new, |f| format!(" ({} {})", f.code, f.reason));
                return Err(closed(detail));
            }
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(_)) => return Ok(false),
        };
        activity.bump();
        match events::classify(text.as_str()) {
            Event::Delta(delta) if exchange.sent_at.is_some() => {
                exchange.push_output(now, &delta, None);
                Ok(false)
            }
            Event::Delta(_) | Event::Other => Ok(false),
            Event::Done(_) => {
                if exchange.chunks.is_empty() {
                    return Err(Failure::new(
                        OutcomeKind::Protocol,
                        "the response ended without any output",
                    ));
                }
                exchange.finish_reason = Some("done".into());
                Ok(exchange.sent_at.is_some())
            }
            Event::Error(message) => Err(Failure::new(
                OutcomeKind::StreamError,
                format!("server error: {message}"),
            )),
            Event::Unknown(message) => Err(Failure::new(OutcomeKind::Protocol, message)),
        }
    }
}

/// The `input_audio_buffer.append` events of `length` of tone, in order.
fn appends(config: &RealtimeConfig, length: Duration) -> Vec<String> {
    let rate = config.dialect.sample_rate();
    let tone = audio::tone(rate, length);
    audio::chunks(&tone, rate, config.chunk)
        .into_iter()
        .map(|chunk| {
            json!({"type": "input_audio_buffer.append", "audio": audio::base64(chunk)}).to_string()
        })
        .collect()
}

async fn send(socket: &mut Socket, event: String) -> Result<(), Failure> {
    socket.send(Message::text(event)).await.map_err(|e| {
        Failure::new(
            OutcomeKind::Transport,
            format!("the WebSocket closed mid-session: {e}"),
        )
    })
}

impl Backend for RealtimeBackend {
    fn send<'a>(
        &'a self,
        request: &'a RequestSpec,
        exchange: &'a mut Exchange,
        activity: &'a Activity,
    ) -> BoxFuture<'a, ()> {
        Box::pin(self.run(request.index, exchange, activity))
    }

    fn text_input(&self) -> bool {
        false
    }
}

/// The default chunk of audio per append.
pub const DEFAULT_CHUNK: Duration = Duration::from_millis(100);
