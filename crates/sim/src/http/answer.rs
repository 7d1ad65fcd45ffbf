//! The answer being built for one request: generated text per choice, usage, and its wire form
//! as vLLM emits it — streamed chunks (`data: <json>\n\n`) or a whole `ChatCompletion` /
//! `Completion` body.

use bytes::Bytes;
use goodput_protocol::chat::{
    ChatChoice, ChatChunkChoice, ChatCompletion, ChatCompletionChunk, ChatDelta,
};
use goodput_protocol::completions::{Completion, CompletionChoice, CompletionChunk};
use goodput_protocol::{ApiErrorBody, ChatMessage, Usage};
use serde::Serialize;

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
}

impl Answer {
    /// An empty answer to `plan`; the whole text is kept only for non-streamed answers.
    pub(crate) fn new(header: AnswerHeader, plan: &Plan) -> Self {
        let choices = (0..plan.prompts.len())
            .map(|index| ChoiceText {
                words: WordGenerator::new(
                    header.seed,
                    header.request_number,
                    u32::try_from(index).unwrap_or(u32::MAX),
                ),
                text: String::new(),
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
        }
    }

    /// Whether this is a chat answer (which starts with a role-only chunk when streamed).
    pub(crate) fn is_chat(&self) -> bool {
        self.dialect == Dialect::Chat
    }

    /// Tokens generated so far over all choices.
    pub(crate) fn generated(&self) -> u64 {
        self.choices.iter().map(|c| u64::from(c.generated)).sum()
    }

    /// Usage so far (prompt tokens summed over prompts).
    pub(crate) fn usage(&self) -> Usage {
        Usage::new(self.prompt_tokens, self.generated())
    }

    /// Records `count` new tokens of choice `index` and returns their text.
    pub(crate) fn add_tokens(
        &mut self,
        index: usize,
        count: u32,
        finished: Option<FinishReason>,
    ) -> String {
        let Some(choice) = self.choices.get_mut(index) else {
            return String::new();
        };
        let text = choice.words.words(count);
        if self.keep_text {
            choice.text.push_str(&text);
        }
        choice.generated += count;
        choice.finish = finished.or(choice.finish);
        text
    }

    fn chunk_usage(&self) -> Option<Usage> {
        self.continuous_usage.then(|| self.usage())
    }

    /// The role-only first chunk of a chat stream.
    pub(crate) fn role_event(&self) -> Bytes {
        let delta = ChatDelta {
            role: Some("assistant".to_string()),
            content: Some(String::new()),
        };
        sse(&self.chat_chunk(vec![chat_choice(0, delta, None)]))
    }

    /// The chunk carrying new text of choice `index` (and its finish reason with the last).
    pub(crate) fn delta_event(
        &self,
        index: usize,
        text: String,
        finished: Option<FinishReason>,
    ) -> Bytes {
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        let finish_reason = finished.map(|reason| reason.as_str().to_string());
        match self.dialect {
            Dialect::Chat => {
                let delta = ChatDelta {
                    role: None,
                    content: Some(text),
                };
                sse(&self.chat_chunk(vec![chat_choice(index, delta, finish_reason)]))
            }
            Dialect::Completions => {
                let choice = CompletionChoice {
                    index,
                    text,
                    logprobs: None,
                    finish_reason,
                };
                sse(&self.completion_chunk(vec![choice], self.chunk_usage()))
            }
        }
    }

    /// The final usage chunk (`choices: []`), when the client asked for it.
    pub(crate) fn usage_event(&self) -> Option<Bytes> {
        if !self.include_usage {
            return None;
        }
        Some(match self.dialect {
            Dialect::Chat => sse(&ChatCompletionChunk {
                usage: Some(self.usage()),
                ..self.chat_chunk(Vec::new())
            }),
            Dialect::Completions => sse(&self.completion_chunk(Vec::new(), Some(self.usage()))),
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
        let usage = self.usage();
        let AnswerHeader {
            id, created, model, ..
        } = self.header;
        let finish = |choice: &ChoiceText| choice.finish.map(|reason| reason.as_str().to_string());
        match self.dialect {
            Dialect::Chat => {
                let choices = self
                    .choices
                    .into_iter()
                    .zip(0..)
                    .map(|(choice, index)| ChatChoice {
                        index,
                        finish_reason: finish(&choice),
                        message: ChatMessage::new("assistant", choice.text),
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
            Dialect::Completions => {
                let choices = self
                    .choices
                    .into_iter()
                    .zip(0..)
                    .map(|(choice, index)| CompletionChoice {
                        index,
                        finish_reason: finish(&choice),
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
