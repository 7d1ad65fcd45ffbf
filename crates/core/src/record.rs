//! What one request did. [`Exchange`] is filled by a backend while the request runs;
//! [`RequestRecord`] is the finished, self-contained account the runner appends to the journal
//! and every metric is computed from (so a report rebuilt from the journal is identical).

use std::fmt;
use std::time::Duration;

use goodput_protocol::Usage;
use goodput_protocol::stream::ServerTimings;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeKind {
    /// Completed: a 2xx response whose stream (if any) ended properly.
    Ok,
    /// The server answered with a non-2xx status.
    Http,
    /// The request hit its timeout (`--request-timeout`) or the run's no-progress deadline.
    Timeout,
    /// Connecting, sending or receiving failed (refused, reset, DNS, TLS, closed early).
    Transport,
    /// The server's reply could not be understood (bad SSE, bad JSON, oversized line).
    Protocol,
    /// The server sent an error object inside a 2xx stream.
    StreamError,
    /// The run was stopped (Ctrl-C, deadline) while the request was in flight or queued.
    Cancelled,
    /// goodput could not build the request (e.g. a batch of prompts on the chat API); nothing
    /// was sent.
    Invalid,
    /// An in-process call ([`crate::measure`]) raised an exception or returned an error.
    Error,
}

impl OutcomeKind {
    /// Every kind, in report order.
    pub const ALL: [OutcomeKind; 9] = [
        OutcomeKind::Ok,
        OutcomeKind::Http,
        OutcomeKind::Timeout,
        OutcomeKind::Transport,
        OutcomeKind::Protocol,
        OutcomeKind::StreamError,
        OutcomeKind::Cancelled,
        OutcomeKind::Invalid,
        OutcomeKind::Error,
    ];

    /// The snake_case name used in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeKind::Ok => "ok",
            OutcomeKind::Http => "http",
            OutcomeKind::Timeout => "timeout",
            OutcomeKind::Transport => "transport",
            OutcomeKind::Protocol => "protocol",
            OutcomeKind::StreamError => "stream_error",
            OutcomeKind::Cancelled => "cancelled",
            OutcomeKind::Invalid => "invalid",
            OutcomeKind::Error => "error",
        }
    }
}

impl fmt::Display for OutcomeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a request failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// Failure class.
    pub kind: OutcomeKind,
    /// HTTP status, for [`OutcomeKind::Http`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// What happened, for people (never contains credentials).
    pub message: String,
}

impl Failure {
    /// A failure of `kind` with a message.
    pub fn new(kind: OutcomeKind, message: impl Into<String>) -> Self {
        Failure {
            kind,
            status: None,
            message: message.into(),
        }
    }

    /// An HTTP status failure.
    pub fn http(status: u16, message: impl Into<String>) -> Self {
        Failure {
            kind: OutcomeKind::Http,
            status: Some(status),
            message: message.into(),
        }
    }
}

/// One streamed chunk that carried generated output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkArrival {
    /// When the chunk's last byte was decoded.
    pub at: Instant,
    /// Bytes of generated text it carried (its slice of [`Exchange::text`]).
    pub text_bytes: u32,
    /// Cumulative `usage.completion_tokens` sent with the chunk (continuous usage), if any.
    pub cumulative_tokens: Option<u64>,
}

/// Response headers worth keeping (lower-case names).
pub const KEPT_HEADERS: [&str; 6] = [
    "server",
    "x-request-id",
    "retry-after",
    "date",
    "x-ratelimit-remaining-requests",
    "via",
];

/// Longest generated text kept per request (longer answers are counted, not stored).
pub const MAX_KEPT_TEXT: usize = 1 << 20;

/// The in-progress account of one request, written by a backend as events happen.
#[derive(Debug, Clone, Default)]
pub struct Exchange {
    /// When the request was handed to a connection (after pooling/connecting).
    pub sent_at: Option<Instant>,
    /// When the response status and headers arrived.
    pub response_at: Option<Instant>,
    /// HTTP status.
    pub status: Option<u16>,
    /// Kept response headers ([`KEPT_HEADERS`]).
    pub headers: Vec<(String, String)>,
    /// When the first SSE event (of any kind, role-only included) arrived.
    pub first_event_at: Option<Instant>,
    /// Chunks that carried generated output, in arrival order.
    pub chunks: Vec<ChunkArrival>,
    /// Generated text (up to [`MAX_KEPT_TEXT`] bytes).
    pub text: String,
    /// Bytes of generated text received, kept or not.
    pub text_bytes: u64,
    /// Number of choices (items) in the response; 1 unless a batch of prompts was sent.
    pub choices: u32,
    /// Final usage reported by the server.
    pub usage: Option<Usage>,
    /// `finish_reason` of the last choice that reported one.
    pub finish_reason: Option<String>,
    /// llama.cpp server-side timings.
    pub server_timings: Option<ServerTimings>,
    /// Set when the request failed; `None` means it completed.
    pub failure: Option<Failure>,
    /// Times the request was re-sent because it provably never reached the server.
    pub retries: u32,
    /// Whether a pooled (kept-alive) connection carried the request.
    pub reused_connection: bool,
    /// Time to establish a new connection (TCP, and TLS when used), if one was made.
    pub connect_time: Option<Duration>,
    /// The output is not text (an in-process call, [`crate::measure`]): token counts come only
    /// from `usage`, never from goodput's tokenizer.
    pub untokenized: bool,
}

impl Exchange {
    /// Records a chunk that carried `text` (and optional cumulative usage) at `at`.
    pub fn push_output(&mut self, at: Instant, text: &str, cumulative_tokens: Option<u64>) {
        let bytes = u32::try_from(text.len()).unwrap_or(u32::MAX);
        self.text_bytes += text.len() as u64;
        if self.text.len() + text.len() <= MAX_KEPT_TEXT {
            self.text.push_str(text);
        }
        self.chunks.push(ChunkArrival {
            at,
            text_bytes: bytes,
            cumulative_tokens,
        });
    }

    /// Marks the request failed unless an earlier failure is already recorded.
    pub fn fail(&mut self, failure: Failure) {
        if self.failure.is_none() {
            self.failure = Some(failure);
        }
    }
}

/// Whether a request counts in the measurement or was part of the warmup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Discarded from metrics.
    Warmup,
    /// Counted.
    Measure,
}

/// Where a token count came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// The server's `usage`.
    Usage,
    /// goodput's tokenizer over the text.
    Tokenizer,
    /// The workload's own count of the prompt it built.
    Workload,
    /// Not known.
    None,
}

/// The finished account of one request: one line of `requests.jsonl`.
///
/// Times are microseconds since the run's start instant (`*_us`); `None` when the event never
/// happened. Latencies are derived from these, never stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    /// Position in the schedule (0-based).
    pub index: u64,
    /// Warmup or measured.
    pub phase: Phase,
    /// When the schedule said to send it.
    pub scheduled_us: u64,
    /// When it left the client-side concurrency queue (= scheduled without `--max-concurrency`).
    pub dequeued_us: u64,
    /// When it was handed to a connection.
    pub sent_us: Option<u64>,
    /// When the response headers arrived.
    pub response_us: Option<u64>,
    /// When the first chunk carrying generated output arrived (non-streaming: the body end).
    pub first_token_us: Option<u64>,
    /// When the last chunk carrying generated output arrived.
    pub last_token_us: Option<u64>,
    /// When the request ended (stream closed, failure, or cancellation).
    pub end_us: u64,
    /// Whether the response was streamed.
    pub streamed: bool,
    /// Prompt tokens.
    pub input_tokens: Option<u64>,
    /// Where `input_tokens` came from.
    pub input_tokens_source: TokenSource,
    /// Prompt tokens the workload intended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_input_tokens: Option<u64>,
    /// Generated tokens.
    pub output_tokens: u64,
    /// Where `output_tokens` came from.
    pub output_tokens_source: TokenSource,
    /// `max_tokens` asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_output_tokens: Option<u64>,
    /// Generated tokens counted by goodput's tokenizer (to check the server's usage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer_output_tokens: Option<u64>,
    /// Output-carrying chunks as `[time_us, tokens]` pairs.
    pub chunks: Vec<[u64; 2]>,
    /// Items (choices) in the response: 1, or the batch size for a list of prompts.
    pub items: u32,
    /// HTTP status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// `None` when the request succeeded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<Failure>,
    /// Why generation stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish_reason: Option<String>,
    /// Re-sends of a request that provably never reached the server.
    #[serde(default)]
    pub retries: u32,
    /// Kept response headers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, String)>,
    /// llama.cpp server-side timings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_timings: Option<ServerTimings>,
    /// Multi-turn: the turn index within its conversation (0 = first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// The step (load level) of a multi-step run — sweep or capacity probe — it belongs to.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub step: u32,
    /// Multi-turn: the session (conversation) the request belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<u64>,
}

fn is_zero(value: &u32) -> bool {
    *value == 0
}

impl RequestRecord {
    /// How the request ended.
    pub fn outcome(&self) -> OutcomeKind {
        self.failure.as_ref().map_or(OutcomeKind::Ok, |f| f.kind)
    }

    /// Whether the request completed successfully.
    pub fn is_ok(&self) -> bool {
        self.failure.is_none()
    }
}

/// Latencies derived from a record: the single definition every metric uses
/// (see `docs/metrics.md`).
impl RequestRecord {
    /// TTFT from the scheduled send time: `first_token − scheduled`.
    pub fn ttft(&self) -> Option<Duration> {
        self.first_token_us
            .map(|t| micros(t.saturating_sub(self.scheduled_us)))
    }

    /// TTFT from the actual send: `first_token − sent`.
    pub fn ttft_from_send(&self) -> Option<Duration> {
        Some(micros(self.first_token_us?.saturating_sub(self.sent_us?)))
    }

    /// E2E from the scheduled send time to the last generated output: `last_token − scheduled`.
    pub fn e2e(&self) -> Option<Duration> {
        self.last_token_us
            .map(|t| micros(t.saturating_sub(self.scheduled_us)))
    }

    /// E2E from the actual send: `last_token − sent`.
    pub fn e2e_from_send(&self) -> Option<Duration> {
        Some(micros(self.last_token_us?.saturating_sub(self.sent_us?)))
    }

    /// TPOT: `(last_token − first_token) / (output_tokens − 1)`; needs two or more tokens.
    pub fn tpot(&self) -> Option<Duration> {
        let (first, last) = (self.first_token_us?, self.last_token_us?);
        (self.output_tokens >= 2)
            .then(|| micros(last.saturating_sub(first)) / tokens_u32(self.output_tokens - 1))
    }

    /// Dispatch lag: `sent − scheduled` (includes any client-side queueing).
    pub fn dispatch_lag(&self) -> Option<Duration> {
        self.sent_us
            .map(|t| micros(t.saturating_sub(self.scheduled_us)))
    }

    /// Time spent in the client-side concurrency queue: `dequeued − scheduled`.
    pub fn client_queue_wait(&self) -> Duration {
        micros(self.dequeued_us.saturating_sub(self.scheduled_us))
    }

    /// Per-token inter-token latencies: for every output chunk after the first, the gap since
    /// the previous chunk split evenly over the chunk's `k` tokens, as `(gap / k, k)`.
    pub fn itl_samples(&self) -> impl Iterator<Item = (Duration, u64)> + '_ {
        self.chunks
            .windows(2)
            .filter(|pair| pair[1][1] > 0)
            .map(|pair| {
                let gap = micros(pair[1][0].saturating_sub(pair[0][0]));
                (gap / tokens_u32(pair[1][1]), pair[1][1])
            })
    }
}

fn micros(us: u64) -> Duration {
    Duration::from_micros(us)
}

fn tokens_u32(tokens: u64) -> u32 {
    u32::try_from(tokens.max(1)).unwrap_or(u32::MAX)
}
