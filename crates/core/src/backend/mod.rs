//! The backend seam: anything that can execute one [`RequestSpec`] and report what happened
//! into an [`Exchange`]. The runner owns timing of the schedule, timeouts and cancellation; a
//! backend owns the wire. Today: [`openai::OpenAiBackend`] (chat, completions and Responses,
//! streamed or not; embeddings and rerank, items counted) and the closure backend of
//! [`crate::measure`] (any async call timed in-process), and [`template::TemplateBackend`]
//! (any JSON API from a body template, items counted by a JSONPath), and [`v2::V2Backend`]
//! (KServe v2 / Open Inference Protocol tensors, items = batch rows, over HTTP or gRPC), and
//! [`realtime::RealtimeBackend`] (realtime sessions over WebSocket, audio paced at real time), and
//! [`fleet::FleetBackend`] (several targets behind one backend, routed client-side), and
//! [`audio::AudioBackend`] (speech recognition and synthesis).

pub mod audio;
pub mod discovery;
pub mod fleet;
pub mod openai;
mod post;
pub mod realtime;
pub mod sse;
pub mod template;
pub mod v2;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};

use goodput_protocol::ChatMessage;
use http::HeaderName;

use crate::record::Exchange;

/// What to send: produced by a workload, consumed by a backend.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestSpec {
    /// Position in the schedule (0-based).
    pub index: u64,
    /// The prompt.
    pub input: RequestInput,
    /// Prompt tokens the workload counted, if it did.
    pub expected_input_tokens: Option<u64>,
    /// `max_tokens` to ask for (None: the server's default).
    pub max_output_tokens: Option<u64>,
    /// Multi-turn: the turn index within its conversation.
    pub turn: Option<u32>,
    /// What the request carries besides its prompt: its correlation id and, in a model or
    /// adapter mix, the `model` to ask for.
    pub tags: RequestTags,
}

/// A request's correlation id and the model it asks for, when they are not the run's own.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestTags {
    /// The correlation id, sent as a request header ([`RequestIds`]).
    pub request_id: Option<RequestId>,
    /// The `model` field to send instead of the backend's (a model of a mix, or an adapter).
    pub model: Option<String>,
    /// The response header naming the replica that served the request (a fleet's
    /// `--replica-header`), noted into the exchange's `served_by`.
    pub replica_header: Option<HeaderName>,
    /// Image generation: the size and steps to ask for (`--image-size`, `--image-steps`).
    pub generation: Option<crate::record::Generation>,
}

/// A correlation id and the header that carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestId {
    /// The header (`x-request-id` by default).
    pub header: HeaderName,
    /// The id: the run's token, the step and the request's index (`<run>-<step>-<index>`).
    pub value: String,
}

/// How a run names its requests: every request carries `<run>-<step>-<index>` in `header`,
/// unique within the run (a sweep's steps number their requests from 0 each).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestIds {
    /// The header.
    pub header: HeaderName,
    /// The run's token, the ids' common prefix.
    pub run: String,
}

impl RequestIds {
    /// Ids in `header` under a fresh run token: 12 hex digits from the wall clock and the
    /// process id, so two runs (or two shards of one) do not share ids.
    pub fn fresh(header: HeaderName) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos() as u64);
        let mut token = nanos ^ u64::from(std::process::id()).rotate_left(40);
        token = (token ^ (token >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        token = (token ^ (token >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        token ^= token >> 31;
        RequestIds {
            header,
            run: format!("{:012x}", token & 0xffff_ffff_ffff),
        }
    }

    /// The id of request `index` of step `step`.
    pub fn id(&self, step: u32, index: u64) -> RequestId {
        RequestId {
            header: self.header.clone(),
            value: format!("{}-{step}-{index}", self.run),
        }
    }
}

impl RequestSpec {
    /// Items the request asks for: the number of prompts of a batch, else 1.
    pub fn items(&self) -> u32 {
        match &self.input {
            RequestInput::Batch(prompts) => u32::try_from(prompts.len()).unwrap_or(u32::MAX),
            RequestInput::Text(_) | RequestInput::Messages(_) => 1,
        }
    }
}

/// The prompt of a request.
#[derive(Debug, Clone, PartialEq)]
pub enum RequestInput {
    /// A single text prompt (sent as one user message on the chat API).
    Text(String),
    /// A whole conversation (chat API; flattened into one prompt on the completions API).
    Messages(Vec<ChatMessage>),
    /// Several prompts in one request (completions API list of prompts; one choice each).
    Batch(Vec<String>),
}

/// Counts signs of life from the target (bytes received, requests finished) so the runner's
/// no-progress watchdog can tell a slow server from a dead one. Lock-free; cheap to bump.
#[derive(Debug, Default)]
pub struct Activity(AtomicU64);

impl Activity {
    /// Notes that something was received.
    pub fn bump(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    /// The count so far.
    pub fn count(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A boxed, sendable future (keeps [`Backend`] object-safe).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Executes requests against a target.
///
/// Contract: `send` fills `exchange` as events happen (so a caller that drops the future on a
/// timeout keeps everything received so far), bumps `activity` whenever bytes arrive, sets
/// `exchange.failure` on any failure, and never panics on any server reply. It does not
/// retry, except to re-send a request that provably never reached the server (counted in
/// `exchange.retries`).
pub trait Backend: Send + Sync + fmt::Debug {
    /// Sends one request.
    fn send<'a>(
        &'a self,
        request: &'a RequestSpec,
        exchange: &'a mut Exchange,
        activity: &'a Activity,
    ) -> BoxFuture<'a, ()>;

    /// Whether a request's prompt is text whose tokens mean something. `false` (numeric
    /// tensors, `--api v2`): its record carries no input tokens — neither the workload's
    /// count of the prompt it built nor a tokenizer's, only a count the server reports.
    fn text_input(&self) -> bool {
        true
    }

    /// Whether a request asks for its output length (`max_tokens`). `false` (the audio APIs):
    /// its record carries no requested output tokens.
    fn asks_output_length(&self) -> bool {
        true
    }
}
