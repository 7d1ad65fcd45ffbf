//! Token accounting as servers report it (`usage`) and the `stream_options` that ask for it.

use serde::{Deserialize, Serialize};

/// Token usage of one request as reported by the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens in the prompt after the chat template was applied.
    #[serde(default, deserialize_with = "null_as_zero")]
    pub prompt_tokens: u64,
    /// Tokens generated so far (cumulative when sent on every chunk).
    #[serde(default, deserialize_with = "null_as_zero")]
    pub completion_tokens: u64,
    /// `prompt_tokens + completion_tokens`.
    #[serde(default, deserialize_with = "null_as_zero")]
    pub total_tokens: u64,
    /// Breakdown of the prompt tokens, when the server reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens_details: Option<PromptTokensDetails>,
    /// Breakdown of the generated tokens (reasoning tokens), when the server reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens_details: Option<CompletionTokensDetails>,
}

impl Usage {
    /// Usage for `prompt` prompt tokens and `completion` generated tokens.
    pub fn new(prompt: u64, completion: u64) -> Self {
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            total_tokens: prompt + completion,
            prompt_tokens_details: None,
            completion_tokens_details: None,
        }
    }

    /// Reasoning tokens among the completion tokens (`completion_tokens_details.reasoning_tokens`),
    /// when the server reports them.
    pub fn reasoning_tokens(&self) -> Option<u64> {
        self.completion_tokens_details
            .and_then(|details| details.reasoning_tokens)
    }
}

/// Generated token breakdown (`usage.completion_tokens_details`, OpenAI, vLLM with a reasoning
/// parser, SGLang).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CompletionTokensDetails {
    /// Tokens of the reasoning (thinking) channel; `None` when absent or null.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
}

/// Prompt token breakdown (`usage.prompt_tokens_details`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PromptTokensDetails {
    /// Prompt tokens served from the prefix cache.
    #[serde(default, deserialize_with = "null_as_zero")]
    pub cached_tokens: u64,
}

/// `stream_options` of a streaming request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct StreamOptions {
    /// Send a final chunk with `choices: []` and the request's usage before `[DONE]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_usage: Option<bool>,
    /// Send the cumulative usage on every chunk (vLLM extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuous_usage_stats: Option<bool>,
}

/// Reads a count that some servers send as `null` (e.g. `"completion_tokens": null` on an
/// intermediate chunk) as 0.
fn null_as_zero<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<u64, D::Error> {
    Ok(Option::<u64>::deserialize(deserializer)?.unwrap_or(0))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn null_counts_read_as_zero() {
        let usage: Usage = serde_json::from_str(
            r#"{"prompt_tokens":5,"completion_tokens":null,"total_tokens":5}"#,
        )
        .unwrap();
        assert_eq!(usage, Usage::new(5, 0));
    }
}
