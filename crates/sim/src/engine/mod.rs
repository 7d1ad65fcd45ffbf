//! The engine abstraction: a discrete-event model of an inference server that turns submitted
//! requests into timed token events. Engines know nothing of HTTP or wall-clock time; the caller
//! owns the clock (real time in [`crate::driver`], virtual time in [`crate::virtual_time`]).
//!
//! Protocol for callers: time never goes backwards; call [`Engine::advance`] up to `now` before
//! [`Engine::submit`] or [`Engine::cancel`] at `now`; after any call, [`Engine::next_event_at`]
//! says when the engine next needs to be advanced.

pub mod adapters;
pub mod batching;
pub mod cost;
pub mod disaggregated;
pub mod fixed;
pub mod kv;
pub mod replicas;
pub mod speculative;

use std::time::Duration;

/// Instant on the simulation clock: time since the simulation started.
pub type SimTime = Duration;

/// Identifies one request (one sequence) inside an engine.
pub type RequestId = u64;

/// What the engine is asked to generate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineRequest {
    /// Caller-chosen unique id.
    pub id: RequestId,
    /// Prompt length in tokens (after any chat template).
    pub prompt_tokens: u32,
    /// Hash of every *full* block of the prompt, each chained on its predecessor, for prefix
    /// caching. May be empty (no reuse possible).
    pub block_hashes: Vec<u64>,
    /// Upper bound on generated tokens (`max_tokens`).
    pub max_output_tokens: u32,
    /// Tokens generated before the model would emit end-of-sequence. Equal to
    /// `max_output_tokens` when EOS is ignored.
    pub stop_after_tokens: u32,
}

impl EngineRequest {
    /// Tokens this request will generate: `min(max_output_tokens, stop_after_tokens)`, at least 1.
    pub fn output_tokens(&self) -> u32 {
        self.max_output_tokens.min(self.stop_after_tokens).max(1)
    }

    /// Why generation ends once [`EngineRequest::output_tokens`] are generated.
    pub fn finish_reason(&self) -> FinishReason {
        if self.stop_after_tokens < self.max_output_tokens {
            FinishReason::Stop
        } else {
            FinishReason::Length
        }
    }
}

/// Why a request stopped generating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishReason {
    /// The model emitted end-of-sequence.
    Stop,
    /// `max_tokens` reached.
    Length,
}

impl FinishReason {
    /// The OpenAI wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
        }
    }
}

/// Something that happened inside the engine at a simulated instant.
#[derive(Debug, Clone, PartialEq)]
pub enum EngineEvent {
    /// The request left the waiting queue for the first time (its queueing delay ends).
    Scheduled {
        /// Request.
        id: RequestId,
        /// When.
        at: SimTime,
        /// Prompt tokens served from the prefix cache at this admission.
        cached_tokens: u32,
    },
    /// The request produced `count` tokens at once (more than one with speculative decoding
    /// or multi-token chunks).
    Tokens {
        /// Request.
        id: RequestId,
        /// When the tokens became available.
        at: SimTime,
        /// Tokens produced.
        count: u32,
        /// Set when these were the request's last tokens.
        finished: Option<FinishReason>,
    },
    /// The request lost its KV cache and went back to the waiting queue (recompute).
    Preempted {
        /// Request.
        id: RequestId,
        /// When.
        at: SimTime,
    },
    /// The request was dropped by the engine and will produce nothing more.
    Aborted {
        /// Request.
        id: RequestId,
        /// When.
        at: SimTime,
        /// Why.
        reason: String,
    },
    /// One forward step finished.
    Step(StepSummary),
}

/// What one forward step did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepSummary {
    /// When the step started.
    pub started: SimTime,
    /// How long it took.
    pub duration: Duration,
    /// Sequences in the batch.
    pub sequences: u32,
    /// Tokens computed (prefill chunks plus decode tokens, drafts included).
    pub batched_tokens: u32,
    /// Of those, prefill tokens.
    pub prefill_tokens: u32,
}

/// Why a request was refused at submission.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Rejection {
    /// The waiting queue is full (HTTP 429).
    #[error("the waiting queue is full ({waiting} requests); retry later")]
    QueueFull {
        /// Requests already waiting.
        waiting: usize,
        /// Suggested wait before retrying.
        retry_after: Duration,
    },
    /// The request can never fit (HTTP 400).
    #[error("{0}")]
    TooLong(String),
    /// The request asked for nothing the engine can do (HTTP 400).
    #[error("{0}")]
    Invalid(String),
}

/// A point-in-time view of engine state and cumulative counters (for `/metrics`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EngineStats {
    /// Requests being computed.
    pub running: usize,
    /// Requests waiting for admission.
    pub waiting: usize,
    /// KV blocks in use ÷ KV blocks in total (0 for engines without a KV model).
    pub kv_usage: f64,
    /// KV blocks in total.
    pub kv_blocks_total: u64,
    /// Tokens per KV block.
    pub block_size: u32,
    /// Preemptions so far.
    pub preemptions_total: u64,
    /// Prompt tokens looked up in the prefix cache so far.
    pub prefix_queries_tokens: u64,
    /// Of those, tokens found.
    pub prefix_hits_tokens: u64,
    /// Speculative decoding counters.
    pub speculative: SpeculativeStats,
}

/// Cumulative speculative-decoding counters (vLLM `spec_decode_*` semantics).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpeculativeStats {
    /// Verification steps that carried draft tokens (one per sequence and step).
    pub drafts: u64,
    /// Draft tokens proposed.
    pub draft_tokens: u64,
    /// Draft tokens accepted.
    pub accepted_tokens: u64,
    /// Accepted drafts by position (index 0 = first draft token).
    pub accepted_per_position: Vec<u64>,
}

/// `request` with its first token already generated: one token fewer to go, the same finish.
pub fn one_token_fewer(request: EngineRequest) -> EngineRequest {
    EngineRequest {
        max_output_tokens: request.max_output_tokens.saturating_sub(1).max(1),
        stop_after_tokens: request.stop_after_tokens.saturating_sub(1).max(1),
        ..request
    }
}

/// A simulated inference engine.
pub trait Engine: Send + std::fmt::Debug {
    /// Offers a request at `now`. Refused requests produce no events.
    fn submit(&mut self, now: SimTime, request: EngineRequest) -> Result<(), Rejection>;

    /// Offers a request whose prompt and first token were computed elsewhere and whose KV
    /// cache has arrived (a decode replica of a disaggregated fleet): the engine generates the
    /// remaining `output_tokens() − 1` tokens. An engine without a KV model of its own
    /// recomputes the prompt (this default) — what a decode instance does after losing the
    /// transferred cache.
    fn submit_prefilled(&mut self, now: SimTime, request: EngineRequest) -> Result<(), Rejection> {
        self.submit(now, one_token_fewer(request))
    }

    /// Forgets a request (client went away) at `now`, freeing what it holds.
    fn cancel(&mut self, now: SimTime, id: RequestId);

    /// When the engine next has something to do, if anything.
    fn next_event_at(&self) -> Option<SimTime>;

    /// Runs the engine up to and including `now`, appending what happened in time order.
    fn advance(&mut self, now: SimTime, events: &mut Vec<EngineEvent>);

    /// Current state and cumulative counters.
    fn stats(&self) -> EngineStats;

    /// Each replica's state and counters, in replica order (one engine: its own).
    fn replica_stats(&self) -> Vec<EngineStats> {
        vec![self.stats()]
    }

    /// The replica serving request `id` while it is in flight (`None`: one engine, or not
    /// in flight).
    fn replica_serving(&self, _id: RequestId) -> Option<usize> {
        None
    }
}
