//! One session's conversation so far, as the client sends it: the messages, including the
//! server's *actual* replies (a reply that ended in a tool call is answered by a `tool`
//! message), and their token count as the workload counts it (content only). The live runner
//! and virtual-time runs build every turn's request from it.

use goodput_protocol::ChatMessage;
use goodput_protocol::ToolCall;
use goodput_protocol::chat::FunctionCall;

use super::image::{Image, Resolution, content_with_images};
use super::session::Turn;
use crate::backend::{RequestInput, RequestSpec};

/// The messages of a session so far and their token count.
#[derive(Debug, Clone)]
pub struct History {
    messages: Vec<ChatMessage>,
    tokens: Option<u64>,
    /// The last reply, not yet in `messages`, and whether it ended in a tool call.
    reply: Option<(String, bool)>,
    session: u64,
    /// The sizes of the images in `messages` (vision prompts), in order.
    images: Vec<Resolution>,
}

/// A turn's request and what the workload knows about it.
#[derive(Debug, Clone)]
pub struct TurnRequest {
    /// The request (the whole history and the new message).
    pub spec: RequestSpec,
    /// Tokens of the history before this turn (`None`: uncounted or none).
    pub expected_prefix_tokens: Option<u64>,
    /// The turn was sent as a tool's result.
    pub tool_result: bool,
    /// The sizes of every image the request carries (this turn's and the history's).
    pub images: Vec<Resolution>,
}

impl History {
    /// A session with an optional system prompt (and its token count).
    pub fn new(system: Option<(String, Option<u64>)>, session: u64) -> Self {
        let (messages, tokens) = match system {
            Some((system, tokens)) => (vec![ChatMessage::new("system", system)], tokens),
            None => (Vec::new(), Some(0)),
        };
        History {
            messages,
            tokens,
            reply: None,
            session,
            images: Vec::new(),
        }
    }

    /// The request of turn `turn_index` (`turn`), sent as request `index`, its user message
    /// carrying `images` as `image_url` parts (a tool result carries none: only user
    /// messages take images). The history keeps them, so later turns re-send them.
    pub fn request(
        &mut self,
        turn: &Turn,
        turn_index: usize,
        index: u64,
        images: &[Image],
    ) -> TurnRequest {
        let prefix = self.tokens;
        let tool_result = self.add_turn(turn, turn_index);
        if !tool_result
            && !images.is_empty()
            && let Some(last) = self.messages.last_mut()
        {
            let chosen: Vec<&Image> = images.iter().collect();
            last.content = content_with_images(&turn.user, &chosen);
            self.images.extend(images.iter().map(|image| image.size));
        }
        TurnRequest {
            spec: RequestSpec {
                index,
                input: RequestInput::Messages(self.messages.clone()),
                expected_input_tokens: add(prefix, turn.user_tokens),
                max_output_tokens: turn.max_output_tokens,
                turn: u32::try_from(turn_index).ok(),
                tags: Default::default(),
            },
            expected_prefix_tokens: prefix.filter(|tokens| *tokens > 0),
            tool_result,
            images: self.images.clone(),
        }
    }

    /// Notes the server's reply to `request` (`output_tokens` long; `called_tool` when it
    /// ended in a tool call), to be sent with the next turn.
    pub fn answered(
        &mut self,
        request: &TurnRequest,
        reply: String,
        called_tool: bool,
        output_tokens: u64,
    ) {
        self.reply = Some((reply, called_tool));
        self.tokens = add(request.spec.expected_input_tokens, Some(output_tokens));
    }

    /// Appends the previous reply and `turn`'s message. A turn the workload made a tool result,
    /// or any turn after a reply that ended in a tool call, is sent as the `tool` message
    /// answering a call on the previous reply; returns whether it was.
    fn add_turn(&mut self, turn: &Turn, turn_index: usize) -> bool {
        let (reply, called_tool) = self.reply.take().unwrap_or_default();
        let tool = turn_index > 0 && (turn.tool_result || called_tool);
        if turn_index > 0 {
            let mut assistant = ChatMessage::new("assistant", reply);
            if tool {
                assistant.tool_calls = Some(vec![ToolCall {
                    id: self.call_id(turn_index),
                    kind: "function".to_string(),
                    function: FunctionCall {
                        name: "lookup".to_string(),
                        arguments: "{}".to_string(),
                    },
                }]);
            }
            self.messages.push(assistant);
        }
        if tool {
            let mut result = ChatMessage::new("tool", turn.user.clone());
            result.tool_call_id = Some(self.call_id(turn_index));
            self.messages.push(result);
        } else {
            self.messages
                .push(ChatMessage::new("user", turn.user.clone()));
        }
        tool
    }

    fn call_id(&self, turn_index: usize) -> String {
        format!("call_{}_{turn_index}", self.session)
    }
}

fn add(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    Some(a? + b?)
}
