//! Dataset files (local only, never downloaded), parsed strictly: a record with an unknown
//! field, a negative or zero length, a wrong type or bad JSON is an error naming the file,
//! line and field (or is skipped and counted with `--skip-invalid`).
//!
//! * **Prompts JSONL** — one object per line: `{"prompt": "…"}` or
//!   `{"messages": [{"role", "content"}, …]}` (OpenAI chat messages), each with an optional
//!   `"output_tokens": N` (the expected answer length, sent as `max_tokens`).
//! * **ShareGPT** — a JSON array (or JSONL) of `{"id"?, "system"?, "conversations": [{"from",
//!   "value"}, …]}`; every turn is kept. `from` is `human`/`user`, `gpt`/`assistant`/`chatgpt`/
//!   `bard`/`bing`/`model`, or `system`. Each human message is one turn; the assistant messages
//!   that follow it (joined) are its reference reply, whose length becomes the turn's
//!   `max_tokens`. Leading assistant messages are dropped; a conversation needs one human turn.

use std::path::Path;

use goodput_protocol::ChatMessage;
use serde_json::Value;

use super::source::{
    Collector, Loaded, Place, RecordError, WorkloadFileError, lines, load_jsonl, read_file,
};

/// Roles accepted in chat messages.
const ROLES: [&str; 5] = ["system", "user", "assistant", "developer", "tool"];

/// A dataset file layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatasetFormat {
    /// One prompt or message list per line.
    Prompts,
    /// ShareGPT conversations.
    ShareGpt,
    /// Agent traces: recorded sessions with tool results ([`super::agent_trace`]).
    Agent,
}

impl DatasetFormat {
    /// `prompts` or `sharegpt`.
    pub fn as_str(self) -> &'static str {
        match self {
            DatasetFormat::Prompts => "prompts",
            DatasetFormat::ShareGpt => "sharegpt",
            DatasetFormat::Agent => "agent",
        }
    }

    /// A format by name (`prompts`/`jsonl`, `sharegpt`).
    pub fn by_name(name: &str) -> Option<Self> {
        match name.trim().to_ascii_lowercase().as_str() {
            "prompts" | "jsonl" | "openai" => Some(DatasetFormat::Prompts),
            "sharegpt" => Some(DatasetFormat::ShareGpt),
            "agent" => Some(DatasetFormat::Agent),
            _ => None,
        }
    }

    /// The format of a file from its content: a JSON array, or lines with `conversations`, are
    /// ShareGPT; lines with `turns` are agent traces; other lines are prompts.
    pub fn detect(bytes: &[u8]) -> DatasetFormat {
        if starts_with_array(bytes) {
            return DatasetFormat::ShareGpt;
        }
        let first_line = lines(bytes).next().map_or(&[][..], |(_, line)| line);
        if memchr::memmem::find(first_line, b"\"conversations\"").is_some() {
            DatasetFormat::ShareGpt
        } else if memchr::memmem::find(first_line, b"\"turns\"").is_some() {
            DatasetFormat::Agent
        } else {
            DatasetFormat::Prompts
        }
    }
}

/// Whether the file's first character (after a byte-order mark and blanks) is `[`.
fn starts_with_array(bytes: &[u8]) -> bool {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[')
}

/// The prompt of a dataset record.
#[derive(Debug, Clone, PartialEq)]
pub enum DatasetPrompt {
    /// Plain text.
    Text(String),
    /// Chat messages, sent as they are.
    Messages(Vec<ChatMessage>),
}

/// One record of a prompts file.
#[derive(Debug, Clone, PartialEq)]
pub struct PromptRecord {
    /// The prompt.
    pub prompt: DatasetPrompt,
    /// Expected answer length.
    pub output_tokens: Option<u32>,
}

/// One turn of a ShareGPT conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct SharegptTurn {
    /// What the user says.
    pub user: String,
    /// The reference reply of the dataset, if any (only its length is used).
    pub reference: Option<String>,
}

/// One ShareGPT conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct SharegptConversation {
    /// Its id, if given.
    pub id: Option<String>,
    /// System prompt.
    pub system: Option<String>,
    /// User turns, in order.
    pub turns: Vec<SharegptTurn>,
}

/// Reads a prompts JSONL file.
pub fn load_prompts(
    path: &Path,
    skip_invalid: bool,
) -> Result<Loaded<PromptRecord>, WorkloadFileError> {
    load_jsonl(path, skip_invalid, parse_prompt_line)
}

/// Parses one line of a prompts file.
pub fn parse_prompt_line(place: Place<'_>, line: &[u8]) -> Result<PromptRecord, RecordError> {
    let map = place.object(place.text(line)?)?;
    place.no_unknown_keys(&map, &["prompt", "messages", "output_tokens"])?;
    let prompt = match (map.get("prompt"), map.get("messages")) {
        (Some(prompt), None) => {
            let text = place.string("prompt", prompt)?;
            if text.trim().is_empty() {
                return Err(place.error("prompt", "is empty"));
            }
            DatasetPrompt::Text(text.to_string())
        }
        (None, Some(messages)) => DatasetPrompt::Messages(parse_messages(place, messages)?),
        (Some(_), Some(_)) => {
            return Err(place.error("messages", "give `prompt` or `messages`, not both"));
        }
        (None, None) => return Err(place.error("prompt", "missing (or give `messages`)")),
    };
    let output_tokens = map
        .get("output_tokens")
        .map(|value| place.tokens("output_tokens", value))
        .transpose()?;
    Ok(PromptRecord {
        prompt,
        output_tokens,
    })
}

fn parse_messages(place: Place<'_>, value: &Value) -> Result<Vec<ChatMessage>, RecordError> {
    let Value::Array(items) = value else {
        return Err(place.error("messages", "must be an array of {role, content}"));
    };
    if items.is_empty() {
        return Err(place.error("messages", "is empty"));
    }
    let mut messages = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let field = |name: &str| format!("messages[{i}].{name}");
        let Value::Object(map) = item else {
            return Err(place.error(
                format!("messages[{i}]"),
                "must be an object {role, content}",
            ));
        };
        if let Some(key) = map
            .keys()
            .find(|k| !["role", "content", "name"].contains(&k.as_str()))
        {
            return Err(place.error(field(key), "unknown field; expected role, content, name"));
        }
        let role = place.string(&field("role"), map.get("role").unwrap_or(&Value::Null))?;
        if !ROLES.contains(&role) {
            return Err(place.error(
                field("role"),
                format!("unknown role `{role}`; expected {}", ROLES.join(", ")),
            ));
        }
        let content = place.string(
            &field("content"),
            map.get("content").unwrap_or(&Value::Null),
        )?;
        messages.push(ChatMessage::new(role, content));
    }
    if !messages.iter().any(|m| m.role == "user") {
        return Err(place.error("messages", "has no `user` message"));
    }
    Ok(messages)
}

/// Reads a ShareGPT file (a JSON array, or one conversation per line).
pub fn load_sharegpt(
    path: &Path,
    skip_invalid: bool,
) -> Result<Loaded<SharegptConversation>, WorkloadFileError> {
    let bytes = read_file(path)?;
    let display = path.display().to_string();
    let mut collector = Collector::new(&display, skip_invalid);
    let elements: Vec<(usize, &[u8])> = if starts_with_array(&bytes) {
        split_array(&bytes).map_err(|(line, message)| {
            WorkloadFileError::Record(RecordError {
                path: display.clone(),
                line,
                field: "(json)".into(),
                message,
            })
        })?
    } else {
        lines(&bytes).collect()
    };
    for (line, element) in elements {
        let place = Place {
            path: &display,
            line,
        };
        collector.push(parse_conversation(place, element))?;
    }
    collector.finish()
}

/// Parses one ShareGPT conversation (an array element or a line).
pub fn parse_conversation(
    place: Place<'_>,
    element: &[u8],
) -> Result<SharegptConversation, RecordError> {
    let map = place.object(place.text(element)?)?;
    place.no_unknown_keys(&map, &["id", "system", "conversations"])?;
    let id = match map.get("id") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => Some(id.clone()),
        Some(Value::Number(id)) => Some(id.to_string()),
        Some(_) => return Err(place.error("id", "must be a string or a number")),
    };
    let mut system = map
        .get("system")
        .map(|value| place.string("system", value).map(str::to_string))
        .transpose()?;
    let Some(Value::Array(messages)) = map.get("conversations") else {
        return Err(place.error("conversations", "missing, or not an array of {from, value}"));
    };
    let mut turns: Vec<SharegptTurn> = Vec::new();
    for (i, message) in messages.iter().enumerate() {
        let (speaker, text) = parse_sharegpt_message(place, i, message)?;
        match speaker {
            Speaker::System => system = Some(text),
            Speaker::User => turns.push(SharegptTurn {
                user: text,
                reference: None,
            }),
            Speaker::Assistant => {
                if let Some(turn) = turns.last_mut() {
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
    }
    if turns.is_empty() {
        return Err(place.error("conversations", "has no human turn"));
    }
    Ok(SharegptConversation { id, system, turns })
}

enum Speaker {
    System,
    User,
    Assistant,
}

fn parse_sharegpt_message(
    place: Place<'_>,
    i: usize,
    message: &Value,
) -> Result<(Speaker, String), RecordError> {
    let field = |name: &str| format!("conversations[{i}].{name}");
    let Value::Object(map) = message else {
        return Err(place.error(
            format!("conversations[{i}]"),
            "must be an object {from, value}",
        ));
    };
    let extra = map
        .keys()
        .find(|k| !["from", "value"].contains(&k.as_str()));
    if let Some(key) = extra {
        return Err(place.error(field(key), "unknown field; expected from, value"));
    }
    let null = Value::Null;
    let from = place.string(&field("from"), map.get("from").unwrap_or(&null))?;
    let value = place.string(&field("value"), map.get("value").unwrap_or(&null))?;
    let speaker = match from.to_ascii_lowercase().as_str() {
        "human" | "user" => Speaker::User,
        "gpt" | "assistant" | "chatgpt" | "bard" | "bing" | "model" => Speaker::Assistant,
        "system" => Speaker::System,
        other => {
            return Err(place.error(
                field("from"),
                format!("unknown speaker `{other}`; expected human, gpt or system"),
            ));
        }
    };
    if matches!(speaker, Speaker::User) && value.trim().is_empty() {
        return Err(place.error(field("value"), "the human turn is empty"));
    }
    Ok((speaker, value.to_string()))
}

/// Lines (1-based) and bytes of the elements of a JSON array.
type Elements<'a> = Vec<(usize, &'a [u8])>;

/// The elements of a top-level JSON array as `(line, bytes)`, without parsing them (so each
/// element's errors carry its own line); `Err((line, message))` when the array is malformed.
pub(crate) fn split_array(bytes: &[u8]) -> Result<Elements<'_>, (usize, String)> {
    let mut scanner = Scanner {
        bytes,
        at: 0,
        line: 1,
    };
    scanner.skip_space();
    if scanner.peek() != Some(b'[') {
        return Err((scanner.line, "expected a JSON array `[`".into()));
    }
    scanner.bump();
    let mut elements = Vec::new();
    loop {
        scanner.skip_space();
        match scanner.peek() {
            None => return Err((scanner.line, "the array is not closed with `]`".into())),
            Some(b']') if elements.is_empty() => {
                scanner.bump();
                break;
            }
            _ => {}
        }
        let (line, start) = (scanner.line, scanner.at);
        let end = scanner.value_end()?;
        elements.push((line, &bytes[start..end]));
        scanner.skip_space();
        match scanner.peek() {
            Some(b',') => scanner.bump(),
            Some(b']') => {
                scanner.bump();
                break;
            }
            _ => return Err((scanner.line, "expected `,` or `]` after an element".into())),
        }
    }
    scanner.skip_space();
    if scanner.peek().is_some() {
        return Err((scanner.line, "unexpected text after the array".into()));
    }
    Ok(elements)
}

struct Scanner<'a> {
    bytes: &'a [u8],
    at: usize,
    line: usize,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn bump(&mut self) {
        if self.peek() == Some(b'\n') {
            self.line += 1;
        }
        self.at += 1;
    }

    fn skip_space(&mut self) {
        while let Some(b) = self.peek() {
            if b.is_ascii_whitespace() || (self.at < 3 && [0xEF, 0xBB, 0xBF].contains(&b)) {
                self.bump();
            } else {
                break;
            }
        }
    }

    /// Moves past one value (brackets balanced, strings skipped); returns where it ends.
    fn value_end(&mut self) -> Result<usize, (usize, String)> {
        let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
        while let Some(b) = self.peek() {
            if in_string {
                match (escaped, b) {
                    (true, _) => escaped = false,
                    (false, b'\\') => escaped = true,
                    (false, b'"') => in_string = false,
                    _ => {}
                }
            } else {
                match b {
                    b'"' => in_string = true,
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' if depth == 0 => return Ok(self.at),
                    b'}' | b']' => depth -= 1,
                    b',' if depth == 0 => return Ok(self.at),
                    _ => {}
                }
            }
            self.bump();
        }
        Err((self.line, "the file ends inside an array element".into()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn place() -> Place<'static> {
        Place {
            path: "d.jsonl",
            line: 7,
        }
    }

    #[test]
    fn prompt_lines_parse_with_their_fields_checked() {
        let record = parse_prompt_line(place(), br#"{"prompt":"hi there","output_tokens":12}"#);
        assert_eq!(
            record.unwrap(),
            PromptRecord {
                prompt: DatasetPrompt::Text("hi there".into()),
                output_tokens: Some(12),
            }
        );
        let chat = br#"{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}]}"#;
        let DatasetPrompt::Messages(messages) = parse_prompt_line(place(), chat).unwrap().prompt
        else {
            panic!("messages")
        };
        assert_eq!(messages.len(), 2);
        for (line, field, message) in [
            (
                &br#"{"prompt":"x","output_tokens":-3}"#[..],
                "output_tokens",
                "negative",
            ),
            (
                br#"{"prompt":"x","temperature":1}"#,
                "temperature",
                "unknown field",
            ),
            (br#"{"prompt":""}"#, "prompt", "empty"),
            (br#"{"output_tokens":3}"#, "prompt", "missing"),
            (br#"{"prompt":"x""#, "(json)", "not valid JSON"),
            (br#"[1,2]"#, "(json)", "expected a JSON object"),
            (
                br#"{"messages":[{"role":"robot","content":"x"}]}"#,
                "messages[0].role",
                "unknown role",
            ),
            (
                br#"{"messages":[{"role":"user"}]}"#,
                "messages[0].content",
                "string",
            ),
            (b"\xff\xfe", "(encoding)", "UTF-8"),
        ] {
            let error = parse_prompt_line(place(), line).unwrap_err();
            assert_eq!(error.field, field, "{error}");
            assert!(error.message.contains(message), "{error}");
            assert!(error.to_string().starts_with("d.jsonl:7: field"), "{error}");
        }
    }

    #[test]
    fn sharegpt_keeps_every_turn_and_its_reference_reply() {
        let text = br#"{"id":"c1","conversations":[
            {"from":"gpt","value":"dropped: nobody asked yet"},
            {"from":"human","value":"first question"},
            {"from":"gpt","value":"first answer"},
            {"from":"human","value":"second question"},
            {"from":"gpt","value":"part one"},
            {"from":"gpt","value":"part two"},
            {"from":"human","value":"third, unanswered"}]}"#;
        let conversation = parse_conversation(place(), text).unwrap();
        assert_eq!(conversation.id.as_deref(), Some("c1"));
        let turns = &conversation.turns;
        assert_eq!(turns.len(), 3);
        assert_eq!(turns[0].reference.as_deref(), Some("first answer"));
        assert_eq!(turns[1].reference.as_deref(), Some("part one\npart two"));
        assert_eq!(turns[2].reference, None);
        let error = parse_conversation(
            place(),
            br#"{"conversations":[{"from":"alien","value":"x"}]}"#,
        )
        .unwrap_err();
        assert_eq!(error.field, "conversations[0].from");
        let error = parse_conversation(place(), br#"{"conversations":[]}"#).unwrap_err();
        assert!(error.message.contains("no human turn"));
    }

    #[test]
    fn arrays_split_into_elements_with_their_lines() {
        let text = b"[\n {\"a\": \"x, ] y\"},\n {\"b\": [1, {\"c\": 2}]}\n]\n";
        let elements = split_array(text).unwrap();
        assert_eq!(elements.len(), 2);
        assert_eq!(elements[0], (2, &b"{\"a\": \"x, ] y\"}"[..]));
        assert_eq!(elements[1].0, 3);
        assert_eq!(split_array(b"[]").unwrap().len(), 0);
        assert_eq!(split_array(b"[\n{\"a\":1}\n").unwrap_err().0, 3);
        assert!(split_array(b"[1] x").is_err());
        assert_eq!(DatasetFormat::detect(b"  [{}]"), DatasetFormat::ShareGpt);
        assert_eq!(
            DatasetFormat::detect(b"{\"prompt\":\"x\"}"),
            DatasetFormat::Prompts
        );
        assert_eq!(
            DatasetFormat::detect(b"{\"conversations\":[]}"),
            DatasetFormat::ShareGpt
        );
    }
}
