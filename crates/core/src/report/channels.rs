//! `steps[].reasoning`, `tool_calls`, `sessions` and `prefix_reuse`: the output channels and
//! multi-turn sessions. Filled by [`crate::metrics::channels`] and [`crate::metrics::sessions`].

use serde::{Deserialize, Serialize};

use super::{CountStats, LatencyStats};

/// The reasoning channel of a step's completed measured requests.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ReasoningReport {
    /// Completed requests whose answer had reasoning tokens.
    pub requests_with_reasoning: u64,
    /// Of them, those whose count came from the server's usage (the rest: from the deltas).
    pub reasoning_from_usage: u64,
    /// Reasoning tokens of completed requests.
    pub reasoning_tokens_total: u64,
    /// Answer tokens (output tokens that are not reasoning, tool calls included).
    pub answer_tokens_total: u64,
    /// Reasoning tokens per request (completed requests with reasoning).
    pub reasoning_tokens_per_request: CountStats,
    /// Answer tokens per request (every completed request).
    pub answer_tokens_per_request: CountStats,
    /// The step's output tokens/s times the reasoning share of its output tokens.
    pub reasoning_tokens_per_sec: f64,
    /// The step's output tokens/s times the answer share of its output tokens.
    pub answer_tokens_per_sec: f64,
    /// Time to first answer token (answer text or tool call), from the scheduled send.
    pub time_to_first_answer_ms: LatencyStats,
    /// Time to first answer token from the actual send.
    pub time_to_first_answer_from_send_ms: LatencyStats,
    /// Thinking time: first answer token − first token.
    pub thinking_ms: LatencyStats,
    /// Completed requests with reasoning and no answer at all (no text, no tool call).
    pub empty_answers: u64,
    /// Completed requests cut at `max_tokens` after reasoning that used half the budget or more.
    pub truncated_answers: u64,
}

/// Tool calls of a step's completed measured requests.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ToolCallReport {
    /// Completed requests that made at least one tool call.
    pub requests_with_tool_calls: u64,
    /// Completed requests whose answer ended in a tool call.
    pub ended_in_tool_call: u64,
    /// Completed requests whose answer ended in text.
    pub ended_in_text: u64,
    /// Tool calls made.
    pub tool_calls: u64,
    /// Tokens of the tool calls (function names and arguments).
    pub tool_call_tokens_total: u64,
    /// Time to the first tool-call delta, from the scheduled send.
    pub time_to_first_tool_call_ms: LatencyStats,
}

/// Sessions of a step's measured requests.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SessionReport {
    /// Sessions with at least one measured turn.
    pub sessions: u64,
    /// Sessions whose every measured turn succeeded.
    pub sessions_without_failure: u64,
    /// Measured turns (requests).
    pub turns: u64,
    /// Of them, turns that fed a tool result back.
    pub tool_result_turns: u64,
    /// Per session: first measured turn's scheduled send to its last measured turn's end.
    pub session_duration_ms: LatencyStats,
    /// Measured turns per session.
    pub turns_per_session: CountStats,
    /// Per session: the prompt tokens of its last measured turn (the context it grew to).
    pub final_context_tokens: CountStats,
}

/// Prompt tokens the workload expected to be reusable next to what the server reported.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct PrefixReuseReport {
    /// Completed measured requests whose workload counted its prompt.
    pub requests: u64,
    /// Their prompt tokens as the workload counted them.
    pub expected_input_tokens_total: u64,
    /// Of them, the history or shared system prompt sent before (re-sent tokens).
    pub expected_shareable_tokens_total: u64,
    /// `expected_shareable_tokens_total ÷ expected_input_tokens_total`.
    pub expected_shareable_fraction: Option<f64>,
    /// Completed measured requests whose usage reported cached prompt tokens.
    pub requests_reporting_cached: u64,
    /// Their prompt tokens (server count).
    pub reported_input_tokens_total: u64,
    /// Their cached prompt tokens (`usage.prompt_tokens_details.cached_tokens`).
    pub cached_tokens_total: u64,
    /// `cached_tokens_total ÷ reported_input_tokens_total`.
    pub cached_fraction: Option<f64>,
}
