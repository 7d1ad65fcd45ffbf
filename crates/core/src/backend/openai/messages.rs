//! The Anthropic Messages API (`/v1/messages`): the request body (`system` apart from the
//! `messages`, `max_tokens` required), streamed typed events (`message_start`,
//! `content_block_start`, `content_block_delta` with `text_delta`, `thinking_delta` or
//! `input_json_delta`, `content_block_stop`, `message_delta`, `message_stop`, `ping`, `error`)
//! and whole `message` objects, read into the same [`Exchange`] as chat answers.
//!
//! Usage: `input_tokens` counts only the uncached prompt, so the chat-style prompt count is
//! `input_tokens + cache_creation_input_tokens + cache_read_input_tokens`, of which
//! `cache_read_input_tokens` are cached. `message_start` carries the prompt's usage,
//! `message_delta` the cumulative `output_tokens` (and, on newer servers, the prompt's again).
//! Thinking blocks count as reasoning. Unknown event, block and delta types are skipped, as the
//! API's versioning policy asks of clients (new ones may be added); unparseable events and
//! `error` events fail the request with the server's message.

use goodput_protocol::usage::PromptTokensDetails;
use goodput_protocol::{ChatMessage, Usage};
use serde_json::{Map, Value, json};
use tokio::time::Instant;

use super::responses::Next;
use crate::backend::RequestInput;
use crate::record::{Exchange, Failure, OutcomeKind, OutputParts};

/// The `anthropic-version` header sent unless the user gives one.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Inserts `system` and `messages` for `input` into `body`.
pub(super) fn insert_input(
    body: &mut Map<String, Value>,
    input: &RequestInput,
) -> Result<(), Failure> {
    match input {
        RequestInput::Text(text) => {
            body.insert(
                "messages".into(),
                json!([{"role": "user", "content": text}]),
            );
        }
        RequestInput::Messages(messages) => {
            let (system, messages) = split_system(messages);
            if !system.is_empty() {
                body.insert("system".into(), Value::String(system));
            }
            body.insert("messages".into(), Value::Array(messages));
        }
        RequestInput::Batch(_) => {
            return Err(Failure::new(
                OutcomeKind::Invalid,
                "a batch of prompts needs the completions API; the Messages API takes one conversation",
            ));
        }
    }
    Ok(())
}

/// The system prompt (system messages joined) and the other messages as Messages-API turns;
/// a `tool` message becomes a user turn carrying a `tool_result` block.
fn split_system(messages: &[ChatMessage]) -> (String, Vec<Value>) {
    let mut system = Vec::new();
    let mut turns = Vec::new();
    for message in messages {
        let text = message.content.text();
        match message.role.as_str() {
            "system" | "developer" => system.push(text),
            "tool" => turns.push(json!({
                "role": "user",
                "content": [{
                    "type": "tool_result",
                    "tool_use_id": message.tool_call_id.clone().unwrap_or_default(),
                    "content": text,
                }],
            })),
            role => {
                let mut blocks = Vec::new();
                if !text.is_empty() {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for call in message.tool_calls.iter().flatten() {
                    let input: Value = serde_json::from_str(&call.function.arguments)
                        .unwrap_or_else(|_| json!({}));
                    blocks.push(json!({
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.function.name,
                        "input": input,
                    }));
                }
                turns.push(json!({"role": role, "content": blocks}));
            }
        }
    }
    (system.join("\n\n"), turns)
}

/// Which part of the output a block's text is.
enum Channel {
    Answer,
    Reasoning,
    /// A tool call's name or arguments; `true` when it opens the call.
    Tool(bool),
}

/// The output an event carries, if any: a block's opening text or a delta.
fn output(event: &Value) -> Option<(Channel, &str)> {
    match event["type"].as_str()? {
        "content_block_start" => {
            let block = &event["content_block"];
            match block["type"].as_str()? {
                "text" => Some((Channel::Answer, text(block, "text"))),
                "thinking" => Some((Channel::Reasoning, text(block, "thinking"))),
                "tool_use" => Some((Channel::Tool(true), text(block, "name"))),
                _ => None,
            }
        }
        "content_block_delta" => {
            let delta = &event["delta"];
            match delta["type"].as_str()? {
                "text_delta" => Some((Channel::Answer, text(delta, "text"))),
                "thinking_delta" => Some((Channel::Reasoning, text(delta, "thinking"))),
                "input_json_delta" => Some((Channel::Tool(false), text(delta, "partial_json"))),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The string at `key` of `value` (empty when absent).
fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value[key].as_str().unwrap_or("")
}

/// Reads one streamed event's JSON payload, arrived at `now`, into `exchange`.
pub(super) fn on_event(data: &str, now: Instant, exchange: &mut Exchange) -> Result<Next, Failure> {
    let event: Value = serde_json::from_str(data).map_err(|error| {
        Failure::new(
            OutcomeKind::Protocol,
            format!("invalid JSON in a Messages event: {error}"),
        )
    })?;
    match event["type"].as_str() {
        Some("message_start") => {
            let message = &event["message"];
            if let Some(id) = message["id"].as_str().filter(|id| !id.is_empty()) {
                exchange.response_id = Some(id.to_string());
            }
            merge_usage(&message["usage"], exchange);
        }
        Some("content_block_start" | "content_block_delta") => push_output(&event, now, exchange),
        Some("message_delta") => {
            merge_usage(&event["usage"], exchange);
            if let Some(reason) = event.pointer("/delta/stop_reason").and_then(Value::as_str) {
                exchange.finish_reason = Some(finish_reason(reason).to_string());
            }
        }
        Some("message_stop") => return Ok(Next::Done),
        Some("error") => {
            return Err(Failure::new(
                OutcomeKind::StreamError,
                format!(
                    "server error in stream: {}",
                    super::reply::error_text(&event)
                ),
            ));
        }
        Some(_) => {}
        None => {
            return Err(Failure::new(
                OutcomeKind::Protocol,
                format!(
                    "a Messages event without a `type`: {}",
                    data.chars().take(200).collect::<String>()
                ),
            ));
        }
    }
    Ok(Next::More)
}

/// Records the output of a block's start or delta (nothing for unknown block types).
fn push_output(event: &Value, now: Instant, exchange: &mut Exchange) {
    let Some((channel, text)) = output(event) else {
        return;
    };
    let index = event["index"]
        .as_u64()
        .and_then(|index| u32::try_from(index).ok())
        .unwrap_or(0);
    let call;
    let mut parts = OutputParts::default();
    match channel {
        Channel::Answer => parts.answer = text,
        Channel::Reasoning => parts.reasoning = text,
        Channel::Tool(opens) => {
            call = [(index, opens)];
            parts.tool = text;
            parts.tool_calls = &call;
        }
    }
    if !(parts.answer.is_empty() && parts.reasoning.is_empty() && parts.tool_calls.is_empty()) {
        exchange.choices = exchange.choices.max(1);
        exchange.push_parts(now, 0, parts, None);
    }
}

/// The chat finish reason of an Anthropic `stop_reason`.
fn finish_reason(reason: &str) -> &str {
    match reason {
        "end_turn" | "stop_sequence" => "stop",
        "max_tokens" => "length",
        "tool_use" => "tool_calls",
        other => other,
    }
}

/// Merges a Messages `usage` object into the exchange's usage: counts it carries replace
/// those known, counts it omits are kept (a `message_delta` may carry only `output_tokens`).
fn merge_usage(value: &Value, exchange: &mut Exchange) {
    if !value.is_object() {
        return;
    }
    let count = |key: &str| value.get(key).and_then(Value::as_u64);
    let known = exchange.usage.take();
    let cached_before = known
        .as_ref()
        .and_then(|usage| usage.prompt_tokens_details.as_ref())
        .map(|details| details.cached_tokens);
    let prompt_parts = [
        count("input_tokens"),
        count("cache_creation_input_tokens"),
        count("cache_read_input_tokens"),
    ];
    let prompt = if prompt_parts.iter().any(Option::is_some) {
        prompt_parts.iter().flatten().sum()
    } else {
        known.as_ref().map_or(0, |usage| usage.prompt_tokens)
    };
    let output = count("output_tokens")
        .or_else(|| known.as_ref().map(|usage| usage.completion_tokens))
        .unwrap_or(0);
    let mut usage = Usage::new(prompt, output);
    let cached = if prompt_parts.iter().any(Option::is_some) {
        prompt_parts[2]
    } else {
        cached_before
    };
    usage.prompt_tokens_details = cached.map(|cached_tokens| PromptTokensDetails { cached_tokens });
    exchange.usage = Some(usage);
}

/// A whole (non-streamed) `message` object that arrived at `now`.
pub(super) fn record_whole(
    bytes: &[u8],
    now: Instant,
    exchange: &mut Exchange,
) -> Result<(), Failure> {
    let message: Value = serde_json::from_slice(bytes).map_err(|error| {
        Failure::new(
            OutcomeKind::Protocol,
            format!("invalid JSON response body: {error}"),
        )
    })?;
    if message["type"].as_str() == Some("error") {
        return Err(Failure::new(
            OutcomeKind::StreamError,
            format!("server error: {}", super::reply::error_text(&message)),
        ));
    }
    let Some(content) = message.get("content").and_then(Value::as_array) else {
        return Err(Failure::new(
            OutcomeKind::Protocol,
            "Messages response has no `content`",
        ));
    };
    let (mut reasoning, mut answer, mut tool) = (String::new(), String::new(), String::new());
    let mut calls = Vec::new();
    for (index, block) in content.iter().enumerate() {
        match block["type"].as_str() {
            Some("text") => answer.push_str(block["text"].as_str().unwrap_or("")),
            Some("thinking") => reasoning.push_str(block["thinking"].as_str().unwrap_or("")),
            Some("tool_use") => {
                tool.push_str(block["name"].as_str().unwrap_or(""));
                tool.push_str(&block["input"].to_string());
                calls.push((u32::try_from(index).unwrap_or(u32::MAX), true));
            }
            _ => {}
        }
    }
    if let Some(id) = message["id"].as_str().filter(|id| !id.is_empty()) {
        exchange.response_id = Some(id.to_string());
    }
    merge_usage(&message["usage"], exchange);
    exchange.choices = 1;
    let parts = OutputParts {
        reasoning: &reasoning,
        answer: &answer,
        tool: &tool,
        tool_calls: &calls,
    };
    let tokens = exchange.usage.as_ref().map(|usage| usage.completion_tokens);
    exchange.push_parts(now, 0, parts, tokens);
    let reason = message["stop_reason"].as_str().unwrap_or("stop");
    exchange.finish_reason = Some(finish_reason(reason).to_string());
    Ok(())
}
