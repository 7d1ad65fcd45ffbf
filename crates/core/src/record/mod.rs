//! What one request did. [`Exchange`] is filled by a backend while the request runs;
//! [`RequestRecord`] is the finished, self-contained account the runner appends to the journal
//! and every metric is computed from (so a report rebuilt from the journal is identical).

use std::time::Duration;

use goodput_protocol::Usage;
use goodput_protocol::stream::ServerTimings;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

pub mod audio;
mod chunk;
pub mod generation;
mod outcome;
pub mod resolution;
pub mod think;

pub use chunk::ChunkArrival;
pub use outcome::{Failure, OutcomeKind};

pub use self::generation::Generation;
pub use self::resolution::Resolution;
use self::think::ThinkTags;

/// What one chunk of one choice carried, split by channel.
#[derive(Debug, Clone, Copy, Default)]
pub struct OutputParts<'a> {
    /// Reasoning text (a `reasoning_content`/`reasoning` delta).
    pub reasoning: &'a str,
    /// Answer text (`content` or completion `text`; `<think>` blocks in it are reasoning).
    pub answer: &'a str,
    /// Tool-call text: function names and argument pieces.
    pub tool: &'a str,
    /// Tool-call deltas as `(index, has_id)`.
    pub tool_calls: &'a [(u32, bool)],
}

/// Header names whose value is a secret (never recorded, in the manifest or a request record).
pub const SECRET_HEADERS: [&str; 5] = [
    "authorization",
    "proxy-authorization",
    "cookie",
    "x-api-key",
    "api-key",
];

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
    /// The longest the answer's bytes waited in the socket before the client read them
    /// (kernel receive timestamps; `None` without them).
    pub read_late: Option<Duration>,
    /// Time to establish a new connection (TCP, and TLS when used), if one was made.
    pub connect_time: Option<Duration>,
    /// Tool-call text received (function names and arguments, up to [`MAX_KEPT_TEXT`] bytes).
    pub tool_text: String,
    /// Bytes of tool-call text received, kept or not.
    pub tool_text_bytes: u64,
    /// Distinct tool calls seen (by choice and call index).
    pub tool_calls: Vec<(u32, u32)>,
    /// `<think>` tags in the answer text.
    pub think: ThinkTags,
    /// The output is not text (an in-process call, [`crate::measure`]): token counts come only
    /// from `usage`, never from goodput's tokenizer.
    pub untokenized: bool,
    /// The server's own id of the request: the response header named as the correlation id's.
    pub server_request_id: Option<String>,
    /// The `id` of the answer's body (an OpenAI completion's, the first streamed chunk's).
    pub response_id: Option<String>,
    /// A fleet's target the request was sent to ([`crate::backend::fleet`]).
    pub target: Option<String>,
    /// The replica that served it: the value of the response header a fleet names.
    pub served_by: Option<String>,
    /// The audio sent or produced ([`crate::backend::audio`]).
    pub audio: Option<audio::AudioRecord>,
}

impl Exchange {
    /// Records a chunk that carried answer `text` (and optional cumulative usage) at `at`.
    pub fn push_output(&mut self, at: Instant, text: &str, cumulative_tokens: Option<u64>) {
        let parts = OutputParts {
            answer: text,
            ..OutputParts::default()
        };
        self.push_parts(at, 0, parts, cumulative_tokens);
    }

    /// Records a chunk of choice `choice` that carried `parts` at `at`: reasoning first, then
    /// the answer (with any `<think>` block in it moved to the reasoning), then tool calls.
    pub fn push_parts(
        &mut self,
        at: Instant,
        choice: u32,
        parts: OutputParts<'_>,
        cumulative_tokens: Option<u64>,
    ) {
        let split = self.think.split(parts.answer);
        if split.closes_unopened {
            for chunk in &mut self.chunks {
                chunk.reasoning_bytes = chunk.text_bytes;
            }
        }
        let reasoning_bytes = parts.reasoning.len() + split.reasoning.len();
        for text in [parts.reasoning, &split.reasoning, &split.answer] {
            self.text_bytes += text.len() as u64;
            if self.text.len() + text.len() <= MAX_KEPT_TEXT {
                self.text.push_str(text);
            }
        }
        self.tool_text_bytes += parts.tool.len() as u64;
        if self.tool_text.len() + parts.tool.len() <= MAX_KEPT_TEXT {
            self.tool_text.push_str(parts.tool);
        }
        for &(index, _) in parts.tool_calls {
            if !self.tool_calls.contains(&(choice, index)) {
                self.tool_calls.push((choice, index));
            }
        }
        let bytes = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let chunk = ChunkArrival::new(at, bytes(reasoning_bytes + split.answer.len()))
            .with_cumulative(cumulative_tokens)
            .with_reasoning(bytes(reasoning_bytes))
            .with_tool(bytes(parts.tool.len()), !parts.tool_calls.is_empty());
        self.chunks.push(chunk);
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
    /// Reasoning (thinking) tokens among `output_tokens`; `None` when the answer showed no
    /// reasoning channel and the server reported none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// Where `reasoning_tokens` came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens_source: Option<ReasoningSource>,
    /// When the first chunk carrying answer output (answer text or a tool call, not
    /// reasoning) arrived; streamed requests only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_answer_us: Option<u64>,
    /// Distinct tool calls the answer made.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tool_calls: u32,
    /// When the first tool-call delta arrived; streamed requests only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_tool_call_us: Option<u64>,
    /// Tokens of the tool calls (names and arguments), apportioned from the chunks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_tokens: Option<u64>,
    /// The answer ended in a tool call (`finish_reason` `tool_calls`, or its last output was a
    /// tool-call delta) rather than in text.
    #[serde(default, skip_serializing_if = "is_false")]
    pub ended_in_tool_call: bool,
    /// Prompt tokens the server served from its prefix cache
    /// (`usage.prompt_tokens_details.cached_tokens`), when it reports them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
    /// Prompt tokens the workload expects the server could reuse — for a session's turn the
    /// history before its message (the shared system prompt for a first turn); for a
    /// single-turn `--shared-prefix` request its group's system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_prefix_tokens: Option<u64>,
    /// Agentic sessions: this turn fed a tool's result back.
    #[serde(default, skip_serializing_if = "is_false")]
    pub tool_result_turn: bool,
    /// The longest the answer's bytes waited, arrived but unread, while the client was busy
    /// elsewhere, µs of real time (kernel receive timestamps; absent without them). Chunk
    /// times are the arrivals either way; this is how far behind the client read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_late_us: Option<u64>,
    /// Vision prompts: the sizes (`WxH`) of the images the request carried, in order — a
    /// session's turn counts the history's images too, as it re-sends them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Resolution>,
    /// Image generation (`--image-size`, `--image-steps`): the size and steps it asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<Generation>,
    /// The correlation id goodput sent in the request id header (`--request-id-header`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// The server's own id: the value of the response header of the correlation id's name
    /// (which many servers echo), when it answered with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_request_id: Option<String>,
    /// The `id` field of the answer's body (`chatcmpl-…`), when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    /// Model mix (`--model a=70%,b=30%`): the model this request asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Adapter mix (`--lora`): the adapter this request asked for (`None`: the base model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adapter: Option<String>,
    /// SLO classes (`--class`): the class this request belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub class: Option<String>,
    /// Several targets (`--target` repeated): the one the request was sent to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// `--replica-header`: the replica that served the request, as the server's (or
    /// gateway's) response header named it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica: Option<String>,
    /// Audio APIs: seconds of audio sent (transcriptions) or produced (speech).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio: Option<audio::AudioRecord>,
}

/// Where a request's reasoning token count came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningSource {
    /// `usage.completion_tokens_details.reasoning_tokens`.
    Usage,
    /// The tokens of the chunks that carried reasoning (per-chunk attribution, §3).
    Deltas,
}

fn is_false(value: &bool) -> bool {
    !*value
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

    /// E2E per item: `e2e / items` (a batch's latency shared by its items).
    pub fn e2e_per_item(&self) -> Option<Duration> {
        self.e2e().map(|e2e| e2e / self.items.max(1))
    }

    /// TPOT: `(last_token − first_token) / (output_tokens − 1)`; needs two or more tokens.
    pub fn tpot(&self) -> Option<Duration> {
        let (first, last) = (self.first_token_us?, self.last_token_us?);
        (self.output_tokens >= 2)
            .then(|| micros(last.saturating_sub(first)) / tokens_u32(self.output_tokens - 1))
    }

    /// Time to first answer token from the scheduled send: `first_answer − scheduled`.
    pub fn ttfat(&self) -> Option<Duration> {
        self.first_answer_us
            .map(|t| micros(t.saturating_sub(self.scheduled_us)))
    }

    /// Time to first answer token from the actual send: `first_answer − sent`.
    pub fn ttfat_from_send(&self) -> Option<Duration> {
        Some(micros(self.first_answer_us?.saturating_sub(self.sent_us?)))
    }

    /// Time to the first tool-call delta from the scheduled send.
    pub fn time_to_first_tool_call(&self) -> Option<Duration> {
        self.first_tool_call_us
            .map(|t| micros(t.saturating_sub(self.scheduled_us)))
    }

    /// Thinking time: `first_answer − first_token` (zero without reasoning before the answer).
    pub fn thinking_time(&self) -> Option<Duration> {
        Some(micros(
            self.first_answer_us?.saturating_sub(self.first_token_us?),
        ))
    }

    /// Answer tokens: output tokens that are not reasoning (tool calls included).
    pub fn answer_tokens(&self) -> u64 {
        self.output_tokens
            .saturating_sub(self.reasoning_tokens.unwrap_or(0))
    }

    /// A successful answer whose reasoning left it empty: reasoning tokens, no answer token
    /// and no tool call.
    pub fn answer_empty_after_reasoning(&self) -> bool {
        self.is_ok()
            && self.reasoning_tokens.is_some_and(|r| r > 0)
            && self.answer_tokens() == 0
            && self.tool_calls == 0
    }

    /// A successful answer cut at the token limit (`finish_reason` `length`) after reasoning
    /// that used at least half of the budget (`max_tokens`, else the output): the thinking
    /// took what the answer needed.
    pub fn answer_truncated_after_reasoning(&self) -> bool {
        let budget = self.requested_output_tokens.unwrap_or(self.output_tokens);
        self.is_ok()
            && self
                .reasoning_tokens
                .is_some_and(|r| r > 0 && 2 * r >= budget)
            && self.finish_reason.as_deref() == Some("length")
            && !self.answer_empty_after_reasoning()
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
