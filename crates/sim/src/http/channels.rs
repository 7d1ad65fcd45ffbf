//! The channels of an emulated chat answer: how many of its first tokens are reasoning, how the
//! reasoning is sent, and whether the answer is a tool call; and the split of each new run of
//! tokens into reasoning text, answer text and tool-call arguments.

use goodput_protocol::chat::{ChatDelta, FunctionCallDelta, ToolCallDelta};
use rand::RngExt;
use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;

use super::request::{Dialect, Plan};
use crate::config::{AgentConfig, ReasoningFormat};
use crate::text::derive_seed;

/// Seed purpose of the tool-call draw (independent of the fault and EOS draws).
const TOOL_CALL_RNG: u64 = 0x7001;
/// The function every emulated tool call calls.
pub(crate) const TOOL_NAME: &str = "lookup";

/// What one request's answer emulates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct AnswerChannels {
    /// Reasoning tokens before the answer.
    pub(crate) reasoning: u32,
    /// How they are sent.
    pub(crate) format: ReasoningFormat,
    /// The answer is a tool call.
    pub(crate) tool_call: bool,
    /// Usage reports the prompt tokens served from the prefix cache.
    pub(crate) cached_details: bool,
}

impl AnswerChannels {
    /// The channels of request `number` (chat only; a tool call only when it offers tools).
    pub(crate) fn for_request(config: &AgentConfig, plan: &Plan, seed: u64, number: u64) -> Self {
        if plan.dialect != Dialect::Chat {
            return AnswerChannels {
                cached_details: config.prompt_tokens_details,
                ..AnswerChannels::default()
            };
        }
        let p = config.tool_call_probability;
        let tool_call = plan.tools && p > 0.0 && {
            let mut rng =
                Xoshiro256PlusPlus::seed_from_u64(derive_seed(seed, number, TOOL_CALL_RNG));
            rng.random::<f64>() < p
        };
        AnswerChannels {
            reasoning: config.reasoning_length(),
            format: config.reasoning_format,
            tool_call,
            cached_details: config.prompt_tokens_details,
        }
    }
}

/// The text of one run of new tokens of a choice, by channel.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Piece {
    /// Reasoning text (with its tags in the `think_tags` format).
    pub(crate) reasoning: String,
    /// Answer text (empty for a tool call).
    pub(crate) answer: String,
    /// Tool-call argument text, and whether this piece opens the call.
    pub(crate) tool: Option<(String, bool)>,
}

impl Piece {
    /// Builds the piece of `reasoning` then `answer` words (with their token counts) generated
    /// after `before` tokens; `last` when the choice finished with it.
    pub(crate) fn new(
        channels: &AnswerChannels,
        before: u32,
        reasoning: (String, u32),
        answer: (String, u32),
        last: bool,
    ) -> Piece {
        let mut piece = Piece::default();
        if reasoning.1 > 0 {
            let tags = channels.format == ReasoningFormat::ThinkTags;
            if tags && before == 0 {
                piece.reasoning.push_str("<think>");
            }
            piece.reasoning.push_str(&reasoning.0);
            if tags && before + reasoning.1 >= channels.reasoning {
                piece.reasoning.push_str("</think>");
            }
        }
        if channels.tool_call && answer.1 > 0 {
            let opens = before <= channels.reasoning;
            let mut text = String::new();
            if opens {
                text.push_str("{\"query\": \"");
            }
            text.push_str(if opens {
                answer.0.trim_start()
            } else {
                &answer.0
            });
            if last {
                text.push_str("\"}");
            }
            piece.tool = Some((text, opens));
        } else {
            piece.answer = answer.0;
        }
        piece
    }

    /// The chat delta carrying this piece; `call_id` names the tool call.
    pub(crate) fn delta(self, channels: &AnswerChannels, call_id: &str) -> ChatDelta {
        let mut delta = ChatDelta::default();
        let reasoning = (!self.reasoning.is_empty()).then_some(self.reasoning);
        match channels.format {
            ReasoningFormat::ReasoningContent => delta.reasoning_content = reasoning,
            ReasoningFormat::Reasoning => delta.reasoning = reasoning,
            ReasoningFormat::ThinkTags => {
                let mut content = reasoning.unwrap_or_default();
                content.push_str(&self.answer);
                delta.content = Some(content);
                return with_tool(delta, self.tool, call_id);
            }
        }
        let carries_other = delta.reasoning_content.is_some() || delta.reasoning.is_some();
        if !self.answer.is_empty() || !(carries_other || self.tool.is_some()) {
            delta.content = Some(self.answer);
        }
        with_tool(delta, self.tool, call_id)
    }
}

fn with_tool(mut delta: ChatDelta, tool: Option<(String, bool)>, call_id: &str) -> ChatDelta {
    if let Some((arguments, opens)) = tool {
        delta.tool_calls = Some(vec![ToolCallDelta {
            index: 0,
            id: opens.then(|| call_id.to_string()),
            kind: opens.then(|| "function".to_string()),
            function: FunctionCallDelta {
                name: opens.then(|| TOOL_NAME.to_string()),
                arguments: Some(arguments),
            },
        }]);
    }
    delta
}
