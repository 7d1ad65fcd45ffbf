//! Refusals: every 4xx the simulator sends is an OpenAI error object naming the problem, and a
//! full queue answers 429 with `Retry-After`.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use bytes::Bytes;
use goodput_sim::config::EngineConfig;
use goodput_sim::spawn;
use http_body_util::Full;
use hyper::{Method, StatusCode};
use serde_json::{Value, json};
use support::{call, connect, fixed_config, post, read_reply, request, send};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const LOOPBACK: ([u8; 4], u16) = ([127, 0, 0, 1], 0);
const INVALID: &str = "invalid_request_error";

fn assert_error(reply: &support::Reply, status: StatusCode, kind: &str, needle: &str) -> Value {
    assert_eq!(reply.status, status, "{}", reply.text());
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let body = reply.json();
    let error = &body["error"];
    assert_eq!(error["type"], kind, "{body}");
    assert_eq!(error["code"], status.as_u16(), "{body}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains(needle), "{needle:?} not in {message:?}");
    body
}

const CHAT: &str = "/v1/chat/completions";
const COMPLETIONS: &str = "/v1/completions";

/// A request the server must refuse with 400: path, body, part of the message, `param`.
type InvalidCase = (&'static str, Value, &'static str, Option<&'static str>);

fn invalid_cases() -> Vec<InvalidCase> {
    let user = json!([{"role": "user", "content": "hi"}]);
    vec![
        (
            CHAT,
            json!({"messages": user, "n": 2}),
            "`n` must be 1",
            Some("n"),
        ),
        (
            CHAT,
            json!({"messages": []}),
            "`messages`",
            Some("messages"),
        ),
        (
            CHAT,
            json!({"messages": user, "max_tokens": 0}),
            "at least 1",
            Some("max_tokens"),
        ),
        (
            CHAT,
            json!({"messages": user, "max_tokens": "lots"}),
            "invalid type",
            None,
        ),
        (CHAT, json!({"messages": "hi"}), "invalid type", None),
        (
            COMPLETIONS,
            json!({"prompt": ""}),
            "must not be empty",
            Some("prompt"),
        ),
        (
            COMPLETIONS,
            json!({"prompt": [], "max_tokens": 3}),
            "`prompt`",
            Some("prompt"),
        ),
        (
            COMPLETIONS,
            json!({"max_tokens": 3}),
            "missing field `prompt`",
            None,
        ),
    ]
}

#[tokio::test]
async fn invalid_generation_requests_are_400_naming_the_problem() {
    let sim = spawn(fixed_config(1, 1), LOOPBACK.into()).await.unwrap();
    for (path, body, needle, param) in invalid_cases() {
        let reply = post(sim.addr(), path, &body).await;
        let error = assert_error(&reply, StatusCode::BAD_REQUEST, INVALID, needle);
        assert_eq!(error["error"]["param"], json!(param), "{body}");
    }
    let mut sender = connect(sim.addr()).await;
    let mut malformed = request(Method::POST, COMPLETIONS, None);
    *malformed.body_mut() = Full::new(Bytes::from_static(b"{\"prompt\": "));
    let reply = read_reply(send(&mut sender, malformed).await.unwrap())
        .await
        .unwrap();
    assert_error(
        &reply,
        StatusCode::BAD_REQUEST,
        INVALID,
        "invalid request body",
    );
    let metrics = sim.server().metrics_text();
    let refused = invalid_cases().len() + 1;
    assert!(
        metrics.contains(&format!("reason=\"invalid_request\"}} {refused}")),
        "{metrics}"
    );
}

#[tokio::test]
async fn prompt_plus_max_tokens_beyond_the_context_is_400_with_the_engine_message() {
    let mut config = fixed_config(1, 1);
    if let EngineConfig::Fixed(fixed) = &mut config.engine {
        fixed.max_model_len = 100;
    }
    let sim = spawn(config, LOOPBACK.into()).await.unwrap();
    let body = json!({"prompt": "hello", "max_tokens": 200});
    let reply = post(sim.addr(), COMPLETIONS, &body).await;
    assert_error(
        &reply,
        StatusCode::BAD_REQUEST,
        INVALID,
        "maximum context length is 100",
    );
    assert!(
        sim.server()
            .metrics_text()
            .contains("reason=\"too_long\"} 1")
    );
}

#[tokio::test]
async fn unknown_paths_and_wrong_methods() {
    let sim = spawn(fixed_config(1, 1), LOOPBACK.into()).await.unwrap();
    let reply = call(sim.addr(), Method::GET, "/v1/nothing", None).await;
    assert_error(&reply, StatusCode::NOT_FOUND, INVALID, "/v1/nothing");
    let reply = call(sim.addr(), Method::GET, CHAT, None).await;
    assert_error(&reply, StatusCode::METHOD_NOT_ALLOWED, INVALID, "use POST");
    assert_eq!(reply.header("allow"), Some("POST"));
    let reply = call(sim.addr(), Method::POST, "/metrics", None).await;
    assert_error(&reply, StatusCode::METHOD_NOT_ALLOWED, INVALID, "use GET");
    assert_eq!(reply.header("allow"), Some("GET"));
}

/// Reads from `stream` until the end of a JSON error body (or EOF), bounded in time.
async fn read_error_response(stream: &mut TcpStream) -> String {
    let mut response = Vec::new();
    let mut buffer = [0u8; 4096];
    while !String::from_utf8_lossy(&response).ends_with("}}") {
        let read = stream.read(&mut buffer);
        let read = tokio::time::timeout(Duration::from_secs(10), read)
            .await
            .unwrap()
            .unwrap();
        if read == 0 {
            break;
        }
        response.extend_from_slice(&buffer[..read]);
    }
    String::from_utf8_lossy(&response).into_owned()
}

#[tokio::test]
async fn a_body_over_64_mib_is_413() {
    let sim = spawn(fixed_config(1, 1), LOOPBACK.into()).await.unwrap();
    // The declared length is refused before the body is read.
    let mut stream = TcpStream::connect(sim.addr()).await.unwrap();
    let head = "POST /v1/completions HTTP/1.1\r\nhost: sim\r\ncontent-type: application/json\r\n\
                content-length: 67108865\r\n\r\n{\"prompt\":";
    stream.write_all(head.as_bytes()).await.unwrap();
    let response = read_error_response(&mut stream).await;
    assert!(response.starts_with("HTTP/1.1 413"), "{response}");
    assert!(
        response.contains("\"type\":\"invalid_request_error\""),
        "{response}"
    );
    assert!(response.contains("exceeds 67108864 bytes"), "{response}");
}

/// Waits (in real time, bounded) until the engine runs nothing.
async fn wait_until_idle(server: &goodput_sim::SimServer) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while server.stats().running > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "a request still holds its slot"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test]
async fn a_full_queue_answers_429_with_retry_after() {
    let mut config = fixed_config(10, 50);
    if let EngineConfig::Fixed(fixed) = &mut config.engine {
        (fixed.slots, fixed.max_waiting) = (1, 0);
    }
    let sim = spawn(config, LOOPBACK.into()).await.unwrap();
    // Occupy the only slot with a long streamed answer.
    let mut busy = connect(sim.addr()).await;
    let long = json!({"prompt": "x", "max_tokens": 1000, "ignore_eos": true, "stream": true});
    let streaming = send(&mut busy, request(Method::POST, COMPLETIONS, Some(&long)));
    let streaming = streaming.await.unwrap();
    assert_eq!(streaming.status(), StatusCode::OK);
    assert_eq!(sim.server().stats().running, 1);

    let short = json!({"prompt": "y", "max_tokens": 1});
    let reply = post(sim.addr(), COMPLETIONS, &short).await;
    let status = StatusCode::TOO_MANY_REQUESTS;
    assert_error(&reply, status, "rate_limit_error", "queue is full");
    let retry_after: u64 = reply.header("retry-after").unwrap().parse().unwrap();
    assert!(retry_after >= 1);

    // Dropping the streaming response cancels the engine request and frees the slot.
    drop((streaming, busy));
    wait_until_idle(sim.server()).await;
    assert_eq!(
        post(sim.addr(), COMPLETIONS, &short).await.status,
        StatusCode::OK
    );
    let metrics = sim.server().metrics_text();
    assert!(metrics.contains("reason=\"queue_full\"} 1"), "{metrics}");
}

/// A client that leaves before a whole (non-streamed) answer is ready gets its engine request
/// cancelled, freeing the slot.
#[tokio::test(start_paused = true)]
async fn a_client_that_leaves_mid_request_frees_its_slot() {
    let server = goodput_sim::SimServer::new(fixed_config(100, 10)).unwrap();
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(server.serve_connection(server_io));
    let mut sender = support::handshake(client_io).await;
    let body = json!({"prompt": "x", "max_tokens": 1000, "ignore_eos": true});
    let waiting = send(
        &mut sender,
        request(Method::POST, "/v1/completions", Some(&body)),
    );
    assert!(
        tokio::time::timeout(Duration::from_secs(1), waiting)
            .await
            .is_err()
    );
    assert_eq!(server.stats().running, 1);
    drop(sender);
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(server.stats().running, 0);
    assert!(
        server
            .metrics_text()
            .contains("finished_reason=\"abort\"} 1")
    );
}
