//! The answer being built for one request: generated text per choice, usage, and its wire form
//! as vLLM emits it — streamed chunks (`data: <json>\n\n`) or a whole `ChatCompletion` /
//! `Completion` body (Anthropic Messages events and bodies are `messages.rs`').

use bytes::Bytes;
use goodput_protocol::chat::{
    ChatChoice, ChatChunkChoice, ChatCompletion, ChatCompletionChunk, ChatDelta,
};
use goodput_protocol::chat::{FunctionCall, ToolCall};
use goodput_protocol::completions::{Completion, CompletionChoice, CompletionChunk};
use goodput_protocol::usage::{CompletionTokensDetails, PromptTokensDetails};
use goodput_protocol::{ApiErrorBody, ChatMessage, MessageContent, Usage};
use serde::Serialize;

use super::channels::{AnswerChannels, Piece, TOOL_NAME};
use super::request::{Dialect, Plan};
use crate::engine::FinishReason;
use crate::text::WordGenerator;

/// The last event of every stream.
pub(crate) const DONE_EVENT: &[u8] = b"data: [DONE]\n\n";
/// The line sent by the `malformed_sse` fault.
pub(crate) const MALFORMED_EVENT: &[u8] = b"data: {not json\n\n";
/// The chunk sent by the `invalid_json_chunk` fault: a well-formed event whose JSON is cut off.
pub(crate) const INVALID_JSON_EVENT: &[u8] =
    b"data: {\"id\":\"chatcmpl-cut\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"cut\n\n";
/// The line sent by the `sse_garbage` fault: bytes that are not UTF-8 text.
pub(crate) const GARBAGE_EVENT: &[u8] = b"data: \xff\xfe\x00\xc3garbage\x80\n\n";
/// The comment sent by the `endless_response` fault.
pub(crate) const KEEP_ALIVE_EVENT: &[u8] = b": keep-alive\n\n";

/// Identity of a response.
#[derive(Debug, Clone)]
pub(crate) struct AnswerHeader {
    /// Response id (`chatcmpl-…` / `cmpl-…`).
    pub(crate) id: String,
    /// Unix time of creation.
    pub(crate) created: u64,
    /// Served model name.
    pub(crate) model: String,
    /// Configured seed and request number, for the word generators.
    pub(crate) seed: u64,
    /// Request number.
    pub(crate) request_number: u64,
}

#[derive(Debug)]
struct ChoiceText {
    words: WordGenerator,
    text: String,
    reasoning: String,
    tool_arguments: String,
    generated: u32,
    finish: Option<FinishReason>,
}

/// One request's answer in the making.
#[derive(Debug)]
pub(crate) struct Answer {
    header: AnswerHeader,
    dialect: Dialect,
    choices: Vec<ChoiceText>,
    prompt_tokens: u64,
    include_usage: bool,
    continuous_usage: bool,
    keep_text: bool,
    channels: AnswerChannels,
    /// Prompt tokens the engine served from its prefix cache (`None` until admitted).
    cached_tokens: Option<u64>,
}

impl Answer {
    /// An empty answer to `plan`; the whole text is kept only for non-streamed answers.
    pub(crate) fn new(header: AnswerHeader, plan: &Plan, channels: AnswerChannels) -> Self {
        let choices = (0..plan.prompts.len())
            .map(|index| ChoiceText {
                words: WordGenerator::new(
                    header.seed,
                    header.request_number,
                    u32::try_from(index).unwrap_or(u32::MAX),
                ),
                text: String::new(),
                reasoning: String::new(),
                tool_arguments: String::new(),
                generated: 0,
                finish: None,
            })
            .collect();
        Answer {
            header,
            dialect: plan.dialect,
            choices,
            prompt_tokens: plan
                .prompts
                .iter()
                .map(|p| u64::from(p.prompt_tokens))
                .sum(),
            include_usage: plan.include_usage,
            continuous_usage: plan.continuous_usage,
            keep_text: !plan.stream,
            channels,
            cached_tokens: None,
        }
    }

    /// Whether a stream starts with an opening event (chat's role-only chunk, Messages'
    /// `message_start`).
    pub(crate) fn is_chat(&self) -> bool {
        matches!(self.dialect, Dialect::Chat | Dialect::Messages)
    }

    /// The event that ends a stream (none after Messages' `message_stop`).
    pub(crate) fn done_event(&self) -> Option<&'static [u8]> {
        (self.dialect != Dialect::Messages).then_some(DONE_EVENT)
    }

    /// An error sent mid-stream, in the dialect's shape.
    pub(crate) fn error_event(&self, message: &str) -> Bytes {
        if self.dialect == Dialect::Messages {
            super::messages::error_event(message)
        } else {
            error_event(message)
        }
    }

    /// The finish reason of choice 0 by its wire name (Messages answers have one choice).
    fn first_finish(&self) -> Option<String> {
        let choice = self.choices.first()?;
        choice
            .finish
            .map(|reason| self.finish_name(reason, choice.generated))
    }

    /// Tokens generated so far over all choices.
    pub(crate) fn generated(&self) -> u64 {
        self.choices.iter().map(|c| u64::from(c.generated)).sum()
    }

    /// Usage so far (prompt tokens summed over prompts).
    /// Adds prompt tokens one of the answer's prompts got from the prefix cache.
    pub(crate) fn add_cached(&mut self, tokens: u32) {
        if !self.channels.cached_details {
            return;
        }
        *self.cached_tokens.get_or_insert(0) += u64::from(tokens);
    }

    pub(crate) fn usage(&self) -> Usage {
        let mut usage = Usage::new(self.prompt_tokens, self.generated());
        usage.prompt_tokens_details = self
            .cached_tokens
            .map(|cached_tokens| PromptTokensDetails { cached_tokens });
        if self.channels.reasoning > 0 {
            let reasoning = self
                .choices
                .iter()
                .map(|c| u64::from(c.generated.min(self.channels.reasoning)))
                .sum();
            usage.completion_tokens_details = Some(CompletionTokensDetails {
                reasoning_tokens: Some(reasoning),
            });
        }
        usage
    }

    /// Records `count` new tokens of choice `index` and returns their text by channel.
    pub(crate) fn add_tokens(
        &mut self,
        index: usize,
        count: u32,
        finished: Option<FinishReason>,
    ) -> Piece {
        let Some(choice) = self.choices.get_mut(index) else {
            return Piece::default();
        };
        let before = choice.generated;
        let reasoning = self.channels.reasoning.saturating_sub(before).min(count);
        let reasoning_words = choice.words.words(reasoning);
        let answer_words = choice.words.words(count - reasoning);
        let piece = Piece::new(
            &self.channels,
            before,
            (reasoning_words, reasoning),
            (answer_words, count - reasoning),
            finished.is_some(),
        );
        if self.keep_text {
            choice.reasoning.push_str(&piece.reasoning);
            choice.text.push_str(&piece.answer);
            if let Some((arguments, _)) = &piece.tool {
                choice.tool_arguments.push_str(arguments);
            }
        }
        choice.generated += count;
        choice.finish = finished.or(choice.finish);
        piece
    }

    /// The wire name of a finish reason (`tool_calls` when the answer is a tool call).
    fn finish_name(&self, reason: FinishReason, generated: u32) -> String {
        if self.channels.tool_call && generated > self.channels.reasoning {
            "tool_calls".to_string()
        } else {
            reason.as_str().to_string()
        }
    }

    /// Id of the answer's tool call.
    fn call_id(&self) -> String {
        format!("call-{}", self.header.id)
    }

    fn chunk_usage(&self) -> Option<Usage> {
        self.continuous_usage.then(|| self.usage())
    }

    /// The role-only first chunk of a chat stream.
    pub(crate) fn role_event(&self) -> Bytes {
        if self.dialect == Dialect::Messages {
            let (id, model) = (&self.header.id, &self.header.model);
            return super::messages::start_events(id, model, &self.usage());
        }
        let delta = ChatDelta {
            role: Some("assistant".to_string()),
            content: Some(String::new()),
            ..ChatDelta::default()
        };
        sse(&self.chat_chunk(vec![chat_choice(0, delta, None)]))
    }

    /// The chunk carrying new text of choice `index` (and its finish reason with the last).
    pub(crate) fn delta_event(
        &self,
        index: usize,
        piece: Piece,
        finished: Option<FinishReason>,
    ) -> Bytes {
        let generated = self.choices.get(index).map_or(0, |c| c.generated);
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        let finish_reason = finished.map(|reason| self.finish_name(reason, generated));
        match self.dialect {
            Dialect::Chat => {
                let delta = piece.delta(&self.channels, &self.call_id());
                sse(&self.chat_chunk(vec![chat_choice(index, delta, finish_reason)]))
            }
            Dialect::Completions => {
                let choice = CompletionChoice {
                    index,
                    text: piece.answer,
                    logprobs: None,
                    finish_reason,
                };
                sse(&self.completion_chunk(vec![choice], self.chunk_usage()))
            }
            Dialect::Messages => super::messages::delta_event(&piece.answer),
        }
    }

    /// The final usage chunk (`choices: []`), when the client asked for it.
    pub(crate) fn usage_event(&self) -> Option<Bytes> {
        if self.dialect == Dialect::Messages {
            let finish = self.first_finish();
            return Some(super::messages::end_events(
                finish.as_deref(),
                &self.usage(),
            ));
        }
        if !self.include_usage {
            return None;
        }
        Some(match self.dialect {
            Dialect::Chat => sse(&ChatCompletionChunk {
                usage: Some(self.usage()),
                ..self.chat_chunk(Vec::new())
            }),
            Dialect::Completions | Dialect::Messages => {
                sse(&self.completion_chunk(Vec::new(), Some(self.usage())))
            }
        })
    }

    fn chat_chunk(&self, choices: Vec<ChatChunkChoice>) -> ChatCompletionChunk {
        ChatCompletionChunk {
            id: self.header.id.clone(),
            object: "chat.completion.chunk".to_string(),
            created: self.header.created,
            model: self.header.model.clone(),
            choices,
            usage: self.chunk_usage(),
        }
    }

    fn completion_chunk(
        &self,
        choices: Vec<CompletionChoice>,
        usage: Option<Usage>,
    ) -> CompletionChunk {
        CompletionChunk {
            id: self.header.id.clone(),
            object: "text_completion".to_string(),
            created: self.header.created,
            model: self.header.model.clone(),
            choices,
            usage,
        }
    }

    /// The whole non-streamed response body.
    pub(crate) fn final_body(self) -> Vec<u8> {
        if self.dialect != Dialect::Messages {
            return self.openai_body();
        }
        let usage = self.usage();
        let text = self
            .choices
            .first()
            .map_or("", |choice| choice.text.as_str());
        let finish = self.first_finish();
        let (id, model) = (&self.header.id, &self.header.model);
        super::messages::whole(id, model, text, finish.as_deref(), &usage)
    }

    /// The whole body of a chat or text completion.
    fn openai_body(self) -> Vec<u8> {
        let usage = self.usage();
        let finishes: Vec<Option<String>> = self
            .choices
            .iter()
            .map(|c| c.finish.map(|reason| self.finish_name(reason, c.generated)))
            .collect();
        let call_id = self.call_id();
        let channels = self.channels;
        let AnswerHeader {
            id, created, model, ..
        } = self.header;
        match self.dialect {
            Dialect::Chat => {
                let choices = self
                    .choices
                    .into_iter()
                    .zip(finishes)
                    .zip(0..)
                    .map(|((choice, finish_reason), index)| ChatChoice {
                        index,
                        finish_reason,
                        message: whole_message(choice, &channels, &call_id),
                    })
                    .collect();
                let object = "chat.completion".to_string();
                to_json(&ChatCompletion {
                    id,
                    object,
                    created,
                    model,
                    choices,
                    usage,
                })
            }
            Dialect::Completions | Dialect::Messages => {
                let choices = self
                    .choices
                    .into_iter()
                    .zip(finishes)
                    .zip(0..)
                    .map(|((choice, finish_reason), index)| CompletionChoice {
                        index,
                        finish_reason,
                        text: choice.text,
                        logprobs: None,
                    })
                    .collect();
                let object = "text_completion".to_string();
                to_json(&Completion {
                    id,
                    object,
                    created,
                    model,
                    choices,
                    usage,
                })
            }
        }
    }
}

/// The assistant message of a whole chat answer: reasoning apart (or inside `<think>` tags in
/// the content), and the tool call.
fn whole_message(choice: ChoiceText, channels: &AnswerChannels, call_id: &str) -> ChatMessage {
    let mut message = ChatMessage::new("assistant", choice.text);
    if !choice.reasoning.is_empty() {
        if channels.format == crate::config::ReasoningFormat::ThinkTags {
            let content = format!("{}{}", choice.reasoning, message.content.text());
            message.content = MessageContent::Text(content);
        } else {
            message.reasoning_content = Some(choice.reasoning);
        }
    }
    if !choice.tool_arguments.is_empty() {
        message.content = MessageContent::Null;
        message.tool_calls = Some(vec![ToolCall {
            id: call_id.to_string(),
            kind: "function".to_string(),
            function: FunctionCall {
                name: TOOL_NAME.to_string(),
                arguments: choice.tool_arguments,
            },
        }]);
    }
    message
}

fn chat_choice(index: u32, delta: ChatDelta, finish_reason: Option<String>) -> ChatChunkChoice {
    ChatChunkChoice {
        index,
        delta,
        logprobs: None,
        finish_reason,
    }
}

/// JSON of a wire type (these types always serialize; an empty body would be the fallback).
pub(crate) fn to_json<T: Serialize>(value: &T) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

/// One server-sent event carrying `value` as JSON.
fn sse<T: Serialize>(value: &T) -> Bytes {
    let json = to_json(value);
    let mut event = Vec::with_capacity(json.len() + 8);
    event.extend_from_slice(b"data: ");
    event.extend_from_slice(&json);
    event.extend_from_slice(b"\n\n");
    Bytes::from(event)
}

/// An error object sent mid-stream (`data: {"error": {...}}`).
pub(crate) fn error_event(message: &str) -> Bytes {
    sse(&ApiErrorBody::new("server_error", message, None, 500))
}
