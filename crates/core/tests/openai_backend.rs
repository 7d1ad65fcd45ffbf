//! The OpenAI backend against scripted servers reproducing what vLLM, SGLang, TGI and
//! llama.cpp really send, plus broken ones (resets, bad bytes, error objects, oversized lines).
//! Loopback only, bounded, deterministic. Connection handling is in `http_client.rs`.
#![allow(clippy::unwrap_used)]

#[path = "support/harness.rs"]
mod harness;
#[path = "support/wire_server.rs"]
mod wire_server;

use std::sync::atomic::Ordering;
use std::time::Duration;

use goodput_core::backend::RequestInput;
use goodput_core::backend::openai::{ApiKind, OpenAiBackend, OpenAiConfig};
use goodput_core::http::{HttpClient, HttpConfig, Target};
use goodput_core::record::OutcomeKind;
use goodput_protocol::ChatMessage;
use harness::*;
use serde_json::json;
use wire_server::{LAST_CHUNK, State, Step, TcpServer, chunk, response, sse, sse_head};

#[tokio::test]
async fn vllm_chat_role_chunk_is_not_a_token_and_request_is_well_formed() {
    let (hello, bang, usage) = (
        content("Hello", None),
        content("!", Some("stop")),
        usage(12, 2, "\"choices\":[],"),
    );
    let mut steps = vec![
        Step::Write(sse_head("x-request-id: abc\r\n")),
        Step::Write(chunk(ROLE.as_bytes())),
    ];
    steps.push(Step::Sleep(Duration::from_millis(30)));
    for piece in [&hello, &bang, &usage, DONE] {
        steps.push(Step::Write(chunk(piece.as_bytes())));
    }
    steps.push(Step::Write(LAST_CHUNK.to_vec()));
    let mut config = config(ApiKind::Chat);
    config.ignore_eos = true;
    config.api_key = Some("sk-test".into());
    config.extra_body.insert("temperature".into(), json!(0));
    let (exchange, state) = exchange_with(config, steps).await;
    assert_eq!(exchange.failure, None);
    assert_eq!(
        (exchange.status, exchange.text.as_str(), exchange.choices),
        (Some(200), "Hello!", 1)
    );
    assert_eq!(exchange.chunks.len(), 2);
    let first = exchange.chunks[0].at();
    assert!(exchange.first_event_at.unwrap() + Duration::from_millis(30) <= first);
    assert!(exchange.sent_at.unwrap() <= exchange.response_at.unwrap());
    assert_eq!(exchange.usage.unwrap().completion_tokens, 2);
    assert_eq!(exchange.finish_reason.as_deref(), Some("stop"));
    assert!(
        exchange
            .headers
            .contains(&("x-request-id".into(), "abc".into()))
    );
    assert!(exchange.connect_time.is_some() && !exchange.reused_connection);
    assert_chat_request_shape(&state.requests()[0]);
}

/// The request goodput sent: its path, headers and the body with every option set.
fn assert_chat_request_shape(request: &wire_server::Captured) {
    assert!(
        request
            .head
            .starts_with("POST /v1/chat/completions HTTP/1.1\r\n")
    );
    assert_eq!(
        request.header("accept").as_deref(),
        Some("text/event-stream")
    );
    assert_eq!(
        request.header("content-type").as_deref(),
        Some("application/json")
    );
    assert_eq!(
        request.header("authorization").as_deref(),
        Some("Bearer sk-test")
    );
    assert!(request.header("host").unwrap().starts_with("127.0.0.1:"));
    assert_eq!(
        request.json(),
        json!({"model": "m", "messages": [{"role": "user", "content": "Say hello"}], "max_tokens": 16,
               "ignore_eos": true, "min_tokens": 16, "stream": true,
               "stream_options": {"include_usage": true}, "temperature": 0})
    );
}

#[tokio::test]
async fn vllm_completions_with_null_usage_and_prompt_shapes() {
    let piece = |text: &str, finish: &str| {
        format!(
            "data: {{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{{\"index\":0,\"text\":\"{text}\",\"logprobs\":null,\"finish_reason\":{finish},\"stop_reason\":null}}],\"usage\":null}}\n\n"
        )
    };
    let pieces = [
        piece(" Hello", "null"),
        piece("!", "\"length\""),
        usage(5, 2, "\"choices\":[],"),
        DONE.into(),
    ];
    let steps = sse(&pieces.iter().map(String::as_str).collect::<Vec<_>>());
    let server = TcpServer::start(State::new(move |_, _| steps.clone())).await;
    let mut config = config(ApiKind::Completions);
    config.continuous_usage = true;
    config.extra_body.insert("max_tokens".into(), json!(99));
    let backend = backend_at(&format!("http://{}", server.addr), config);
    let exchange = send(&backend, &text_spec()).await;
    assert_eq!(
        (exchange.failure.clone(), exchange.text.as_str()),
        (None, " Hello!")
    );
    let usage: Vec<_> = exchange
        .chunks
        .iter()
        .map(|c| c.cumulative_tokens())
        .collect();
    assert_eq!(usage, [None, None]);
    assert_eq!(exchange.finish_reason.as_deref(), Some("length"));
    let messages = vec![
        ChatMessage::new("system", "Be brief."),
        ChatMessage::new("user", "Hi"),
    ];
    send(&backend, &spec(RequestInput::Messages(messages))).await;
    send(
        &backend,
        &spec(RequestInput::Batch(vec!["a".into(), "b".into()])),
    )
    .await;
    let requests = server.state.requests();
    assert!(requests[0].head.starts_with("POST /v1/completions "));
    let body = requests[0].json();
    assert_eq!(
        (&body["prompt"], &body["max_tokens"]),
        (&json!("Say hello"), &json!(99))
    );
    assert_eq!(
        body["stream_options"],
        json!({"include_usage": true, "continuous_usage_stats": true})
    );
    assert_eq!(
        requests[1].json()["prompt"],
        json!("system: Be brief.\nuser: Hi")
    );
    assert_eq!(requests[2].json()["prompt"], json!(["a", "b"]));
}

#[tokio::test]
async fn tgi_role_on_every_delta_keep_alives_and_no_space() {
    let delta = |text: &str, finish: &str| {
        format!(
            "data:{{\"object\":\"chat.completion.chunk\",\"id\":\"\",\"choices\":[{{\"index\":0,\"delta\":{{\"role\":\"assistant\",\"content\":\"{text}\"}},\"logprobs\":null,\"finish_reason\":{finish}}}],\"usage\":null}}\n\n"
        )
    };
    let (a, b, eos) = (
        delta("Hi", "null"),
        delta(" there", "null"),
        delta("", "\"length\""),
    );
    let exchange = stream(&[
        ": keep-alive\n\n",
        &a,
        ":\n\n",
        &b,
        &eos,
        &usage(3, 3, "\"choices\":[],"),
        "data:[DONE]\n\n",
    ])
    .await;
    assert_eq!(
        (exchange.failure.clone(), exchange.text.as_str()),
        (None, "Hi there")
    );
    assert_eq!(
        exchange.chunks.len(),
        2,
        "the EOS chunk with empty content is not output"
    );
    assert_eq!(exchange.finish_reason.as_deref(), Some("length"));
    assert_eq!(exchange.first_event_at, Some(exchange.chunks[0].at()));
}

#[tokio::test]
async fn llama_cpp_finish_chunk_timings_and_done_without_newline() {
    let role = r#"data: {"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"object":"chat.completion.chunk"}"#;
    let finish = r#"data: {"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"object":"chat.completion.chunk"}"#;
    let last = r#"data: {"choices":[],"usage":{"completion_tokens":2,"prompt_tokens":4,"total_tokens":6},"timings":{"cache_n":1,"prompt_n":3,"prompt_ms":4.5,"predicted_n":2,"predicted_ms":9.0}}"#;
    let pieces = [
        format!("{role}\n\n"),
        content("a", None),
        content("b", None),
        format!("{finish}\n\n"),
        format!("{last}\n\n"),
    ];
    let mut pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
    pieces.push("data: [DONE]");
    let exchange = stream(&pieces).await;
    assert_eq!(
        (exchange.failure.clone(), exchange.text.as_str()),
        (None, "ab")
    );
    assert_eq!(exchange.finish_reason.as_deref(), Some("stop"));
    let timings = exchange.server_timings.unwrap();
    assert_eq!(
        (timings.prompt_n, timings.predicted_ms, timings.cache_n),
        (Some(3.0), Some(9.0), Some(1.0))
    );
}

#[tokio::test]
async fn llama_cpp_error_field_is_a_stream_error() {
    let error = "error: {\"code\":400,\"message\":\"the request exceeds the available context size, try increasing it\",\"type\":\"exceed_context_size_error\"}\n\n";
    let exchange = stream(&[error, DONE]).await;
    let (kind, message) = failure(&exchange);
    assert_eq!(kind, OutcomeKind::StreamError);
    assert!(
        message.contains(
            "exceeds the available context size, try increasing it (exceed_context_size_error)"
        ),
        "{message}"
    );
    assert!(exchange.first_event_at.is_some() && exchange.chunks.is_empty());
}

#[tokio::test]
async fn sglang_duplicate_finish_and_split_lines() {
    let last = content("!", Some("stop"));
    let finish =
        r#"data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop","matched_stop":2}]}"#;
    let (head, tail) = last.split_at(17);
    let exchange = stream(&[
        ROLE,
        &content("Hi", None),
        head,
        tail,
        &format!("{finish}\r\n\r\n"),
        DONE,
    ])
    .await;
    assert_eq!(
        (exchange.failure.clone(), exchange.text.as_str()),
        (None, "Hi!")
    );
    assert_eq!(exchange.chunks.len(), 2);
}

#[tokio::test]
async fn multi_token_chunks_continuous_usage_and_several_choices() {
    let piece = |choices: &str, tokens: u64| {
        format!(
            "data: {{\"choices\":[{choices}],\"usage\":{{\"prompt_tokens\":4,\"completion_tokens\":{tokens},\"total_tokens\":{}}}}}\n\n",
            tokens + 4
        )
    };
    let both = r#"{"index":0,"text":"abc"},{"index":1,"text":"xy"}"#;
    let pieces = [
        piece(both, 5),
        piece(r#"{"index":1,"text":"z","finish_reason":"length"}"#, 6),
    ];
    let exchange = stream(&[&pieces[0], &pieces[1], DONE]).await;
    assert_eq!(
        (
            exchange.failure.clone(),
            exchange.text.as_str(),
            exchange.choices
        ),
        (None, "abcxyz", 2)
    );
    let arrivals: Vec<_> = exchange
        .chunks
        .iter()
        .map(|c| (c.text_bytes, c.cumulative_tokens()))
        .collect();
    assert_eq!(arrivals, [(3, Some(5)), (2, Some(5)), (1, Some(6))]);
    assert_eq!(exchange.usage.unwrap().completion_tokens, 6);
}

#[tokio::test]
async fn usage_chunk_with_null_or_missing_choices() {
    for choices in ["\"choices\":null,", ""] {
        let exchange = stream(&[
            ROLE,
            &content("x", Some("stop")),
            &usage(1, 1, choices),
            DONE,
        ])
        .await;
        assert_eq!(exchange.failure, None);
        assert_eq!(
            (exchange.chunks.len(), exchange.usage.unwrap().total_tokens),
            (1, 2)
        );
    }
}

#[tokio::test]
async fn error_objects_mid_stream_in_every_shape() {
    for (payload, expected) in [
        (
            r#"{"error":{"message":"boom","type":"internal","code":500}}"#,
            "boom (internal)",
        ),
        (
            r#"{"object":"error","message":"old vllm","type":"BadRequestError","code":400}"#,
            "old vllm",
        ),
        (
            r#"{"error":{"object":"error","message":"nested","code":400}}"#,
            "nested",
        ),
        (
            r#"{"error":{"message":"Input validation error","http_status_code":422}}"#,
            "Input validation error",
        ),
        (
            r#"{"error":"overloaded","error_type":"overloaded"}"#,
            "overloaded (overloaded)",
        ),
    ] {
        let exchange = stream(&[
            ROLE,
            &content("a", None),
            &format!("data: {payload}\n\n"),
            DONE,
        ])
        .await;
        let (kind, message) = failure(&exchange);
        assert_eq!(kind, OutcomeKind::StreamError, "{payload}");
        assert!(message.contains(expected), "{payload}: {message}");
        assert_eq!(exchange.chunks.len(), 1);
    }
    let exchange = stream(&["event: error\ndata: upstream went away\n\n"]).await;
    assert!(failure(&exchange).1.contains("upstream went away"));
}

#[tokio::test]
async fn protocol_failures_say_what_was_wrong() {
    let exchange = stream(&[ROLE, "data: {\"choices\": [\n\n", DONE]).await;
    let (kind, message) = failure(&exchange);
    assert_eq!(kind, OutcomeKind::Protocol);
    assert!(
        message.contains("invalid JSON in stream chunk 2"),
        "{message}"
    );
    let steps = vec![
        Step::Write(sse_head("")),
        Step::Write(chunk(b"data: \xff\xfe\n\n")),
    ];
    let (exchange, _) = exchange_with(config(ApiKind::Chat), steps).await;
    assert!(failure(&exchange).1.contains("invalid UTF-8"));
    let exchange = stream(&[ROLE, &content("a", None)]).await;
    let (kind, message) = failure(&exchange);
    assert_eq!(kind, OutcomeKind::Protocol);
    assert!(
        message.contains("stream ended before [DONE] after 2 chunks"),
        "{message}"
    );
    let exchange = stream(&[ROLE, &content("a", Some("stop"))]).await;
    assert_eq!(
        exchange.failure, None,
        "a finish_reason makes a missing [DONE] acceptable"
    );
}

#[tokio::test]
async fn oversized_line_fails_without_reading_it_all() {
    let mut steps = vec![Step::Write(sse_head("")), Step::Write(chunk(b"data: "))];
    steps.extend((0..200).map(|_| Step::Write(chunk(&[b'x'; 64 << 10]))));
    let mut config = config(ApiKind::Chat);
    config.max_line_bytes = 4096;
    let (exchange, _) = exchange_with(config, steps).await;
    let (kind, message) = failure(&exchange);
    assert_eq!(kind, OutcomeKind::Protocol);
    assert!(message.contains("oversized stream line"), "{message}");
}

#[tokio::test]
async fn reset_and_early_close_mid_stream_are_transport_failures() {
    for end in [Step::Reset, Step::Close] {
        let hello = content("Hello", None);
        let steps = vec![
            Step::Write(sse_head("")),
            Step::Write(chunk(ROLE.as_bytes())),
            Step::Write(chunk(hello.as_bytes())),
            end,
        ];
        let (exchange, _) = exchange_with(config(ApiKind::Chat), steps).await;
        let (kind, message) = failure(&exchange);
        assert_eq!(kind, OutcomeKind::Transport);
        assert!(
            message.contains("connection closed mid-stream after 2 chunks"),
            "{message}"
        );
        assert_eq!(exchange.chunks.len(), 1);
    }
}

/// Error responses: status, extra headers, body, what the failure message must say.
const ERROR_CASES: [(&str, &str, &str, &str); 6] = [
    (
        "400 Bad Request",
        "",
        r#"{"error":{"message":"max_tokens too large","type":"BadRequestError","code":400}}"#,
        "HTTP 400 Bad Request: max_tokens too large (BadRequestError)",
    ),
    (
        "429 Too Many Requests",
        "retry-after: 7\r\n",
        r#"{"error":"rate limited"}"#,
        "HTTP 429 Too Many Requests: rate limited (retry-after: 7)",
    ),
    (
        "400 Bad Request",
        "",
        r#"{"object":"error","message":"old style","type":"invalid_request_error","code":400}"#,
        "old style (invalid_request_error)",
    ),
    (
        "404 Not Found",
        "",
        r#"{"detail":"Not Found"}"#,
        "HTTP 404 Not Found: Not Found",
    ),
    (
        "500 Internal Server Error",
        "",
        "upstream crashed\n",
        "HTTP 500 Internal Server Error: upstream crashed",
    ),
    (
        "503 Service Unavailable",
        "retry-after: 1\r\n",
        "",
        "HTTP 503 Service Unavailable: (empty body) (retry-after: 1)",
    ),
];

#[tokio::test]
async fn non_2xx_error_shapes_and_retry_after() {
    let bodies: Vec<Vec<u8>> = ERROR_CASES
        .iter()
        .map(|(status, headers, body, _)| response(status, headers, body))
        .collect();
    let server =
        TcpServer::start(State::new(move |n, _| vec![Step::Write(bodies[n].clone())])).await;
    let backend = backend_at(&server.url(), config(ApiKind::Chat));
    for (status, _, _, expected) in ERROR_CASES {
        // An idle connection is reused once it has been idle `reuse_after`.
        tokio::time::sleep(HttpConfig::default().reuse_after).await;
        let exchange = send(&backend, &text_spec()).await;
        let failure = exchange.failure.clone().unwrap();
        assert_eq!(
            (failure.kind, failure.status),
            (OutcomeKind::Http, status[..3].parse().ok())
        );
        assert!(failure.message.contains(expected), "{}", failure.message);
        assert_eq!(exchange.status, failure.status);
        if let Some(seconds) = expected.split("retry-after: ").nth(1) {
            assert!(
                exchange
                    .headers
                    .contains(&("retry-after".into(), seconds[..1].into()))
            );
        }
    }
    assert_eq!(
        server.state.connections.load(Ordering::SeqCst),
        1,
        "error bodies read whole keep the connection"
    );
}

#[tokio::test]
async fn non_streaming_chat_and_completions() {
    let chat = r#"{"id":"c","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hi!","reasoning_content":null},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}"#;
    let completions = r#"{"choices":[{"index":0,"text":"a","finish_reason":"length"},{"index":1,"text":"b","finish_reason":"length"}],"usage":{"prompt_tokens":2,"completion_tokens":2,"total_tokens":4},"timings":{"prompt_n":2}}"#;
    for (api, body, text, choices) in [
        (ApiKind::Chat, chat, "Hi!", 1),
        (ApiKind::Completions, completions, "ab", 2),
    ] {
        let mut config = config(api);
        config.stream = false;
        let steps = vec![Step::Write(response(
            "200 OK",
            "content-type: application/json\r\n",
            body,
        ))];
        let (exchange, state) = exchange_with(config, steps).await;
        assert_eq!(
            (
                exchange.failure.clone(),
                exchange.text.as_str(),
                exchange.choices
            ),
            (None, text, choices)
        );
        assert_eq!(exchange.chunks.len(), 1);
        assert_eq!(exchange.chunks[0].cumulative_tokens(), Some(2));
        assert!(exchange.first_event_at.is_none());
        let request = &state.requests()[0];
        assert_eq!(request.header("accept"), None);
        assert_eq!(request.json()["stream"], json!(false));
        assert!(request.json().get("stream_options").is_none());
    }
    let mut config = config(ApiKind::Chat);
    config.max_body_bytes = 10;
    config.stream = false;
    let (exchange, _) =
        exchange_with(config, vec![Step::Write(response("200 OK", "", chat))]).await;
    assert!(failure(&exchange).1.contains("exceeds 10 bytes"));
}

#[tokio::test]
async fn streaming_request_answered_with_json_is_read_whole() {
    let body = r#"{"choices":[{"index":0,"message":{"content":"ok"},"finish_reason":"stop"}]}"#;
    let (exchange, _) = exchange_with(
        config(ApiKind::Chat),
        vec![Step::Write(response(
            "200 OK",
            "content-type: application/json\r\n",
            body,
        ))],
    )
    .await;
    assert_eq!((exchange.failure, exchange.text.as_str()), (None, "ok"));
}

#[tokio::test]
async fn api_key_never_leaks() {
    let (key, other) = ("sk-live-SECRET-123", "gw-SECRET-456");
    let body = format!(
        r#"{{"error":{{"message":"Incorrect API key provided: {key}, gateway {other}"}}}}"#
    );
    let steps = vec![Step::Write(response(
        "401 Unauthorized",
        &format!("x-request-id: {key}\r\n"),
        &body,
    ))];
    let mut config = config(ApiKind::Chat);
    config.api_key = Some(key.into());
    config
        .headers
        .push(("x-api-key".parse().unwrap(), other.parse().unwrap()));
    let server = TcpServer::start(State::new(move |_, _| steps.clone())).await;
    let backend = backend_at(&server.url(), config);
    let exchange = send(&backend, &text_spec()).await;
    assert_eq!(
        server.state.requests()[0].header("authorization"),
        Some(format!("Bearer {key}"))
    );
    assert_eq!(
        server.state.requests()[0].header("x-api-key").as_deref(),
        Some(other)
    );
    let message = failure(&exchange).1;
    assert!(message.contains("[redacted]"), "{message}");
    for text in [
        format!("{exchange:?}"),
        format!("{backend:?}"),
        format!("{:?}", backend.config()),
    ] {
        assert!(!text.contains("SECRET"), "{text}");
    }
    assert!(
        OpenAiBackend::new(
            OpenAiConfig {
                api_key: Some("bad\nkey".into()),
                ..OpenAiConfig::default()
            },
            HttpClient::tcp(
                Target::parse("http://127.0.0.1:1").unwrap(),
                HttpConfig::default()
            ),
        )
        .unwrap_err()
        .to_string()
        .contains("API key")
    );
}

#[tokio::test]
async fn chat_batch_fails_before_sending() {
    let (exchange, state) = {
        let server = TcpServer::start(State::new(|_, _| sse(&[DONE]))).await;
        let backend = backend_at(&server.url(), config(ApiKind::Chat));
        (
            send(&backend, &spec(RequestInput::Batch(vec!["a".into()]))).await,
            server.state.clone(),
        )
    };
    let (kind, message) = failure(&exchange);
    assert_eq!(kind, OutcomeKind::Invalid);
    assert!(message.contains("completions API"));
    assert!(state.requests().is_empty() && exchange.sent_at.is_none());
}
