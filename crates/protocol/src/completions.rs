//! `POST /v1/completions` (legacy text completions): request, response and streamed chunk.

use serde::{Deserialize, Serialize};

use crate::usage::{StreamOptions, Usage};

/// A text completion request. Unknown fields are accepted and ignored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionRequest {
    /// Model name.
    #[serde(default)]
    pub model: Option<String>,
    /// One prompt or a batch of prompts.
    pub prompt: Prompt,
    /// Maximum tokens to generate per prompt (vLLM default: 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// Stream the answer as server-sent events.
    #[serde(default)]
    pub stream: Option<bool>,
    /// Streaming options (usage reporting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    /// Keep generating after the end-of-sequence token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ignore_eos: Option<bool>,
    /// Generate at least this many tokens before end-of-sequence may end the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_tokens: Option<u64>,
    /// Number of choices per prompt; only 1 is supported by the simulator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<u64>,
}

/// The `prompt` field: text, token ids, or a batch of either.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Prompt {
    /// One text prompt.
    Text(String),
    /// A batch of text prompts (one choice each).
    TextBatch(Vec<String>),
    /// One prompt given as token ids.
    Tokens(Vec<u32>),
    /// A batch of prompts given as token ids.
    TokenBatch(Vec<Vec<u32>>),
}

impl Prompt {
    /// Number of prompts in the request.
    pub fn len(&self) -> usize {
        match self {
            Prompt::Text(_) | Prompt::Tokens(_) => 1,
            Prompt::TextBatch(batch) => batch.len(),
            Prompt::TokenBatch(batch) => batch.len(),
        }
    }

    /// Whether the request carries no prompt at all (an empty batch).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A complete (non-streamed) text completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    /// Response id.
    pub id: String,
    /// Always `text_completion`.
    pub object: String,
    /// Unix time of creation.
    pub created: u64,
    /// Model name.
    pub model: String,
    /// One choice per prompt.
    pub choices: Vec<CompletionChoice>,
    /// Token usage summed over all prompts.
    pub usage: Usage,
}

/// One choice of a completion (whole answer or streamed delta).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionChoice {
    /// Choice index (the prompt's position in a batch).
    pub index: u32,
    /// Generated text (the whole answer, or this chunk's delta).
    pub text: String,
    /// Always null here; kept for wire compatibility.
    pub logprobs: Option<serde_json::Value>,
    /// Why generation stopped; null on intermediate chunks.
    pub finish_reason: Option<String>,
}

/// One streamed completion chunk (`object: text_completion`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionChunk {
    /// Response id.
    pub id: String,
    /// Always `text_completion`.
    pub object: String,
    /// Unix time of creation.
    pub created: u64,
    /// Model name.
    pub model: String,
    /// Deltas; empty on the final usage chunk.
    pub choices: Vec<CompletionChoice>,
    /// `null` on intermediate chunks (as vLLM's completions endpoint sends it), the usage on the
    /// final chunk or on every chunk with `continuous_usage_stats`.
    pub usage: Option<Usage>,
}
