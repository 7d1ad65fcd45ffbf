//! Every injected fault, observed on the wire (each at rate 1.0).
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use goodput_sim::config::FaultConfig;
use goodput_sim::{SimConfig, SimServer, spawn};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::{Method, Response, StatusCode};
use serde_json::{Value, json};
use support::{connect, fixed_config, handshake, post, request, send, sse_payloads};
use tokio::time::Instant;

const LOOPBACK: ([u8; 4], u16) = ([127, 0, 0, 1], 0);

/// The body ended without its terminating chunk: the connection was cut mid-response.
fn assert_transport_cut(error: &hyper::Error) {
    let description = format!("{error:?}");
    assert!(
        error.is_incomplete_message() || description.contains("UnexpectedEof"),
        "{description}"
    );
}

fn with_faults(faults: FaultConfig) -> SimConfig {
    SimConfig {
        faults,
        ..fixed_config(2, 1)
    }
}

fn completion(stream: bool) -> Value {
    json!({"prompt": "tell me a story", "max_tokens": 10, "ignore_eos": true, "stream": stream})
}

#[tokio::test]
async fn http_500_and_429_are_error_objects() {
    let sim = spawn(
        with_faults(FaultConfig {
            http_500: 1.0,
            ..FaultConfig::default()
        }),
        LOOPBACK.into(),
    )
    .await
    .unwrap();
    let reply = post(sim.addr(), "/v1/completions", &completion(true)).await;
    assert_eq!(reply.status, StatusCode::INTERNAL_SERVER_ERROR);
    assert_eq!(reply.json()["error"]["type"], "server_error");

    let faults = FaultConfig {
        http_429: 1.0,
        retry_after_secs: 7,
        ..FaultConfig::default()
    };
    let sim = spawn(with_faults(faults), LOOPBACK.into()).await.unwrap();
    let reply = post(
        sim.addr(),
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": "x"}]}),
    )
    .await;
    assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(reply.header("retry-after"), Some("7"));
    assert_eq!(reply.json()["error"]["type"], "rate_limit_error");
    assert!(
        sim.server()
            .metrics_text()
            .contains("reason=\"injected_http_429\"} 1")
    );
}

#[tokio::test]
async fn reset_mid_stream_cuts_the_chunked_body() {
    let sim = spawn(
        with_faults(FaultConfig {
            reset_mid_stream: 1.0,
            ..FaultConfig::default()
        }),
        LOOPBACK.into(),
    )
    .await
    .unwrap();
    let mut sender = connect(sim.addr()).await;
    let response = send(
        &mut sender,
        request(Method::POST, "/v1/completions", Some(&completion(true))),
    )
    .await
    .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    let mut received = String::new();
    let error = loop {
        match body.frame().await {
            Some(Ok(frame)) => {
                received.push_str(&String::from_utf8_lossy(frame.data_ref().unwrap()))
            }
            Some(Err(error)) => break error,
            None => panic!("the body ended cleanly: {received}"),
        }
    };
    assert_transport_cut(&error);
    assert!(
        received.contains("\"text\""),
        "some tokens came first: {received}"
    );
    assert!(!received.contains("[DONE]"));

    // Not streamed: the connection closes without a response.
    let mut sender = connect(sim.addr()).await;
    let outcome = send(
        &mut sender,
        request(Method::POST, "/v1/completions", Some(&completion(false))),
    )
    .await;
    assert!(outcome.is_err(), "{outcome:?}");
}

#[tokio::test]
async fn malformed_sse_sends_one_line_that_is_not_json() {
    let sim = spawn(
        with_faults(FaultConfig {
            malformed_sse: 1.0,
            ..FaultConfig::default()
        }),
        LOOPBACK.into(),
    )
    .await
    .unwrap();
    let reply = post(sim.addr(), "/v1/completions", &completion(true)).await;
    let events = reply.events();
    let bad: Vec<&String> = events
        .iter()
        .filter(|e| *e != "[DONE]" && serde_json::from_str::<Value>(e).is_err())
        .collect();
    assert_eq!(bad, ["{not json"]);
    let position = events.iter().position(|e| e == "{not json").unwrap();
    assert!(
        position > 0 && position < events.len() - 2,
        "mid-stream: {events:?}"
    );
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));

    let reply = post(sim.addr(), "/v1/completions", &completion(false)).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(
        serde_json::from_slice::<Value>(&reply.body).is_err(),
        "truncated JSON: {}",
        reply.text()
    );
    assert!(reply.text().starts_with("{\"id\":\"cmpl-"));
}

#[tokio::test]
async fn error_mid_stream_sends_an_error_object_then_done() {
    let sim = spawn(
        with_faults(FaultConfig {
            error_mid_stream: 1.0,
            ..FaultConfig::default()
        }),
        LOOPBACK.into(),
    )
    .await
    .unwrap();
    let reply = post(sim.addr(), "/v1/chat/completions", &json!({
        "messages": [{"role": "user", "content": "x"}], "max_tokens": 10, "ignore_eos": true, "stream": true
    }))
    .await;
    let events = reply.events();
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    let error: Value = serde_json::from_str(&events[events.len() - 2]).unwrap();
    assert_eq!(error["error"]["type"], "server_error");
    assert_eq!(error["error"]["code"], 500);
    let contents = events
        .iter()
        .filter(|e| e.contains("\"content\":\" "))
        .count();
    assert_eq!(contents, 5, "about half of the 10 tokens first: {events:?}");

    let reply = post(sim.addr(), "/v1/completions", &completion(false)).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.json()["error"]["type"], "server_error");
    // The engine request was cancelled at the fault.
    assert_eq!(sim.server().stats().running, 0);
}

/// A client connection (kept open by its owner).
type Client = hyper::client::conn::http1::SendRequest<http_body_util::Full<bytes::Bytes>>;

/// A server with `faults` on an in-memory connection, the response head to `body` (`None` if
/// it never comes) and the client connection.
async fn over_duplex(
    faults: FaultConfig,
    body: &Value,
) -> (SimServer, Option<Response<Incoming>>, Client) {
    let server = SimServer::new(with_faults(faults)).unwrap();
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(server.serve_connection(server_io));
    let mut sender = handshake(client_io).await;
    let sending = send(
        &mut sender,
        request(Method::POST, "/v1/completions", Some(body)),
    );
    // Under paused time an answer that never comes times out at once.
    let response = tokio::time::timeout(Duration::from_secs(3600), sending)
        .await
        .ok();
    (server, response.map(Result::unwrap), sender)
}

fn stall(stall_ms: Option<u64>) -> FaultConfig {
    FaultConfig {
        stall_mid_stream: 1.0,
        stall_ms,
        ..FaultConfig::default()
    }
}

/// Without `stall_ms` the stream goes silent for good while the connection stays open, and
/// the engine slot is freed.
#[tokio::test(start_paused = true)]
async fn stall_mid_stream_goes_silent_and_frees_the_slot() {
    let (server, response, _client) = over_duplex(stall(None), &completion(true)).await;
    let mut body = response.unwrap().into_body();
    let mut received = String::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(3600), body.frame()).await {
            Ok(Some(Ok(frame))) => {
                received.push_str(&String::from_utf8_lossy(frame.data_ref().unwrap()))
            }
            Ok(other) => panic!("the stream ended: {other:?}"),
            Err(_) => break,
        }
    }
    assert_eq!(
        sse_payloads(&received).len(),
        5,
        "about half of the tokens: {received}"
    );
    assert_eq!(
        server.stats().running,
        0,
        "the stalled request no longer holds its slot"
    );
}

/// With `stall_ms` the silence lasts that long and then the connection is cut.
#[tokio::test(start_paused = true)]
async fn a_timed_stall_ends_with_a_cut_connection() {
    let (_server, response, _client) = over_duplex(stall(Some(1500)), &completion(true)).await;
    let mut body = response.unwrap().into_body();
    let mut last_data = Instant::now();
    let error = loop {
        match body.frame().await {
            Some(Ok(_)) => last_data = Instant::now(),
            Some(Err(error)) => break error,
            None => panic!("the body ended cleanly"),
        }
    };
    let silence = last_data.elapsed();
    assert_transport_cut(&error);
    let expected = Duration::from_millis(1500);
    assert!(
        silence >= expected && silence - expected <= Duration::from_millis(1),
        "{silence:?}"
    );
}

/// Not streamed: the response never comes while the stall lasts.
#[tokio::test(start_paused = true)]
async fn a_stalled_whole_answer_never_arrives() {
    let (server, response, _client) = over_duplex(stall(None), &completion(false)).await;
    assert!(response.is_none());
    assert_eq!(server.stats().running, 0);
}
