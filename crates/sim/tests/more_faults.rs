//! The faults added for the client's fault matrix, observed on the wire (each at rate 1.0):
//! HTTP 400, a stall before the status line, a chunk with cut-off JSON, a line of non-UTF-8
//! bytes, a line of many megabytes, and a response that never ends.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use goodput_sim::config::FaultConfig;
use goodput_sim::{SimConfig, SimServer, spawn};
use http_body_util::BodyExt;
use hyper::{Method, StatusCode};
use serde_json::{Value, json};
use support::{fixed_config, handshake, post, request, send, sse_payloads};

fn with_faults(faults: FaultConfig) -> SimConfig {
    SimConfig {
        faults,
        ..fixed_config(2, 1)
    }
}

fn completion(stream: bool) -> Value {
    json!({"prompt": "tell me a story", "max_tokens": 10, "ignore_eos": true, "stream": stream})
}

/// The raw bytes of a streamed answer with `faults`, read until the body ends, fails, or
/// `limit` bytes arrived (under paused time a silent body ends the read at once).
async fn streamed_bytes(faults: FaultConfig, limit: usize) -> Vec<u8> {
    let server = SimServer::new(with_faults(faults)).unwrap();
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(server.serve_connection(server_io));
    let mut sender = handshake(client_io).await;
    let response = send(
        &mut sender,
        request(Method::POST, "/v1/completions", Some(&completion(true))),
    )
    .await
    .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    let mut received = Vec::new();
    while received.len() < limit {
        match tokio::time::timeout(Duration::from_secs(60), body.frame()).await {
            Ok(Some(Ok(frame))) => received.extend_from_slice(frame.data_ref().unwrap()),
            Ok(_) | Err(_) => break,
        }
    }
    received
}

#[tokio::test]
async fn http_400_is_an_error_object() {
    let faults = FaultConfig {
        http_400: 1.0,
        ..FaultConfig::default()
    };
    let sim = spawn(with_faults(faults), ([127, 0, 0, 1], 0).into())
        .await
        .unwrap();
    let reply = post(sim.addr(), "/v1/completions", &completion(true)).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
    assert_eq!(reply.json()["error"]["type"], "invalid_request_error");
    assert!(
        sim.server()
            .metrics_text()
            .contains("reason=\"injected_http_400\"} 1")
    );
}

#[tokio::test(start_paused = true)]
async fn a_stall_before_the_response_sends_no_status_line() {
    let faults = FaultConfig {
        stall_before_response: 1.0,
        ..FaultConfig::default()
    };
    let server = SimServer::new(with_faults(faults)).unwrap();
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(server.serve_connection(server_io));
    let mut sender = handshake(client_io).await;
    let sending = send(
        &mut sender,
        request(Method::POST, "/v1/completions", Some(&completion(true))),
    );
    let waited = tokio::time::timeout(Duration::from_secs(3600), sending).await;
    assert!(waited.is_err(), "no response head within an hour");
    assert_eq!(server.stats().running, 0, "nothing reached the engine");
}

#[tokio::test(start_paused = true)]
async fn a_timed_stall_before_the_response_cuts_the_connection() {
    let faults = FaultConfig {
        stall_before_response: 1.0,
        stall_ms: Some(500),
        ..FaultConfig::default()
    };
    let server = SimServer::new(with_faults(faults)).unwrap();
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(server.serve_connection(server_io));
    let mut sender = handshake(client_io).await;
    let started = tokio::time::Instant::now();
    let result = send(
        &mut sender,
        request(Method::POST, "/v1/completions", Some(&completion(true))),
    )
    .await;
    assert!(result.is_err(), "the connection is cut without a response");
    assert_eq!(started.elapsed(), Duration::from_millis(500));
}

#[tokio::test(start_paused = true)]
async fn invalid_json_chunk_is_a_well_formed_event_with_cut_off_json() {
    let faults = FaultConfig {
        invalid_json_chunk: 1.0,
        ..FaultConfig::default()
    };
    let text = String::from_utf8(streamed_bytes(faults, usize::MAX).await).unwrap();
    let payloads = sse_payloads(&text);
    let broken: Vec<&String> = payloads
        .iter()
        .filter(|p| serde_json::from_str::<Value>(p).is_err() && *p != "[DONE]")
        .collect();
    assert_eq!(broken.len(), 1, "{text}");
    assert!(broken[0].starts_with("{\"id\":"), "{}", broken[0]);
    assert_eq!(payloads.last().map(String::as_str), Some("[DONE]"));
}

#[tokio::test(start_paused = true)]
async fn sse_garbage_sends_a_line_that_is_not_utf8() {
    let faults = FaultConfig {
        sse_garbage: 1.0,
        ..FaultConfig::default()
    };
    let bytes = streamed_bytes(faults, usize::MAX).await;
    assert!(String::from_utf8(bytes.clone()).is_err());
    assert!(bytes.ends_with(b"data: [DONE]\n\n"));
}

#[tokio::test(start_paused = true)]
async fn oversized_line_sends_one_line_of_the_configured_length() {
    let faults = FaultConfig {
        oversized_line: 1.0,
        oversized_line_bytes: 300_000,
        ..FaultConfig::default()
    };
    let bytes = streamed_bytes(faults, usize::MAX).await;
    let longest = bytes.split(|b| *b == b'\n').map(<[u8]>::len).max().unwrap();
    assert!(
        (300_000..300_100).contains(&longest),
        "longest line {longest}"
    );
    assert!(bytes.ends_with(b"data: [DONE]\n\n"));
}

#[tokio::test(start_paused = true)]
async fn an_endless_response_sends_keep_alives_forever() {
    let faults = FaultConfig {
        endless_response: 1.0,
        keep_alive_ms: 100,
        ..FaultConfig::default()
    };
    let server = SimServer::new(with_faults(faults)).unwrap();
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(server.serve_connection(server_io));
    let mut sender = handshake(client_io).await;
    let response = send(
        &mut sender,
        request(Method::POST, "/v1/completions", Some(&completion(true))),
    )
    .await
    .unwrap();
    let mut body = response.into_body();
    let started = tokio::time::Instant::now();
    let mut received = Vec::new();
    while started.elapsed() < Duration::from_secs(30) {
        let frame = body.frame().await.expect("the body never ends").unwrap();
        received.extend_from_slice(frame.data_ref().unwrap());
    }
    let text = String::from_utf8(received).unwrap();
    let keep_alives = text.matches(": keep-alive").count();
    assert!(keep_alives >= 290, "{keep_alives} keep-alives in 30 s");
    assert!(!text.contains("[DONE]"));
    let events = text.replace(": keep-alive\n\n", "");
    assert_eq!(sse_payloads(&events).len(), 5, "about half of the tokens");
    assert_eq!(server.stats().running, 0, "the engine slot is free");
}

#[tokio::test(start_paused = true)]
async fn a_non_streamed_endless_response_never_ends() {
    let faults = FaultConfig {
        endless_response: 1.0,
        ..FaultConfig::default()
    };
    let server = SimServer::new(with_faults(faults)).unwrap();
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(server.serve_connection(server_io));
    let mut sender = handshake(client_io).await;
    let response = send(
        &mut sender,
        request(Method::POST, "/v1/completions", Some(&completion(false))),
    )
    .await
    .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body();
    for _ in 0..50 {
        let frame = body.frame().await.expect("the body never ends").unwrap();
        assert!(!frame.data_ref().unwrap().is_empty());
    }
}
