//! The Anthropic Messages route (`POST /v1/messages`): the request read as a chat request (its
//! top-level `system` as a first system message, `max_tokens` required) and the answer's wire
//! form as Anthropic emits it — `message_start`, one text `content_block_start`, a
//! `content_block_delta` (`text_delta`) per engine step, then `content_block_stop`,
//! `message_delta` (`stop_reason`, cumulative `output_tokens`) and `message_stop`; or a whole
//! `message` object. Usage splits the prompt as the API does: `input_tokens` the uncached part,
//! `cache_read_input_tokens` the part served from the prefix cache. The answer is plain text
//! (the reasoning and tool-call emulations are chat's).

use bytes::Bytes;
use goodput_protocol::Usage;
use serde_json::{Value, json};

use super::request::{InvalidRequest, Plan, PromptContext, parse_chat};

/// Parses a Messages request into the engine's plan (as the equivalent chat request).
pub(crate) fn parse(body: &[u8], context: &PromptContext) -> Result<Plan, InvalidRequest> {
    let mut request: Value = serde_json::from_slice(body)
        .map_err(|error| InvalidRequest::new(format!("invalid JSON body: {error}"), None))?;
    let Some(map) = request.as_object_mut() else {
        return Err(InvalidRequest::new("the body must be a JSON object", None));
    };
    if !map.get("max_tokens").is_some_and(Value::is_u64) {
        return Err(InvalidRequest::new(
            "max_tokens: field required",
            Some("max_tokens"),
        ));
    }
    if let Some(system) = map.remove("system") {
        let mut messages = vec![json!({"role": "system", "content": system})];
        if let Some(Value::Array(rest)) = map.remove("messages") {
            messages.extend(rest);
        }
        map.insert("messages".into(), Value::Array(messages));
    }
    map.insert("stream_options".into(), json!({"include_usage": true}));
    let chat = serde_json::to_vec(&request).unwrap_or_default();
    let mut plan = parse_chat(&chat, context)?;
    plan.dialect = super::request::Dialect::Messages;
    Ok(plan)
}

/// Anthropic's `stop_reason` for a chat finish reason.
fn stop_reason(finish: &str) -> &'static str {
    match finish {
        "length" => "max_tokens",
        "tool_calls" => "tool_use",
        _ => "end_turn",
    }
}

/// The API's usage object: the prompt split into uncached and cache-read tokens.
fn usage_json(usage: &Usage) -> Value {
    let cached = usage
        .prompt_tokens_details
        .as_ref()
        .map_or(0, |details| details.cached_tokens);
    json!({
        "input_tokens": usage.prompt_tokens.saturating_sub(cached),
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cached,
        "output_tokens": usage.completion_tokens,
    })
}

/// One event: `event: <type>` and its JSON.
fn event(value: &Value) -> Bytes {
    let kind = value["type"].as_str().unwrap_or("");
    Bytes::from(format!("event: {kind}\ndata: {value}\n\n"))
}

/// `message_start` and the text block's `content_block_start`.
pub(crate) fn start_events(id: &str, model: &str, usage: &Usage) -> Bytes {
    let start = json!({"type": "message_start", "message": {
        "id": id, "type": "message", "role": "assistant", "content": [], "model": model,
        "stop_reason": null, "stop_sequence": null, "usage": usage_json(usage)}});
    let block = json!({"type": "content_block_start", "index": 0,
                       "content_block": {"type": "text", "text": ""}});
    let mut bytes = event(&start).to_vec();
    bytes.extend_from_slice(&event(&block));
    Bytes::from(bytes)
}

/// The `text_delta` of new answer text.
pub(crate) fn delta_event(text: &str) -> Bytes {
    event(&json!({"type": "content_block_delta", "index": 0,
                  "delta": {"type": "text_delta", "text": text}}))
}

/// `content_block_stop`, `message_delta` and `message_stop`.
pub(crate) fn end_events(finish: Option<&str>, usage: &Usage) -> Bytes {
    let reason = finish.map_or("end_turn", stop_reason);
    let mut bytes = event(&json!({"type": "content_block_stop", "index": 0})).to_vec();
    bytes.extend_from_slice(&event(&json!({"type": "message_delta",
        "delta": {"stop_reason": reason, "stop_sequence": null},
        "usage": {"output_tokens": usage.completion_tokens}})));
    bytes.extend_from_slice(&event(&json!({"type": "message_stop"})));
    Bytes::from(bytes)
}

/// An `error` event carrying `message`.
pub(crate) fn error_event(message: &str) -> Bytes {
    event(&json!({"type": "error", "error": {"type": "api_error", "message": message}}))
}

/// The whole `message` body.
pub(crate) fn whole(
    id: &str,
    model: &str,
    text: &str,
    finish: Option<&str>,
    usage: &Usage,
) -> Vec<u8> {
    let reason = finish.map_or("end_turn", stop_reason);
    let body = json!({"id": id, "type": "message", "role": "assistant", "model": model,
        "content": [{"type": "text", "text": text}], "stop_reason": reason,
        "stop_sequence": null, "usage": usage_json(usage)});
    serde_json::to_vec(&body).unwrap_or_default()
}
