//! [`TemplateBackend`]: any JSON API (`--api http`). Each request is a JSON body built from a
//! template whose string values may hold placeholders — `{{prompt}}` (the text; a batch's
//! prompts one per line), `{{prompts}}` (the batch as an array), `{{index}}`, `{{batch_size}}`,
//! `{{input_tokens}}`, `{{max_tokens}}` — POSTed to the target URL as given. A string that is
//! exactly one placeholder takes its typed value (a number, an array); inside longer text the
//! value is spliced in as text. The reply's items are counted by an [`ItemsPath`]; without one,
//! a request counts the inputs it sent. Input tokens come from a `usage` object when the reply
//! has one (`prompt_tokens`, `input_tokens` or `total_tokens`), else from the workload. A
//! streamed reply ([`StreamFormat`]) is read chunk by chunk (see [`stream`]).

mod path;
pub mod stream;

use std::fmt;

use http::header::{HeaderName, HeaderValue};
use http::{HeaderMap, Uri};
use serde_json::{Map, Value, json};
use tokio::time::Instant;

pub use self::path::{ItemsPath, PathError};
pub use self::stream::StreamFormat;
use super::post;
use super::{Activity, Backend, BoxFuture, RequestInput, RequestSpec};
use crate::http::HttpClient;
use crate::record::{Exchange, Failure, OutcomeKind};

/// The placeholders a template may use.
pub const PLACEHOLDERS: [&str; 6] = [
    "prompt",
    "prompts",
    "index",
    "batch_size",
    "input_tokens",
    "max_tokens",
];

/// A template that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// Not JSON.
    #[error("the request template is not JSON: {0}")]
    Json(String),
    /// A `{{name}}` goodput does not know.
    #[error("unknown placeholder `{{{{{0}}}}}` in the request template (known: {known})", known = PLACEHOLDERS.join(", "))]
    Unknown(String),
    /// A `{{` without its `}}`.
    #[error("unclosed `{{{{` in the request template: {0:?}")]
    Unclosed(String),
    /// A header or key that cannot be sent.
    #[error("the API key contains characters not allowed in an HTTP header")]
    InvalidApiKey,
}

/// A request body template with checked placeholders.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestTemplate {
    body: Value,
}

impl RequestTemplate {
    /// Parses `text` and checks every placeholder in it.
    pub fn parse(text: &str) -> Result<RequestTemplate, TemplateError> {
        let body: Value =
            serde_json::from_str(text).map_err(|error| TemplateError::Json(error.to_string()))?;
        check(&body)?;
        Ok(RequestTemplate { body })
    }

    /// The body for `spec`.
    pub fn render(&self, spec: &RequestSpec) -> Value {
        let values = Values::of(spec);
        render(&self.body, &values)
    }
}

fn check(value: &Value) -> Result<(), TemplateError> {
    match value {
        Value::String(text) => placeholders(text).map(|_| ()),
        Value::Array(items) => items.iter().try_for_each(check),
        Value::Object(map) => map.values().try_for_each(check),
        _ => Ok(()),
    }
}

/// The placeholders of `text`, in order, as `(start, end, name)` byte ranges of `{{name}}`.
fn placeholders(text: &str) -> Result<Vec<(usize, usize, &str)>, TemplateError> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(open) = text[from..].find("{{").map(|i| i + from) {
        let close = text[open..]
            .find("}}")
            .map(|i| i + open)
            .ok_or_else(|| TemplateError::Unclosed(text.to_string()))?;
        let name = text[open + 2..close].trim();
        if !PLACEHOLDERS.contains(&name) {
            return Err(TemplateError::Unknown(name.to_string()));
        }
        found.push((open, close + 2, name));
        from = close + 2;
    }
    Ok(found)
}

/// Placeholder values of one request.
struct Values {
    prompts: Vec<String>,
    index: u64,
    input_tokens: Option<u64>,
    max_tokens: Option<u64>,
}

impl Values {
    fn of(spec: &RequestSpec) -> Values {
        let prompts = match &spec.input {
            RequestInput::Text(text) => vec![text.clone()],
            RequestInput::Messages(messages) => messages.iter().map(|m| m.content.text()).collect(),
            RequestInput::Batch(prompts) => prompts.clone(),
        };
        Values {
            prompts,
            index: spec.index,
            input_tokens: spec.expected_input_tokens,
            max_tokens: spec.max_output_tokens,
        }
    }

    fn typed(&self, name: &str) -> Value {
        match name {
            "prompt" => json!(self.prompts.join("\n")),
            "prompts" => json!(self.prompts),
            "index" => json!(self.index),
            "batch_size" => json!(self.prompts.len()),
            "input_tokens" => json!(self.input_tokens),
            _ => json!(self.max_tokens),
        }
    }

    fn text(&self, name: &str) -> String {
        match self.typed(name) {
            Value::String(text) => text,
            Value::Array(_) => self.prompts.join("\n"),
            other => other.to_string(),
        }
    }
}

fn render(value: &Value, values: &Values) -> Value {
    match value {
        Value::String(text) => {
            let found = placeholders(text).unwrap_or_default();
            match found.as_slice() {
                [] => value.clone(),
                [(0, end, name)] if *end == text.len() => values.typed(name),
                _ => {
                    let mut out = String::new();
                    let mut last = 0;
                    for (start, end, name) in found {
                        out.push_str(&text[last..start]);
                        out.push_str(&values.text(name));
                        last = end;
                    }
                    out.push_str(&text[last..]);
                    Value::String(out)
                }
            }
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| render(v, values)).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| (k.clone(), render(v, values)))
                .collect::<Map<String, Value>>(),
        ),
        other => other.clone(),
    }
}

/// How to talk to a JSON API.
#[derive(Clone)]
pub struct TemplateConfig {
    /// The body template.
    pub template: RequestTemplate,
    /// Where the reply's items are; `None`: a request counts the inputs it sent.
    pub items: Option<ItemsPath>,
    /// How the reply streams.
    pub stream: StreamFormat,
    /// Where each SSE event's tokens are; `None`: chunks carry no token count.
    pub tokens: Option<ItemsPath>,
    /// Extra request headers.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// API key, sent as a bearer token.
    pub api_key: Option<String>,
    /// Sign every request with AWS SigV4 (a SageMaker endpoint's `invocations`).
    pub sigv4: Option<crate::http::sigv4::SigV4>,
    /// Longest reply body accepted.
    pub max_body_bytes: usize,
}

impl fmt::Debug for TemplateConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TemplateConfig")
            .field("template", &self.template)
            .field("items", &self.items)
            .field("stream", &self.stream)
            .field("tokens", &self.tokens)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("sigv4", &self.sigv4)
            .finish_non_exhaustive()
    }
}

/// The JSON-template backend.
#[derive(Debug)]
pub struct TemplateBackend {
    config: TemplateConfig,
    client: HttpClient,
    uri: Uri,
    headers: HeaderMap,
}

impl TemplateBackend {
    /// A backend POSTing to the target URL of `client`, exactly as given.
    pub fn new(config: TemplateConfig, client: HttpClient) -> Result<Self, TemplateError> {
        let headers = post::json_headers(config.api_key.as_deref(), &config.headers)
            .ok_or(TemplateError::InvalidApiKey)?;
        let uri = client.target().exact();
        Ok(TemplateBackend {
            config,
            client,
            uri,
            headers,
        })
    }

    async fn run(&self, spec: &RequestSpec, exchange: &mut Exchange, activity: &Activity) {
        let body = self.config.template.render(spec);
        let Some(mut body) = post::post_json(
            &self.client,
            (&self.uri, &self.headers, spec),
            &body,
            self.config.stream != StreamFormat::None,
            self.config.sigv4.as_ref(),
            exchange,
            activity,
        )
        .await
        else {
            return;
        };
        let limit = self.config.max_body_bytes;
        if self.config.stream != StreamFormat::None {
            let tokens = self.config.tokens.as_ref();
            let format = self.config.stream;
            exchange.untokenized = true;
            let kept = stream::read(&mut body, format, tokens, limit, activity, exchange).await;
            let result = kept.and_then(|kept| self.record(&kept, None, spec, exchange));
            if let Err(failure) = result {
                exchange.fail(failure);
            }
            return;
        }
        let bytes = match post::read_whole(&mut body, limit, activity, exchange).await {
            Ok(bytes) => bytes,
            Err(failure) => return exchange.fail(failure),
        };
        if let Err(failure) = self.record(&bytes, Some(body.received_at()), spec, exchange) {
            exchange.fail(failure);
        }
    }

    /// Counts the items of a 2xx reply; a whole one (not streamed) arrived at `whole`.
    fn record(
        &self,
        bytes: &[u8],
        whole: Option<Instant>,
        spec: &RequestSpec,
        exchange: &mut Exchange,
    ) -> Result<(), Failure> {
        let parsed = serde_json::from_slice::<Value>(bytes);
        let items = match (&self.config.items, &parsed) {
            (None, _) => u64::from(spec.items()),
            (Some(path), Ok(value)) => path.count(value).ok_or_else(|| {
                let start: String = String::from_utf8_lossy(bytes).chars().take(120).collect();
                Failure::new(
                    OutcomeKind::Protocol,
                    format!("the items path `{path}` found nothing in the response (body starts: {start:?})"),
                )
            })?,
            (Some(_), Err(error)) => {
                return Err(Failure::new(
                    OutcomeKind::Protocol,
                    format!("the response is not JSON, so no items can be counted: {error}"),
                ));
            }
        };
        exchange.choices = u32::try_from(items).unwrap_or(u32::MAX);
        exchange.untokenized = true;
        if let Some(now) = whole {
            exchange.push_output(now, "", Some(0));
        }
        if let Ok(value) = &parsed {
            let usage = value.get("usage");
            let count = |key: &str| usage.and_then(|u| u.get(key)).and_then(Value::as_u64);
            let tokens = count("prompt_tokens")
                .or_else(|| count("input_tokens"))
                .or_else(|| count("total_tokens"));
            exchange.usage = tokens.map(|t| goodput_protocol::Usage::new(t, 0));
        }
        Ok(())
    }
}

impl Backend for TemplateBackend {
    fn send<'a>(
        &'a self,
        request: &'a RequestSpec,
        exchange: &'a mut Exchange,
        activity: &'a Activity,
    ) -> BoxFuture<'a, ()> {
        Box::pin(self.run(request, exchange, activity))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn spec(input: RequestInput) -> RequestSpec {
        RequestSpec {
            index: 7,
            input,
            expected_input_tokens: Some(12),
            max_output_tokens: None,
            turn: None,
            tags: Default::default(),
        }
    }

    #[test]
    fn placeholders_typed_and_spliced() {
        let template = RequestTemplate::parse(
            r#"{"inputs": "{{prompts}}", "text": "Q: {{prompt}} #{{index}}", "n": "{{batch_size}}", "t": "{{input_tokens}}", "m": "{{max_tokens}}", "k": [1, "x"]}"#,
        )
        .unwrap();
        let body = template.render(&spec(RequestInput::Batch(vec!["a".into(), "b".into()])));
        assert_eq!(
            body,
            json!({"inputs": ["a", "b"], "text": "Q: a\nb #7", "n": 2, "t": 12, "m": null, "k": [1, "x"]})
        );
    }

    #[test]
    fn bad_templates_are_refused() {
        assert!(matches!(
            RequestTemplate::parse("{"),
            Err(TemplateError::Json(_))
        ));
        let unknown = RequestTemplate::parse(r#"{"a": "{{promt}}"}"#).unwrap_err();
        assert!(unknown.to_string().contains("`{{promt}}`"), "{unknown}");
        assert!(matches!(
            RequestTemplate::parse(r#"{"a": "{{prompt"}"#),
            Err(TemplateError::Unclosed(_))
        ));
    }
}
