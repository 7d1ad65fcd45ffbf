//! The OpenAI Responses API (`/v1/responses`): streamed typed events
//! (`response.output_text.delta`, `response.reasoning_text.delta`,
//! `response.function_call_arguments.delta`, `response.completed`, …) and whole `response`
//! objects, read into the same [`Exchange`] as chat answers. Usage (`input_tokens`,
//! `output_tokens`, their details) becomes the chat-style [`Usage`].

use goodput_protocol::Usage;
use goodput_protocol::usage::{CompletionTokensDetails, PromptTokensDetails};
use serde::Deserialize;
use serde_json::Value;
use tokio::time::Instant;

use crate::record::{Exchange, Failure, OutcomeKind, OutputParts};

/// Whether the stream goes on after an event.
pub(super) enum Next {
    More,
    Done,
}

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(default, borrow)]
    delta: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    output_index: Option<u32>,
    #[serde(default)]
    response: Option<Value>,
    #[serde(default)]
    message: Option<String>,
}

/// Reads one streamed event's JSON payload into `exchange`.
pub(super) fn on_event(data: &str, now: Instant, exchange: &mut Exchange) -> Result<Next, Failure> {
    let event: Event<'_> = serde_json::from_str(data).map_err(|error| {
        Failure::new(
            OutcomeKind::Protocol,
            format!("invalid JSON in a Responses event: {error}"),
        )
    })?;
    let delta = event.delta.as_deref().unwrap_or("");
    let mut parts = OutputParts::default();
    let call;
    match event.kind.as_ref() {
        "response.output_text.delta" | "response.refusal.delta" => parts.answer = delta,
        "response.reasoning_text.delta"
        | "response.reasoning_summary_text.delta"
        | "response.reasoning.delta" => parts.reasoning = delta,
        "response.function_call_arguments.delta" => {
            call = [(event.output_index.unwrap_or(0), false)];
            parts.tool = delta;
            parts.tool_calls = &call;
        }
        "response.completed" | "response.incomplete" => {
            finish(event.response.as_ref(), exchange);
            return Ok(Next::Done);
        }
        "response.failed" | "error" => {
            let message = event
                .response
                .as_ref()
                .and_then(|r| r.pointer("/error/message"))
                .and_then(Value::as_str)
                .map(str::to_string)
                .or(event.message)
                .unwrap_or_else(|| data.chars().take(200).collect());
            return Err(Failure::new(
                OutcomeKind::StreamError,
                format!("server error in stream: {message}"),
            ));
        }
        _ => return Ok(Next::More),
    }
    let has_output =
        !(parts.answer.is_empty() && parts.reasoning.is_empty() && parts.tool_calls.is_empty());
    if has_output {
        exchange.choices = exchange.choices.max(1);
        exchange.push_parts(now, 0, parts, None);
    }
    Ok(Next::More)
}

/// Usage and the finish reason of the final `response` object.
fn finish(response: Option<&Value>, exchange: &mut Exchange) {
    let Some(response) = response else { return };
    exchange.usage = response.get("usage").and_then(usage);
    let reason = match response["status"].as_str() {
        Some("incomplete") => match response.pointer("/incomplete_details/reason") {
            Some(Value::String(reason)) if reason == "max_output_tokens" => "length",
            _ => "incomplete",
        },
        _ if !exchange.tool_calls.is_empty() => "tool_calls",
        _ => "stop",
    };
    exchange.finish_reason = Some(reason.to_string());
}

/// Responses usage as chat usage.
fn usage(value: &Value) -> Option<Usage> {
    let count = |pointer: &str| value.pointer(pointer).and_then(Value::as_u64);
    let mut usage = Usage::new(count("/input_tokens")?, count("/output_tokens")?);
    if let Some(cached) = count("/input_tokens_details/cached_tokens") {
        usage.prompt_tokens_details = Some(PromptTokensDetails {
            cached_tokens: cached,
        });
    }
    if let Some(reasoning) = count("/output_tokens_details/reasoning_tokens") {
        usage.completion_tokens_details = Some(CompletionTokensDetails {
            reasoning_tokens: Some(reasoning),
        });
    }
    Some(usage)
}

/// A whole `response` body as JSON, unless it is not JSON or carries the server's error.
fn parse_whole(bytes: &[u8]) -> Result<Value, Failure> {
    let response: Value = serde_json::from_slice(bytes).map_err(|error| {
        Failure::new(
            OutcomeKind::Protocol,
            format!("invalid JSON response body: {error}"),
        )
    })?;
    if let Some(message) = response.pointer("/error/message").and_then(Value::as_str) {
        return Err(Failure::new(
            OutcomeKind::StreamError,
            format!("server error: {message}"),
        ));
    }
    Ok(response)
}

/// A whole (non-streamed) `response` object that arrived at `now`.
pub(super) fn record_whole(
    bytes: &[u8],
    now: Instant,
    exchange: &mut Exchange,
) -> Result<(), Failure> {
    let response = parse_whole(bytes)?;
    let Some(output) = response.get("output").and_then(Value::as_array) else {
        return Err(Failure::new(
            OutcomeKind::Protocol,
            "response has no `output`",
        ));
    };
    let (mut reasoning, mut answer, mut tool) = (String::new(), String::new(), String::new());
    let mut calls = Vec::new();
    for (index, item) in output.iter().enumerate() {
        let texts = |key: &str| -> String {
            item.get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|part| part.get("text").and_then(Value::as_str))
                .collect()
        };
        match item["type"].as_str() {
            Some("message") => answer.push_str(&texts("content")),
            Some("reasoning") => {
                reasoning.push_str(&texts("content"));
                reasoning.push_str(&texts("summary"));
            }
            Some("function_call") => {
                for key in ["name", "arguments"] {
                    tool.push_str(item[key].as_str().unwrap_or(""));
                }
                calls.push((u32::try_from(index).unwrap_or(u32::MAX), true));
            }
            _ => {}
        }
    }
    exchange.choices = 1;
    let parts = OutputParts {
        reasoning: &reasoning,
        answer: &answer,
        tool: &tool,
        tool_calls: &calls,
    };
    let tokens = response.get("usage").and_then(usage);
    exchange.push_parts(now, 0, parts, tokens.map(|u| u.completion_tokens));
    finish(Some(&response), exchange);
    Ok(())
}
