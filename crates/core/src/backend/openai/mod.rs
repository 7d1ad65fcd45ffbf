//! [`OpenAiBackend`]: OpenAI-compatible `/v1/chat/completions` and `/v1/completions`,
//! streamed (SSE) or not, against vLLM, SGLang, TGI, llama.cpp and anything alike, and the
//! encoder APIs `/v1/embeddings` and `/v1/rerank` (`encoder`: one JSON body, items counted).
//! This file builds requests and sorts replies; `reply` reads bodies into the [`Exchange`].
//!
//! Body: `model` (omitted when empty), `messages` or `prompt`, `max_tokens`, `stream`,
//! `stream_options` (only when usage is asked for: `include_usage`, plus
//! `continuous_usage_stats: true` when continuous usage is on), and — for a fixed output
//! length — `ignore_eos: true` with `min_tokens = max_tokens` (sent only when the request has
//! a `max_tokens`: without one, ignoring EOS would generate up to the context limit). Keys of
//! [`OpenAiConfig::extra_body`] are merged last and win.
//!
//! The API key is sent as `authorization: Bearer …` (a sensitive header value) and is kept out
//! of the [`Exchange`], failure messages and `Debug` output.

mod encoder;
pub mod messages;
pub(crate) mod reply;
mod responses;
mod whole;

use std::fmt;

use bytes::Bytes;
use goodput_protocol::ChatMessage;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Uri};
use http_body_util::Full;
use serde_json::{Map, Value, json};
use thiserror::Error;

use super::{Activity, Backend, BoxFuture, RequestInput, RequestSpec};
use crate::http::{HttpClient, WatchArrivals};
use crate::record::{Exchange, Failure, OutcomeKind};

/// Which OpenAI API to call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApiKind {
    /// `/v1/chat/completions`.
    #[default]
    Chat,
    /// `/v1/completions`.
    Completions,
    /// `/v1/responses` (the OpenAI Responses API).
    Responses,
    /// `/v1/embeddings`: one vector per input, never streamed.
    Embeddings,
    /// `/v1/rerank`: a query scored against documents, never streamed.
    Rerank,
    /// `/v1/images/generations`: `n` images of one prompt, never streamed.
    Images,
    /// `/v1/messages` (the Anthropic Messages API): `x-api-key` and `anthropic-version`
    /// headers, typed stream events.
    Messages,
}

impl ApiKind {
    /// The endpoint below the API root.
    pub fn endpoint(self) -> &'static str {
        match self {
            ApiKind::Chat => "chat/completions",
            ApiKind::Completions => "completions",
            ApiKind::Responses => "responses",
            ApiKind::Embeddings => "embeddings",
            ApiKind::Rerank => "rerank",
            ApiKind::Messages => "messages",
            ApiKind::Images => "images/generations",
        }
    }

    /// The encoder API this is, if any (answers are one JSON body of items, never streamed).
    fn encoder(self) -> Option<encoder::Encoder> {
        match self {
            ApiKind::Embeddings => Some(encoder::Encoder::Embeddings),
            ApiKind::Rerank => Some(encoder::Encoder::Rerank),
            ApiKind::Images => Some(encoder::Encoder::Images),
            ApiKind::Chat | ApiKind::Completions | ApiKind::Responses | ApiKind::Messages => None,
        }
    }

    /// Whether answers can be streamed (the encoder APIs answer in one body).
    pub fn streams(self) -> bool {
        self.encoder().is_none()
    }

    /// What one item of a batch is called in reports: `inputs` (embeddings), `documents`
    /// (rerank), `prompts` (completions), else `items`.
    pub fn item_unit(self) -> &'static str {
        match self {
            ApiKind::Embeddings => "inputs",
            ApiKind::Rerank => "documents",
            ApiKind::Images => "images",
            ApiKind::Completions => "prompts",
            ApiKind::Chat | ApiKind::Responses | ApiKind::Messages => "items",
        }
    }
}

/// The body key of an image-generation request's denoising steps by default (diffusers'
/// name, taken by the servers built on it and by the embedded simulator).
pub const IMAGE_STEPS_KEY: &str = "num_inference_steps";

/// How to talk to the server.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// Chat or completions.
    pub api: ApiKind,
    /// `model` field; omitted when empty (servers then use their only model).
    pub model: String,
    /// Ask for a streamed (SSE) answer.
    pub stream: bool,
    /// Ask for a final usage chunk (`stream_options.include_usage`).
    pub include_usage: bool,
    /// Ask for cumulative usage on every chunk (vLLM `continuous_usage_stats`).
    pub continuous_usage: bool,
    /// Fixed output length: send `ignore_eos` and `min_tokens = max_tokens`.
    pub ignore_eos: bool,
    /// Extra body keys, merged last (they override goodput's).
    pub extra_body: Map<String, Value>,
    /// Extra request headers (they override goodput's).
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// API key, sent as a bearer token (as `x-api-key` on the Messages API).
    pub api_key: Option<String>,
    /// Sign every request with AWS SigV4 (SageMaker, Bedrock) instead of sending a key.
    pub sigv4: Option<crate::http::sigv4::SigV4>,
    /// Image generation: the body key of a request's denoising steps ([`IMAGE_STEPS_KEY`]
    /// unless the server names it otherwise).
    pub image_steps_key: String,
    /// Longest SSE line (and event) accepted.
    pub max_line_bytes: usize,
    /// Longest non-streamed response body accepted.
    pub max_body_bytes: usize,
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        OpenAiConfig {
            api: ApiKind::Chat,
            model: String::new(),
            stream: true,
            include_usage: true,
            continuous_usage: false,
            ignore_eos: false,
            extra_body: Map::new(),
            headers: Vec::new(),
            api_key: None,
            sigv4: None,
            image_steps_key: IMAGE_STEPS_KEY.to_string(),
            max_line_bytes: 4 << 20,
            max_body_bytes: 64 << 20,
        }
    }
}

use super::post::is_secret;

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let headers: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(name, value)| {
                let shown = if is_secret(name) || value.is_sensitive() {
                    "[redacted]"
                } else {
                    value.to_str().unwrap_or("[binary]")
                };
                (name.as_str(), shown)
            })
            .collect();
        f.debug_struct("OpenAiConfig")
            .field("api", &self.api)
            .field("model", &self.model)
            .field("stream", &self.stream)
            .field("include_usage", &self.include_usage)
            .field("continuous_usage", &self.continuous_usage)
            .field("ignore_eos", &self.ignore_eos)
            .field("extra_body", &self.extra_body)
            .field("headers", &headers)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("sigv4", &self.sigv4)
            .field("max_line_bytes", &self.max_line_bytes)
            .field("max_body_bytes", &self.max_body_bytes)
            .finish()
    }
}

/// Why an [`OpenAiConfig`] cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum OpenAiConfigError {
    /// The key has characters not allowed in an HTTP header (the key is not shown).
    #[error("the API key contains characters not allowed in an HTTP header (check for newlines)")]
    InvalidApiKey,
    /// A size limit of zero.
    #[error("`{0}` must be greater than zero")]
    ZeroLimit(&'static str),
}

/// The OpenAI-compatible backend.
pub struct OpenAiBackend {
    config: OpenAiConfig,
    client: HttpClient,
    uri: Uri,
    headers: HeaderMap,
    /// The API key and secret header values, removed from anything the server echoes back.
    secrets: Vec<String>,
}

impl fmt::Debug for OpenAiBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiBackend")
            .field("url", &self.client.target().url(self.config.api.endpoint()))
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl OpenAiBackend {
    /// A backend sending through `client` (whose target gives the API root).
    pub fn new(config: OpenAiConfig, client: HttpClient) -> Result<Self, OpenAiConfigError> {
        if config.max_line_bytes == 0 {
            return Err(OpenAiConfigError::ZeroLimit("max_line_bytes"));
        }
        if config.max_body_bytes == 0 {
            return Err(OpenAiConfigError::ZeroLimit("max_body_bytes"));
        }
        let mut headers = if config.api == ApiKind::Messages {
            anthropic_headers(config.api_key.as_deref(), &config.headers)
        } else {
            super::post::json_headers(config.api_key.as_deref(), &config.headers)
        }
        .ok_or(OpenAiConfigError::InvalidApiKey)?;
        if config.stream
            && config.api.streams()
            && !config.headers.iter().any(|(name, _)| name == ACCEPT)
        {
            headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        }
        let uri = client.target().endpoint(config.api.endpoint());
        let secrets = headers
            .iter()
            .filter(|(_, value)| value.is_sensitive())
            .filter_map(|(_, value)| value.to_str().ok())
            .flat_map(|value| [Some(value), value.strip_prefix("Bearer ")])
            .flatten()
            .filter(|secret| secret.len() >= 4)
            .map(str::to_string)
            .collect();
        Ok(OpenAiBackend {
            config,
            client,
            uri,
            headers,
            secrets,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// The JSON body for `spec`.
    pub fn body(&self, spec: &RequestSpec) -> Result<Map<String, Value>, Failure> {
        request_body(&self.config, spec)
    }

    fn request(&self, spec: &RequestSpec) -> Result<Request<Full<Bytes>>, Failure> {
        let body =
            serde_json::to_vec(&self.body(spec)?).map_err(|error| invalid(error.to_string()))?;
        let mut headers = self.headers.clone();
        super::post::insert_request_id(&mut headers, spec)?;
        if let Some(signer) = &self.config.sigv4 {
            let now = std::time::SystemTime::now();
            let target = (&Method::POST, self.client.target().authority(), &self.uri);
            signer
                .sign(target, &mut headers, &body, now)
                .map_err(|error| invalid(error.to_string()))?;
        }
        let mut request = Request::new(Full::new(Bytes::from(body)));
        *request.method_mut() = Method::POST;
        *request.uri_mut() = self.uri.clone();
        *request.headers_mut() = headers;
        if self.config.stream {
            request.extensions_mut().insert(WatchArrivals);
        }
        Ok(request)
    }

    async fn run(&self, spec: &RequestSpec, exchange: &mut Exchange, activity: &Activity) {
        let request = match self.request(spec) {
            Ok(request) => request,
            Err(failure) => return exchange.fail(failure),
        };
        let response = match self.client.send(request, exchange).await {
            Ok(response) => response,
            Err(failure) => return self.fail(exchange, failure),
        };
        activity.bump();
        self.scrub_headers(exchange);
        let (parts, body) = response.into_parts();
        super::post::note_server_id(&parts.headers, spec, exchange);
        let limits = reply::Limits {
            max_line_bytes: self.config.max_line_bytes,
            max_body_bytes: self.config.max_body_bytes,
            responses: self.config.api == ApiKind::Responses,
            messages: self.config.api == ApiKind::Messages,
            encoder: self
                .config
                .api
                .encoder()
                .map(|kind| (kind, encoder::inputs(&spec.input))),
        };
        if !parts.status.is_success() {
            let outcome = reply::read_error(parts.status, &parts.headers, body, activity).await;
            if let Err(failure) = outcome {
                self.fail(exchange, failure);
            }
            return;
        }
        let streamed = limits.encoder.is_none() && is_streamed(self.config.stream, &parts.headers);
        // The headers are not kept while the body streams (memory per stream in flight).
        drop(parts);
        let outcome = if streamed {
            reply::read_stream(body, exchange, activity, limits).await
        } else {
            whole::read_whole(body, exchange, activity, limits).await
        };
        if let Err(failure) = outcome {
            self.fail(exchange, failure);
        }
    }

    /// Records `failure` with any echo of a secret removed.
    fn fail(&self, exchange: &mut Exchange, mut failure: Failure) {
        failure.message = self.scrub(failure.message);
        exchange.fail(failure);
    }

    fn scrub(&self, mut text: String) -> String {
        for secret in &self.secrets {
            if text.contains(secret.as_str()) {
                text = text.replace(secret.as_str(), "[redacted]");
            }
        }
        text
    }

    fn scrub_headers(&self, exchange: &mut Exchange) {
        for (_, value) in &mut exchange.headers {
            *value = self.scrub(std::mem::take(value));
        }
    }
}

impl Backend for OpenAiBackend {
    fn send<'a>(
        &'a self,
        request: &'a RequestSpec,
        exchange: &'a mut Exchange,
        activity: &'a Activity,
    ) -> BoxFuture<'a, ()> {
        Box::pin(self.run(request, exchange, activity))
    }
}

/// The request's input under the key `api` takes it in: `messages`, `prompt` or `input`.
/// The JSON body `config` sends for `spec` (also what a virtual-time run hands the simulator).
pub fn request_body(
    config: &OpenAiConfig,
    spec: &RequestSpec,
) -> Result<Map<String, Value>, Failure> {
    let mut body = Map::new();
    let model = spec.tags.model.as_ref().unwrap_or(&config.model);
    if !model.is_empty() {
        body.insert("model".into(), Value::String(model.clone()));
    }
    if let Some(encoder) = config.api.encoder() {
        encoder::insert_input(&mut body, encoder, &spec.input)?;
        if let Some(generation) = &spec.tags.generation {
            encoder::insert_generation(&mut body, generation, &config.image_steps_key);
        }
        for (key, value) in &config.extra_body {
            body.insert(key.clone(), value.clone());
        }
        return Ok(body);
    }
    if config.api == ApiKind::Messages {
        messages::insert_input(&mut body, &spec.input)?;
        if spec.max_output_tokens.is_none() {
            return Err(invalid(
                "the Messages API requires max_tokens: give the workload an output length",
            ));
        }
    } else {
        insert_input(&mut body, config.api, &spec.input)?;
    }
    if let Some(max) = spec.max_output_tokens {
        let key = match config.api {
            ApiKind::Responses => "max_output_tokens",
            _ => "max_tokens",
        };
        body.insert(key.into(), json!(max));
        if config.ignore_eos {
            body.insert("ignore_eos".into(), Value::Bool(true));
            body.insert("min_tokens".into(), json!(max));
        }
    }
    body.insert("stream".into(), Value::Bool(config.stream));
    let usage_options = !matches!(config.api, ApiKind::Responses | ApiKind::Messages);
    if usage_options && config.stream && (config.include_usage || config.continuous_usage) {
        let mut options = Map::new();
        options.insert("include_usage".into(), Value::Bool(config.include_usage));
        if config.continuous_usage {
            options.insert("continuous_usage_stats".into(), Value::Bool(true));
        }
        body.insert("stream_options".into(), Value::Object(options));
    }
    for (key, value) in &config.extra_body {
        body.insert(key.clone(), value.clone());
    }
    Ok(body)
}

fn insert_input(
    body: &mut Map<String, Value>,
    api: ApiKind,
    input: &RequestInput,
) -> Result<(), Failure> {
    match (api, input) {
        (ApiKind::Chat, RequestInput::Text(text)) => {
            body.insert(
                "messages".into(),
                json!([{"role": "user", "content": text}]),
            );
        }
        (ApiKind::Chat, RequestInput::Messages(messages)) => {
            let messages =
                serde_json::to_value(messages).map_err(|error| invalid(error.to_string()))?;
            body.insert("messages".into(), messages);
        }
        (ApiKind::Chat, RequestInput::Batch(_)) => {
            return Err(invalid(
                "a batch of prompts needs the completions API; the chat API takes one conversation",
            ));
        }
        (ApiKind::Completions, RequestInput::Text(text)) => {
            body.insert("prompt".into(), Value::String(text.clone()));
        }
        (ApiKind::Completions, RequestInput::Messages(messages)) => {
            body.insert("prompt".into(), Value::String(flatten(messages)));
        }
        (ApiKind::Completions, RequestInput::Batch(prompts)) => {
            if prompts.is_empty() {
                return Err(invalid("empty batch of prompts"));
            }
            body.insert("prompt".into(), json!(prompts));
        }
        (ApiKind::Responses, RequestInput::Text(text)) => {
            body.insert("input".into(), Value::String(text.clone()));
        }
        (ApiKind::Responses, RequestInput::Messages(messages)) => {
            body.insert("input".into(), responses_input(messages)?);
        }
        (ApiKind::Responses, RequestInput::Batch(_)) => {
            return Err(invalid(
                "a batch of prompts needs the completions API; the Responses API takes one input",
            ));
        }
        (ApiKind::Embeddings | ApiKind::Rerank | ApiKind::Images | ApiKind::Messages, _) => {
            return Err(invalid(
                "the encoder and Messages APIs build their own bodies",
            ));
        }
    }
    Ok(())
}

/// The Messages API's headers: JSON, `x-api-key: KEY` (sensitive) when a key is given,
/// `anthropic-version`, then the user's own (which win, e.g. another `anthropic-version`).
fn anthropic_headers(
    api_key: Option<&str>,
    extra: &[(HeaderName, HeaderValue)],
) -> Option<HeaderMap> {
    let mut headers = super::post::json_headers(None, &[])?;
    if let Some(key) = api_key.filter(|key| !key.is_empty()) {
        let mut value = HeaderValue::from_str(key).ok()?;
        value.set_sensitive(true);
        headers.insert(HeaderName::from_static("x-api-key"), value);
    }
    headers.insert(
        HeaderName::from_static("anthropic-version"),
        HeaderValue::from_static(messages::ANTHROPIC_VERSION),
    );
    let user = super::post::json_headers(None, extra)?;
    for (name, value) in &user {
        if name != CONTENT_TYPE || extra.iter().any(|(given, _)| given == CONTENT_TYPE) {
            headers.insert(name.clone(), value.clone());
        }
    }
    Some(headers)
}

/// Whether to read the body as SSE: asked for and not plainly JSON, or announced as SSE.
fn is_streamed(asked: bool, headers: &HeaderMap) -> bool {
    let kind = headers
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("");
    let kind = kind.trim().to_ascii_lowercase();
    if kind.starts_with("text/event-stream") {
        true
    } else {
        asked && !kind.starts_with("application/json")
    }
}

/// A conversation as one completions prompt: `role: content` lines.
fn flatten(messages: &[ChatMessage]) -> String {
    let lines: Vec<String> = messages
        .iter()
        .map(|message| format!("{}: {}", message.role, message.content.text()))
        .collect();
    lines.join("\n")
}

/// Chat messages as Responses input items: `{role, content}` messages; a `tool` message
/// becomes a `function_call_output` (after the assistant's `function_call` items).
fn responses_input(messages: &[ChatMessage]) -> Result<Value, Failure> {
    let mut items = Vec::new();
    for message in messages {
        let text = message.content.text();
        match message.role.as_str() {
            "tool" => items.push(json!({
                "type": "function_call_output",
                "call_id": message.tool_call_id.clone().unwrap_or_default(),
                "output": text,
            })),
            role => {
                if role != "assistant" || !text.is_empty() {
                    items.push(json!({"role": role, "content": text}));
                }
                for call in message.tool_calls.iter().flatten() {
                    items.push(json!({
                        "type": "function_call",
                        "call_id": call.id,
                        "name": call.function.name,
                        "arguments": call.function.arguments,
                    }));
                }
            }
        }
    }
    Ok(Value::Array(items))
}

/// A request goodput cannot build (reported before anything is sent).
fn invalid(message: impl Into<String>) -> Failure {
    Failure::new(OutcomeKind::Invalid, message)
}
