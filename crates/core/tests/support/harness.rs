//! Shared test harness: chunk payloads as vLLM-style servers send them, and helpers that run
//! one request through an [`OpenAiBackend`] with a bound on its duration.
#![allow(dead_code, clippy::unwrap_used)]

use std::time::Duration;

use goodput_core::backend::openai::{ApiKind, OpenAiBackend, OpenAiConfig};
use goodput_core::backend::{Activity, Backend, RequestInput, RequestSpec};
use goodput_core::http::{HttpClient, HttpConfig, Target};
use goodput_core::record::{Exchange, OutcomeKind};

use crate::wire_server::{State, Step, TcpServer, sse};

pub(crate) const ROLE: &str = "data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n";
pub(crate) const DONE: &str = "data: [DONE]\n\n";

pub(crate) fn content(text: &str, finish: Option<&str>) -> String {
    let finish = finish.map_or("null".to_string(), |reason| format!("\"{reason}\""));
    format!(
        "data: {{\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}},\"logprobs\":null,\"finish_reason\":{finish}}}]}}\n\n"
    )
}

pub(crate) fn usage(prompt: u64, completion: u64, choices: &str) -> String {
    format!(
        "data: {{\"id\":\"chatcmpl-1\",{choices}\"usage\":{{\"prompt_tokens\":{prompt},\"completion_tokens\":{completion},\"total_tokens\":{}}}}}\n\n",
        prompt + completion
    )
}

pub(crate) fn config(api: ApiKind) -> OpenAiConfig {
    OpenAiConfig {
        api,
        model: "m".into(),
        ..OpenAiConfig::default()
    }
}

pub(crate) fn backend_at(url: &str, config: OpenAiConfig) -> OpenAiBackend {
    let client = HttpClient::tcp(Target::parse(url).unwrap(), HttpConfig::default());
    OpenAiBackend::new(config, client).unwrap()
}

pub(crate) fn spec(input: RequestInput) -> RequestSpec {
    RequestSpec {
        index: 0,
        input,
        expected_input_tokens: None,
        max_output_tokens: Some(16),
        turn: None,
        tags: Default::default(),
    }
}

pub(crate) fn text_spec() -> RequestSpec {
    spec(RequestInput::Text("Say hello".into()))
}

pub(crate) async fn send(backend: &dyn Backend, spec: &RequestSpec) -> Exchange {
    let mut exchange = Exchange::default();
    let activity = Activity::default();
    tokio::time::timeout(
        Duration::from_secs(20),
        backend.send(spec, &mut exchange, &activity),
    )
    .await
    .expect("the backend must finish on its own");
    if exchange.status.is_some() {
        assert!(activity.count() > 0);
    }
    exchange
}

/// One request against a server answering every request with `steps`.
pub(crate) async fn exchange_with(config: OpenAiConfig, steps: Vec<Step>) -> (Exchange, State) {
    let server = TcpServer::start(State::new(move |_, _| steps.clone())).await;
    let backend = backend_at(&server.url(), config);
    (send(&backend, &text_spec()).await, server.state.clone())
}

pub(crate) async fn stream(pieces: &[&str]) -> Exchange {
    exchange_with(config(ApiKind::Chat), sse(pieces)).await.0
}

pub(crate) fn failure(exchange: &Exchange) -> (OutcomeKind, String) {
    let failure = exchange.failure.clone().expect("a failure");
    (failure.kind, failure.message)
}

/// A short successful stream.
pub(crate) fn ok_stream() -> Vec<Step> {
    sse(&[ROLE, &content("ok", Some("stop")), DONE])
}
