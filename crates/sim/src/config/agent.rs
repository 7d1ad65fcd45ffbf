//! Reasoning-model and agent emulation: a reasoning phase before each chat answer (with a
//! server-side budget), sent the way vLLM, SGLang, DeepSeek or llama.cpp send it, and tool
//! calls in answers to requests that offer `tools`.

use serde::{Deserialize, Serialize};

use super::ConfigError;

/// How the reasoning text is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningFormat {
    /// `delta.reasoning_content` (DeepSeek, SGLang, llama.cpp `--reasoning-format deepseek`,
    /// older vLLM).
    #[default]
    ReasoningContent,
    /// `delta.reasoning` (newer vLLM).
    Reasoning,
    /// Inside `content`, between `<think>` and `</think>` (no reasoning parser).
    ThinkTags,
}

impl ReasoningFormat {
    /// Parses a format name.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "reasoning_content" | "deepseek" => Some(ReasoningFormat::ReasoningContent),
            "reasoning" => Some(ReasoningFormat::Reasoning),
            "think_tags" | "think" | "none" => Some(ReasoningFormat::ThinkTags),
            _ => None,
        }
    }
}

/// Reasoning and tool-call emulation (chat answers only).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AgentConfig {
    /// Tokens the model thinks before answering (0: no reasoning phase). They count in
    /// `completion_tokens` and against `max_tokens`, as on real servers.
    pub reasoning_tokens: u32,
    /// The server's thinking budget: reasoning stops after this many tokens.
    pub reasoning_budget: Option<u32>,
    /// How the reasoning is sent.
    pub reasoning_format: ReasoningFormat,
    /// Probability that an answer to a request offering `tools` is a tool call (its answer
    /// tokens become the call's arguments; `finish_reason` `tool_calls`).
    pub tool_call_probability: f64,
    /// Report `usage.prompt_tokens_details.cached_tokens` (the prompt tokens found in the
    /// prefix cache), as vLLM does with `--enable-prompt-tokens-details`.
    pub prompt_tokens_details: bool,
}

impl AgentConfig {
    /// Reasoning tokens of every chat answer: the configured length capped by the budget.
    pub fn reasoning_length(&self) -> u32 {
        self.reasoning_budget
            .map_or(self.reasoning_tokens, |budget| {
                self.reasoning_tokens.min(budget)
            })
    }

    pub(super) fn validate(&self) -> Result<(), ConfigError> {
        let p = self.tool_call_probability;
        if !(0.0..=1.0).contains(&p) {
            return Err(ConfigError::invalid(
                "agent.tool_call_probability",
                "must be between 0 and 1",
            ));
        }
        Ok(())
    }
}
