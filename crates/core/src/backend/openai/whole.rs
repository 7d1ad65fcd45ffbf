//! A whole (not streamed) chat or completion reply: read up to its size limit, parsed once,
//! its output recorded as arriving when the body ended.

use std::borrow::Cow;

use goodput_protocol::Usage;
use goodput_protocol::stream::ServerTimings;
use serde::Deserialize;
use serde_json::Value;
use tokio::time::Instant;

use super::reply::{Limits, error_text, stream_error};
use crate::backend::{Activity, post};
use crate::http::ResponseBody;
use crate::record::{Exchange, Failure, OutcomeKind, OutputParts};

#[derive(Deserialize)]
struct WholeView<'a> {
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    choices: Option<Vec<WholeChoice<'a>>>,
    #[serde(default)]
    usage: Option<Usage>,
    #[serde(default)]
    timings: Option<ServerTimings>,
    #[serde(default)]
    error: Option<Value>,
    #[serde(default, borrow)]
    object: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct WholeChoice<'a> {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    message: Option<WholeMessage>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct WholeMessage {
    #[serde(default)]
    content: Option<Value>,
    #[serde(default)]
    reasoning_content: Option<String>,
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<Value>>,
}

/// The output of a whole answer, by channel.
#[derive(Default)]
struct WholeText {
    reasoning: String,
    answer: String,
    tool: String,
    tool_calls: Vec<(u32, bool)>,
}

impl WholeChoice<'_> {
    /// Reasoning, content (chat) or the completion text, and tool calls.
    fn append_text(&self, out: &mut WholeText) {
        if let Some(text) = &self.text {
            out.answer.push_str(text);
        }
        let Some(message) = &self.message else { return };
        for reasoning in [&message.reasoning_content, &message.reasoning]
            .into_iter()
            .flatten()
        {
            out.reasoning.push_str(reasoning);
        }
        match &message.content {
            Some(Value::String(text)) => out.answer.push_str(text),
            Some(Value::Array(parts)) => {
                parts
                    .iter()
                    .filter_map(|part| part.get("text")?.as_str())
                    .for_each(|text| out.answer.push_str(text));
            }
            _ => {}
        }
        for (position, call) in message.tool_calls.iter().flatten().enumerate() {
            let function = call.get("function");
            for key in ["name", "arguments"] {
                if let Some(text) = function.and_then(|f| f.get(key)).and_then(Value::as_str) {
                    out.tool.push_str(text);
                }
            }
            let index = u32::try_from(position).unwrap_or(u32::MAX);
            out.tool_calls.push((index, call.get("id").is_some()));
        }
    }
}

/// A 2xx JSON reply, read whole; its output counts as arriving when the body ended.
pub(super) async fn read_whole(
    mut body: ResponseBody,
    exchange: &mut Exchange,
    activity: &Activity,
    limits: Limits,
) -> Result<(), Failure> {
    let bytes = post::read_whole(&mut body, limits.max_body_bytes, activity, exchange).await?;
    let arrived = body.received_at();
    if limits.messages {
        return super::messages::record_whole(&bytes, arrived, exchange);
    }
    if limits.responses {
        return super::responses::record_whole(&bytes, arrived, exchange);
    }
    if let Some((encoder, sent)) = limits.encoder {
        return super::encoder::record_whole(&bytes, arrived, exchange, encoder, sent);
    }
    record_whole(&bytes, arrived, exchange)
}

/// Records a whole JSON answer that arrived at `now`.
fn record_whole(bytes: &[u8], now: Instant, exchange: &mut Exchange) -> Result<(), Failure> {
    let view: WholeView<'_> = serde_json::from_slice(bytes).map_err(|error| {
        Failure::new(
            OutcomeKind::Protocol,
            format!("invalid JSON response body: {error}"),
        )
    })?;
    let has_error = view.error.as_ref().is_some_and(|error| !error.is_null());
    if has_error || view.object.as_deref() == Some("error") {
        let whole: Value = serde_json::from_slice(bytes).unwrap_or(Value::Null);
        return Err(stream_error(&error_text(&whole)));
    }
    let Some(choices) = view.choices else {
        return Err(Failure::new(
            OutcomeKind::Protocol,
            "response has no `choices`",
        ));
    };
    let mut text = WholeText::default();
    for (position, choice) in choices.iter().enumerate() {
        let index = choice
            .index
            .unwrap_or(u32::try_from(position).unwrap_or(u32::MAX));
        exchange.choices = exchange.choices.max(index.saturating_add(1));
        choice.append_text(&mut text);
        if let Some(reason) = &choice.finish_reason {
            exchange.finish_reason = Some(reason.to_string());
        }
    }
    let tokens = view.usage.map(|usage| usage.completion_tokens);
    let any_text = [&text.reasoning, &text.answer, &text.tool]
        .iter()
        .any(|part| !part.is_empty());
    if any_text || !text.tool_calls.is_empty() || tokens.is_some_and(|tokens| tokens > 0) {
        let parts = OutputParts {
            reasoning: &text.reasoning,
            answer: &text.answer,
            tool: &text.tool,
            tool_calls: &text.tool_calls,
        };
        exchange.push_parts(now, 0, parts, tokens);
    }
    exchange.usage = view.usage;
    exchange.server_timings = view.timings;
    exchange.response_id = view.id.filter(|id| !id.is_empty()).map(Cow::into_owned);
    Ok(())
}
