//! The backend seam: anything that can execute one [`RequestSpec`] and report what happened
//! into an [`Exchange`]. The runner owns timing of the schedule, timeouts and cancellation; a
//! backend owns the wire. Today: [`openai::OpenAiBackend`] (chat, completions and Responses,
//! streamed or not; embeddings and rerank, items counted) and the closure backend of
//! [`crate::measure`] (any async call timed in-process), and [`template::TemplateBackend`]
//! (any JSON API from a body template, items counted by a JSONPath), and [`v2::V2Backend`]
//! (KServe v2 / Open Inference Protocol tensors, items = batch rows).

pub mod discovery;
pub mod openai;
mod post;
pub mod sse;
pub mod template;
pub mod v2;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};

use goodput_protocol::ChatMessage;

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
}
