//! `POST /v1/chat/completions`: request, non-streamed response and streamed chunk.

use serde::{Deserialize, Serialize};

use crate::usage::{StreamOptions, Usage};

/// A chat completion request. Unknown fields are accepted and ignored, as real servers do.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ChatCompletionRequest {
    /// Model name.
    #[serde(default)]
    pub model: Option<String>,
    /// The conversation so far.
    pub messages: Vec<ChatMessage>,
    /// Maximum tokens to generate (deprecated alias of `max_completion_tokens`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Maximum tokens to generate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u64>,
    /// Stream the answer as server-sent events.
    #[serde(default)]
    pub stream: Option<bool>,
    /// Streaming options (usage reporting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    /// Keep generating after the end-of-sequence token (vLLM, SGLang, llama.cpp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_eos: Option<bool>,
    /// Generate at least this many tokens before end-of-sequence may end the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_tokens: Option<u64>,
    /// Number of choices; only 1 is supported by the simulator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<u64>,
    /// Tools the model may call (only their number matters to the simulator).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<serde_json::Value>>,
}

impl ChatCompletionRequest {
    /// The generation limit the request asks for: `max_completion_tokens`, else `max_tokens`.
    pub fn max_output_tokens(&self) -> Option<u64> {
        self.max_completion_tokens.or(self.max_tokens)
    }
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    /// The message text, as a string or as content parts.
    #[serde(default)]
    pub content: MessageContent,
    /// Reasoning text of an assistant answer (vLLM/SGLang/DeepSeek `reasoning_content`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// Tool calls of an assistant message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCall>>,
    /// The call a `tool` message answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl ChatMessage {
    /// A message with plain text content.
    pub fn new(role: &str, text: impl Into<String>) -> Self {
        ChatMessage {
            role: role.to_string(),
            content: MessageContent::Text(text.into()),
            reasoning_content: None,
            tool_calls: None,
            tool_call_id: None,
        }
    }
}

/// A tool call of an assistant message (`{"id", "type": "function", "function": {…}}`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Call id, echoed by the `tool` message that answers it.
    pub id: String,
    /// Always `function`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The function called.
    pub function: FunctionCall,
}

/// The function of a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// Function name.
    pub name: String,
    /// Arguments, as JSON text.
    pub arguments: String,
}

/// One streamed tool-call delta.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallDelta {
    /// Which call of the message.
    pub index: u32,
    /// Call id (first delta of a call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `function` (first delta of a call).
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Name (first delta) and a piece of the arguments.
    pub function: FunctionCallDelta,
}

/// The function part of a streamed tool-call delta.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct FunctionCallDelta {
    /// Function name (first delta of a call).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A piece of the JSON argument text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
}

/// Message content: a string, a list of typed parts, or null.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MessageContent {
    /// Plain text.
    Text(String),
    /// Typed parts; only `text` parts carry text.
    Parts(Vec<ContentPart>),
    /// No content (assistant tool-call turns).
    #[default]
    Null,
}

impl MessageContent {
    /// Every text part joined with no separator.
    pub fn text(&self) -> String {
        match self {
            MessageContent::Text(text) => text.clone(),
            MessageContent::Parts(parts) => {
                parts.iter().filter_map(|p| p.text.as_deref()).collect()
            }
            MessageContent::Null => String::new(),
        }
    }
}

/// One typed content part.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContentPart {
    /// Part type, e.g. `text` or `image_url`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The text of a `text` part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The image of an `image_url` part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_url: Option<ImageUrl>,
}

/// The image of an `image_url` content part: an `https:` or `data:` URL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageUrl {
    /// The URL, e.g. `data:image/png;base64,…`.
    pub url: String,
}

/// A complete (non-streamed) chat answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletion {
    /// Response id.
    pub id: String,
    /// Always `chat.completion`.
    pub object: String,
    /// Unix time of creation.
    pub created: u64,
    /// Model name.
    pub model: String,
    /// The answers.
    pub choices: Vec<ChatChoice>,
    /// Token usage.
    pub usage: Usage,
}

/// One answer of a non-streamed chat completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatChoice {
    /// Choice index.
    pub index: u32,
    /// The assistant message.
    pub message: ChatMessage,
    /// Why generation stopped: `stop` or `length`.
    pub finish_reason: Option<String>,
}

/// One streamed chat chunk (`object: chat.completion.chunk`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletionChunk {
    /// Response id (same on every chunk).
    pub id: String,
    /// Always `chat.completion.chunk`.
    pub object: String,
    /// Unix time of creation.
    pub created: u64,
    /// Model name.
    pub model: String,
    /// Deltas; empty on the final usage chunk.
    pub choices: Vec<ChatChunkChoice>,
    /// Usage: on the final chunk with `include_usage`, or on every chunk with
    /// `continuous_usage_stats`; omitted otherwise (as vLLM's chat endpoint does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

/// One choice delta of a streamed chat chunk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatChunkChoice {
    /// Choice index.
    pub index: u32,
    /// What this chunk adds.
    pub delta: ChatDelta,
    /// Always null here; kept for wire compatibility.
    pub logprobs: Option<serde_json::Value>,
    /// Set on the chunk carrying the last token.
    pub finish_reason: Option<String>,
}

/// The delta of a streamed chat chunk.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ChatDelta {
    /// `assistant` on the first (role-only) chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Generated text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Reasoning text (`reasoning_content`, or `reasoning` as newer vLLM names it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_content: Option<String>,
    /// Reasoning text under newer vLLM's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// Tool-call deltas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ToolCallDelta>>,
}
