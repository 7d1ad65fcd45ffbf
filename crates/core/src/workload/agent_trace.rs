//! Agent traces: recorded agentic sessions replayed turn by turn (`--dataset FILE`, format
//! `agent`). One JSON object per line:
//!
//! ```json
//! {"id": "fix-1", "system": "You are a coding agent.", "turns": [
//!   {"role": "user", "content": "The test fails.", "output_tokens": 64},
//!   {"role": "assistant", "content": "Reading the file."},
//!   {"role": "tool", "content": "fn main() {}", "latency_ms": 350},
//!   {"role": "user", "content": "Now run it.", "think_time_ms": 2000}]}
//! ```
//!
//! Every `user` and `tool` turn is a request; the assistant turns after it (joined) are its
//! reference reply, whose length becomes its `max_tokens` unless the turn gives
//! `output_tokens`. A `tool` turn is sent `latency_ms` after the reply (default 0) as the result
//! of a tool call goodput adds to that reply; a `user` turn `think_time_ms` after it (default: a
//! `--think-time` draw). A session starts with a user turn. Errors name the line and field.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::session::MAX_THINK_TIME;
use super::source::{Loaded, Place, RecordError, WorkloadFileError, load_jsonl};

/// One request of a recorded session: a user message or a tool result.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentTraceTurn {
    /// The message (user text or tool output).
    pub content: String,
    /// The turn is a tool result.
    pub tool_result: bool,
    /// `output_tokens` of the turn.
    pub output_tokens: Option<u32>,
    /// The recorded assistant reply after it, if any (only its length is used).
    pub reference: Option<String>,
    /// Wait after the previous reply: `think_time_ms` or `latency_ms`, if given.
    pub wait: Option<Duration>,
}

/// One recorded session.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentTraceSession {
    /// Its id, if given.
    pub id: Option<String>,
    /// System prompt.
    pub system: Option<String>,
    /// Its requests, in order.
    pub turns: Vec<AgentTraceTurn>,
}

/// Reads an agent-trace JSONL file.
pub fn load_agent_trace(
    path: &Path,
    skip_invalid: bool,
) -> Result<Loaded<AgentTraceSession>, WorkloadFileError> {
    load_jsonl(path, skip_invalid, parse_agent_session)
}

/// Parses one line of an agent trace.
pub fn parse_agent_session(
    place: Place<'_>,
    line: &[u8],
) -> Result<AgentTraceSession, RecordError> {
    let map = place.object(place.text(line)?)?;
    place.no_unknown_keys(&map, &["id", "system", "turns"])?;
    let id = match map.get("id") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => Some(id.clone()),
        Some(Value::Number(id)) => Some(id.to_string()),
        Some(_) => return Err(place.error("id", "must be a string or a number")),
    };
    let system = map
        .get("system")
        .map(|value| place.string("system", value).map(str::to_string))
        .transpose()?;
    let Some(Value::Array(items)) = map.get("turns") else {
        return Err(place.error("turns", "missing, or not an array of {role, content}"));
    };
    let mut turns: Vec<AgentTraceTurn> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match parse_turn(place, i, item)? {
            Parsed::Request(turn) => {
                if turn.tool_result && turns.is_empty() {
                    return Err(place.error(
                        format!("turns[{i}].role"),
                        "a session starts with a user turn (a tool result answers a reply)",
                    ));
                }
                turns.push(turn);
            }
            Parsed::Reply(text) => {
                let Some(turn) = turns.last_mut() else {
                    return Err(place.error(
                        format!("turns[{i}].role"),
                        "a session starts with a user turn, not an assistant reply",
                    ));
                };
                match &mut turn.reference {
                    Some(reply) => {
                        reply.push('\n');
                        reply.push_str(&text);
                    }
                    None => turn.reference = Some(text),
                }
            }
        }
    }
    if turns.is_empty() {
        return Err(place.error("turns", "has no user turn"));
    }
    Ok(AgentTraceSession { id, system, turns })
}

enum Parsed {
    Request(AgentTraceTurn),
    Reply(String),
}

/// The keys each role accepts.
fn known_keys(role: &str) -> &'static [&'static str] {
    match role {
        "user" => &["role", "content", "output_tokens", "think_time_ms"],
        "tool" => &["role", "content", "output_tokens", "latency_ms"],
        _ => &["role", "content"],
    }
}

fn parse_turn(place: Place<'_>, i: usize, item: &Value) -> Result<Parsed, RecordError> {
    let field = |name: &str| format!("turns[{i}].{name}");
    let Value::Object(map) = item else {
        return Err(place.error(format!("turns[{i}]"), "must be an object {role, content}"));
    };
    let null = Value::Null;
    let role = place.string(&field("role"), map.get("role").unwrap_or(&null))?;
    if !["user", "assistant", "tool"].contains(&role) {
        return Err(place.error(
            field("role"),
            format!("unknown role `{role}`; expected user, assistant or tool"),
        ));
    }
    let known = known_keys(role);
    if let Some(key) = map.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(place.error(
            field(key),
            format!(
                "unknown field for a {role} turn; expected {}",
                known.join(", ")
            ),
        ));
    }
    let content = place.string(&field("content"), map.get("content").unwrap_or(&null))?;
    if role == "assistant" {
        return Ok(Parsed::Reply(content.to_string()));
    }
    if content.trim().is_empty() {
        return Err(place.error(field("content"), format!("the {role} turn is empty")));
    }
    let output_tokens = map
        .get("output_tokens")
        .map(|value| place.tokens(&field("output_tokens"), value))
        .transpose()?;
    let wait_key = if role == "user" {
        "think_time_ms"
    } else {
        "latency_ms"
    };
    let wait = map
        .get(wait_key)
        .map(|value| wait(place, &field(wait_key), value))
        .transpose()?;
    Ok(Parsed::Request(AgentTraceTurn {
        content: content.to_string(),
        tool_result: role == "tool",
        output_tokens,
        reference: None,
        wait,
    }))
}

/// A wait in milliseconds: finite, not negative, at most [`MAX_THINK_TIME`].
fn wait(place: Place<'_>, field: &str, value: &Value) -> Result<Duration, RecordError> {
    let ms = place.non_negative(field, value)?;
    Duration::try_from_secs_f64(ms / 1e3)
        .ok()
        .filter(|wait| *wait <= MAX_THINK_TIME)
        .ok_or_else(|| place.error(field, format!("{ms} ms is longer than a day")))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn place() -> Place<'static> {
        Place {
            path: "a.jsonl",
            line: 3,
        }
    }

    #[test]
    fn turns_requests_replies_and_waits() {
        let line = br#"{"id":"s","system":"sys","turns":[
            {"role":"user","content":"do it","output_tokens":9},
            {"role":"assistant","content":"calling"},
            {"role":"tool","content":"result","latency_ms":250},
            {"role":"assistant","content":"a"},{"role":"assistant","content":"b"},
            {"role":"user","content":"again","think_time_ms":1500.5}]}"#;
        let session = parse_agent_session(place(), line).unwrap();
        assert_eq!(session.system.as_deref(), Some("sys"));
        let turns = &session.turns;
        assert_eq!(turns.len(), 3);
        assert_eq!(turns[0].output_tokens, Some(9));
        assert_eq!(turns[0].reference.as_deref(), Some("calling"));
        assert!(turns[1].tool_result);
        assert_eq!(turns[1].wait, Some(Duration::from_millis(250)));
        assert_eq!(turns[1].reference.as_deref(), Some("a\nb"));
        assert!(!turns[2].tool_result);
        assert_eq!(turns[2].wait, Some(Duration::from_micros(1_500_500)));
        assert_eq!(turns[2].reference, None);
    }

    #[test]
    fn bad_sessions_name_their_field() {
        for (line, field, message) in [
            (
                &br#"{"turns":[{"role":"tool","content":"x"}]}"#[..],
                "turns[0].role",
                "starts with a user turn",
            ),
            (
                br#"{"turns":[{"role":"assistant","content":"x"}]}"#,
                "turns[0].role",
                "starts with a user turn",
            ),
            (
                br#"{"turns":[{"role":"robot","content":"x"}]}"#,
                "turns[0].role",
                "unknown role",
            ),
            (
                br#"{"turns":[{"role":"user","content":"x","latency_ms":5}]}"#,
                "turns[0].latency_ms",
                "unknown field",
            ),
            (
                br#"{"turns":[{"role":"user","content":"x","think_time_ms":-5}]}"#,
                "turns[0].think_time_ms",
                "negative",
            ),
            (
                br#"{"turns":[{"role":"user","content":"x","think_time_ms":1e12}]}"#,
                "turns[0].think_time_ms",
                "longer than a day",
            ),
            (
                br#"{"turns":[{"role":"user","content":" "}]}"#,
                "turns[0].content",
                "empty",
            ),
            (
                br#"{"turns":[{"role":"user","content":"x","output_tokens":0}]}"#,
                "turns[0].output_tokens",
                "",
            ),
            (br#"{"turns":[]}"#, "turns", "no user turn"),
            (br#"{"turn":[]}"#, "turn", "unknown field"),
            (br#"{"id":"x"}"#, "turns", "missing"),
        ] {
            let error = parse_agent_session(place(), line).unwrap_err();
            assert_eq!(error.field, field, "{error}");
            assert!(error.message.contains(message), "{error}");
            assert!(error.to_string().starts_with("a.jsonl:3: field"), "{error}");
        }
    }
}
