//! Exact-length prompts counted by the target's own `/tokenize`: the simulator's vLLM-shaped
//! endpoint, and scripted llama.cpp and TGI servers (dialect detection by fallback), plus a
//! target without the endpoint. Loopback only.
#![allow(clippy::unwrap_used)]

#[path = "support/wire_server.rs"]
mod wire_server;

use goodput_core::http::{HttpClient, HttpConfig, Target};
use goodput_core::tokens::{Tiktoken, TokenCounter};
use goodput_core::workload::tokenize::{LengthCounter, RemoteTokenizer, TokenizeApi};
use goodput_sim::config::{PromptTokenizer, SimConfig};
use http::HeaderMap;
use http::header::{AUTHORIZATION, HeaderValue};
use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;
use serde_json::{Value, json};
use wire_server::{State, Step, TcpServer, response};

fn client(url: &str) -> HttpClient {
    HttpClient::tcp(Target::parse(url).unwrap(), HttpConfig::default())
}

#[tokio::test]
async fn the_simulators_tokenize_builds_prompts_of_exact_length() {
    let config = SimConfig {
        prompt_tokenizer: PromptTokenizer::Cl100k,
        ..goodput_sim::config::SimConfig::default()
    };
    let running = goodput_sim::spawn(config, ([127, 0, 0, 1], 0).into())
        .await
        .unwrap();
    let url = format!("{}/v1", running.base_url());
    let remote = RemoteTokenizer::connect(client(&url), "m", HeaderMap::new(), None)
        .await
        .unwrap();
    assert_eq!(remote.api(), TokenizeApi::Vllm);
    assert_eq!(remote.count("hello world again").await.unwrap(), 3);
    let counter = LengthCounter::Remote(Box::new(remote.clone()));
    let vocabulary = counter.vocabulary().await.unwrap();
    assert_eq!(vocabulary.tokenizer(), "server:vllm");
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let prompts: Vec<String> = [1, 9, 300]
        .iter()
        .map(|&n| vocabulary.prompt(&mut rng, n))
        .collect();
    assert_eq!(remote.count_all(&prompts).await.unwrap(), vec![1, 9, 300]);
    let local = Tiktoken::cl100k();
    for prompt in &prompts {
        assert_eq!(local.count(prompt), remote.count(prompt).await.unwrap());
    }
    running.shutdown_and_wait().await.unwrap();
}

/// A server answering `/tokenize` in one dialect only (whitespace words, plus a BOS token),
/// refusing the others as real servers do.
fn dialect_server(dialect: &'static str) -> State {
    State::new(move |_, request| {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let words = |key: &str| {
            body.get(key)
                .and_then(Value::as_str)
                .map(|text| text.split_whitespace().count() + 1)
        };
        let answer = match dialect {
            "llamacpp" => words("content").map(|n| json!({"tokens": vec![7; n]})),
            _ => words("inputs").map(|n| json!(vec![json!({"id": 1, "text": "x"}); n])),
        };
        let bytes = match answer {
            Some(answer) if request.head.starts_with("POST /tokenize ") => response(
                "200 OK",
                "content-type: application/json\r\n",
                &answer.to_string(),
            ),
            _ => response("422 Unprocessable Entity", "", "{\"error\":\"bad body\"}"),
        };
        vec![Step::Write(bytes)]
    })
}

#[tokio::test]
async fn llama_cpp_and_tgi_dialects_are_found_by_fallback() {
    for (dialect, api) in [
        ("llamacpp", TokenizeApi::LlamaCpp),
        ("tgi", TokenizeApi::Tgi),
    ] {
        let server = TcpServer::start(dialect_server(dialect)).await;
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, HeaderValue::from_static("Bearer k-123"));
        let remote = RemoteTokenizer::connect(client(&server.url()), "m", headers, None)
            .await
            .unwrap();
        assert_eq!(remote.api(), api);
        let vocabulary = LengthCounter::Remote(Box::new(remote.clone()))
            .vocabulary()
            .await
            .unwrap();
        assert_eq!(
            vocabulary.min_tokens(),
            2,
            "{dialect}: the BOS token is counted"
        );
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
        let prompt = vocabulary.prompt(&mut rng, 50);
        assert_eq!(remote.count(&prompt).await.unwrap(), 50);
        let requests = server.state.requests();
        assert!(
            requests
                .iter()
                .all(|r| r.head.starts_with("POST /tokenize "))
        );
        assert!(
            requests
                .iter()
                .all(|r| r.header("authorization").as_deref() == Some("Bearer k-123"))
        );
    }
}

#[tokio::test]
async fn a_target_without_tokenize_says_what_to_do() {
    let state = State::new(|_, _| {
        vec![Step::Write(response(
            "404 Not Found",
            "",
            "{\"detail\":\"Not Found\"}",
        ))]
    });
    let server = TcpServer::start(state).await;
    let error = RemoteTokenizer::connect(client(&server.url()), "m", HeaderMap::new(), None)
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("/tokenize"), "{error}");
    assert!(error.contains("404"), "{error}");
    assert!(error.contains("--tokenizer cl100k_base"), "{error}");
    let forced = RemoteTokenizer::connect(
        client(&server.url()),
        "m",
        HeaderMap::new(),
        Some(TokenizeApi::Tgi),
    )
    .await
    .unwrap_err();
    assert!(forced.message.contains("tgi"), "{forced}");
}
