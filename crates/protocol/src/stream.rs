//! A lenient, borrowing view of one streamed chunk as any OpenAI-compatible server sends it:
//! chat or completions, `choices` absent or null, `usage` absent or null, an `error` object,
//! llama.cpp `timings`. Fields goodput does not need are skipped without allocation.

use std::borrow::Cow;

use serde::Deserialize;

use crate::usage::Usage;

/// One `data:` payload of a stream, chat or completions.
#[derive(Debug, Default, Deserialize)]
pub struct ChunkView<'a> {
    /// The answer's id (`chatcmpl-…`, `cmpl-…`), repeated on every chunk.
    #[serde(default, borrow)]
    pub id: Option<Cow<'a, str>>,
    /// Choice deltas; `None` when absent or null (usage-only chunks).
    #[serde(default, borrow)]
    pub choices: Option<Vec<ChoiceView<'a>>>,
    /// Usage; `None` when absent or null.
    #[serde(default)]
    pub usage: Option<Usage>,
    /// An error object (`{"error": {...}}` or `{"error": "text"}`) sent mid-stream.
    #[serde(default)]
    pub error: Option<serde_json::Value>,
    /// `"error"` in old vLLM error payloads (`{"object": "error", "message": ...}`).
    #[serde(default, borrow)]
    pub object: Option<Cow<'a, str>>,
    /// Message of old-style error payloads.
    #[serde(default, borrow)]
    pub message: Option<Cow<'a, str>>,
    /// llama.cpp per-request server timings (on the final chunk).
    #[serde(default)]
    pub timings: Option<ServerTimings>,
}

/// One choice of a streamed chunk.
#[derive(Debug, Default, Deserialize)]
pub struct ChoiceView<'a> {
    /// Choice index.
    #[serde(default)]
    pub index: u32,
    /// Chat delta.
    #[serde(default, borrow)]
    pub delta: Option<DeltaView<'a>>,
    /// Completions text delta.
    #[serde(default, borrow)]
    pub text: Option<Cow<'a, str>>,
    /// Why generation stopped; set on the last chunk of a choice.
    #[serde(default, borrow)]
    pub finish_reason: Option<Cow<'a, str>>,
}

/// The delta of a streamed chat chunk.
#[derive(Debug, Default, Deserialize)]
pub struct DeltaView<'a> {
    /// Generated text.
    #[serde(default, borrow)]
    pub content: Option<Cow<'a, str>>,
    /// Reasoning text (DeepSeek/vLLM/SGLang/llama.cpp `reasoning_content`).
    #[serde(default, borrow)]
    pub reasoning_content: Option<Cow<'a, str>>,
    /// Reasoning text (newer vLLM `reasoning`).
    #[serde(default, borrow)]
    pub reasoning: Option<Cow<'a, str>>,
    /// Tool-call deltas (`[{"index", "id", "type", "function": {"name", "arguments"}}]`).
    #[serde(default, borrow)]
    pub tool_calls: Option<Vec<ToolCallDeltaView<'a>>>,
}

/// One streamed tool-call delta: the first of a call carries its `id` and function `name`,
/// the following ones pieces of its `arguments` (JSON text).
#[derive(Debug, Default, Deserialize)]
pub struct ToolCallDeltaView<'a> {
    /// Which call of the message this piece belongs to.
    #[serde(default)]
    pub index: u32,
    /// Call id (first delta of a call).
    #[serde(default, borrow)]
    pub id: Option<Cow<'a, str>>,
    /// Function name and argument text.
    #[serde(default, borrow)]
    pub function: Option<FunctionDeltaView<'a>>,
}

/// The function part of a tool-call delta.
#[derive(Debug, Default, Deserialize)]
pub struct FunctionDeltaView<'a> {
    /// Function name (first delta of a call).
    #[serde(default, borrow)]
    pub name: Option<Cow<'a, str>>,
    /// A piece of the JSON argument text.
    #[serde(default, borrow)]
    pub arguments: Option<Cow<'a, str>>,
}

impl ToolCallDeltaView<'_> {
    /// The text this delta generated: the function name and argument piece.
    pub fn generated_text(&self) -> impl Iterator<Item = &str> {
        self.function
            .iter()
            .flat_map(|function| [&function.name, &function.arguments])
            .flatten()
            .map(|text| text.as_ref())
    }
}

fn non_empty<'s>(text: &'s Option<Cow<'_, str>>) -> Option<&'s str> {
    text.as_deref().filter(|text| !text.is_empty())
}

impl<'a> ChoiceView<'a> {
    /// The reasoning (thinking) text this choice carries, if any and non-empty.
    pub fn reasoning_text(&self) -> Option<&str> {
        let delta = self.delta.as_ref()?;
        non_empty(&delta.reasoning_content).or_else(|| non_empty(&delta.reasoning))
    }

    /// The answer text this choice carries (chat `content` or completion `text`), if non-empty.
    pub fn answer_text(&self) -> Option<&str> {
        let from_delta = self
            .delta
            .as_ref()
            .and_then(|delta| non_empty(&delta.content));
        from_delta.or_else(|| non_empty(&self.text))
    }

    /// The tool-call deltas this choice carries (empty when none).
    pub fn tool_calls(&self) -> &[ToolCallDeltaView<'a>] {
        self.delta
            .as_ref()
            .and_then(|delta| delta.tool_calls.as_deref())
            .unwrap_or(&[])
    }

    /// The generated text this choice carries (content, reasoning or completion text), if any.
    pub fn generated_text(&self) -> Option<&str> {
        self.answer_text().or_else(|| self.reasoning_text())
    }

    /// Whether the choice carries generated output: non-empty text or a tool-call delta.
    pub fn has_output(&self) -> bool {
        self.generated_text().is_some() || !self.tool_calls().is_empty()
    }
}

/// llama.cpp `timings` (server-side per-request timing, milliseconds).
#[derive(Debug, Clone, Copy, PartialEq, Default, Deserialize, serde::Serialize)]
pub struct ServerTimings {
    /// Prompt tokens served from the cache.
    #[serde(default)]
    pub cache_n: Option<f64>,
    /// Prompt tokens processed.
    #[serde(default)]
    pub prompt_n: Option<f64>,
    /// Prompt processing time in ms.
    #[serde(default)]
    pub prompt_ms: Option<f64>,
    /// Tokens generated.
    #[serde(default)]
    pub predicted_n: Option<f64>,
    /// Generation time in ms.
    #[serde(default)]
    pub predicted_ms: Option<f64>,
    /// Draft tokens proposed (speculative decoding).
    #[serde(default)]
    pub draft_n: Option<f64>,
    /// Draft tokens accepted (speculative decoding).
    #[serde(default)]
    pub draft_n_accepted: Option<f64>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_usage_only_chunk_with_null_or_missing_choices() {
        for text in [
            r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}"#,
            r#"{"choices":null,"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}"#,
            r#"{"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}"#,
        ] {
            let chunk: ChunkView<'_> = serde_json::from_str(text).unwrap();
            assert_eq!(chunk.usage.unwrap().completion_tokens, 2);
            assert!(chunk.choices.unwrap_or_default().is_empty());
        }
    }

    #[test]
    fn role_only_chunk_has_no_output() {
        let text = r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}"#;
        let chunk: ChunkView<'_> = serde_json::from_str(text).unwrap();
        assert!(!chunk.choices.unwrap()[0].has_output());
    }

    #[test]
    fn escaped_content_is_decoded() {
        let text = r#"{"choices":[{"delta":{"content":"a\"b\n"}}],"usage":null}"#;
        let chunk: ChunkView<'_> = serde_json::from_str(text).unwrap();
        assert_eq!(chunk.choices.unwrap()[0].generated_text(), Some("a\"b\n"));
        assert!(chunk.usage.is_none());
    }

    #[test]
    fn completions_text_and_tool_calls_count_as_output() {
        let text = r#"{"choices":[{"index":1,"text":" hi","finish_reason":"length"}]}"#;
        let chunk: ChunkView<'_> = serde_json::from_str(text).unwrap();
        assert!(chunk.choices.as_ref().unwrap()[0].has_output());
        let text = r#"{"choices":[{"delta":{"tool_calls":[{"index":0}]}}]}"#;
        let chunk: ChunkView<'_> = serde_json::from_str(text).unwrap();
        assert!(chunk.choices.unwrap()[0].has_output());
    }

    #[test]
    fn reasoning_answer_and_tool_call_parts_are_apart() {
        let text = r#"{"choices":[{"delta":{"reasoning_content":"hm","content":"Hi"}}]}"#;
        let chunk: ChunkView<'_> = serde_json::from_str(text).unwrap();
        let choice = &chunk.choices.as_ref().unwrap()[0];
        assert_eq!(
            (choice.reasoning_text(), choice.answer_text()),
            (Some("hm"), Some("Hi"))
        );
        let text = r#"{"choices":[{"delta":{"reasoning":"x","content":null}}]}"#;
        let chunk: ChunkView<'_> = serde_json::from_str(text).unwrap();
        assert_eq!(
            chunk.choices.as_ref().unwrap()[0].reasoning_text(),
            Some("x")
        );
        let text = r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"c","type":"function","function":{"name":"get","arguments":"{\"a\""}}]}}]}"#;
        let chunk: ChunkView<'_> = serde_json::from_str(text).unwrap();
        let calls = chunk.choices.as_ref().unwrap()[0].tool_calls();
        assert_eq!(calls[0].index, 1);
        assert_eq!(calls[0].generated_text().collect::<String>(), "get{\"a\"");
        let text = r#"{"choices":[{"delta":{"tool_calls":[]}}]}"#;
        let chunk: ChunkView<'_> = serde_json::from_str(text).unwrap();
        assert!(!chunk.choices.unwrap()[0].has_output());
    }
}
