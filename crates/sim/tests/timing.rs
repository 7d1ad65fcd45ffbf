//! Exact timing under paused tokio time: a fixed engine (TTFT 200 ms, ITL 10 ms) served over an
//! in-memory transport delivers the first content chunk 200 ms after the request and each next
//! one 10 ms later; `time_scale` 4 makes that 50 ms and 2.5 ms.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use goodput_sim::{SimConfig, SimServer};
use http_body_util::BodyExt;
use hyper::Method;
use serde_json::{Value, json};
use support::{fixed_config, handshake, request, send, sse_payloads};
use tokio::time::Instant;

const TOLERANCE: Duration = Duration::from_millis(1);

/// Sends a streamed chat request over a duplex pipe and returns when each content chunk
/// arrived, measured from just before the request was sent.
async fn content_arrivals(config: SimConfig, tokens: u64) -> Vec<Duration> {
    let server = SimServer::new(config).unwrap();
    let (client_io, server_io) = tokio::io::duplex(64 * 1024);
    tokio::spawn(server.serve_connection(server_io));
    let mut sender = handshake(client_io).await;
    let body = json!({
        "messages": [{"role": "user", "content": "count"}],
        "max_tokens": tokens, "ignore_eos": true, "stream": true
    });
    let start = Instant::now();
    let response = send(
        &mut sender,
        request(Method::POST, "/v1/chat/completions", Some(&body)),
    )
    .await
    .unwrap();
    let mut body = response.into_body();
    let mut arrivals = Vec::new();
    let mut pending = String::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.unwrap();
        pending.push_str(&String::from_utf8_lossy(frame.data_ref().unwrap()));
        let Some(end) = pending.rfind("\n\n") else {
            continue;
        };
        let complete: String = pending.drain(..end + 2).collect();
        for payload in sse_payloads(&complete) {
            let Ok(chunk) = serde_json::from_str::<Value>(&payload) else {
                continue;
            };
            let content = &chunk["choices"][0]["delta"]["content"];
            if content.as_str().is_some_and(|text| !text.is_empty()) {
                arrivals.push(start.elapsed());
            }
        }
    }
    arrivals
}

fn assert_close(actual: Duration, expected: Duration, what: &str) {
    let difference = actual.abs_diff(expected);
    assert!(
        difference <= TOLERANCE,
        "{what}: {actual:?}, expected {expected:?}"
    );
}

fn assert_schedule(arrivals: &[Duration], first: Duration, gap: Duration, tokens: usize) {
    assert_eq!(arrivals.len(), tokens);
    assert_close(arrivals[0], first, "first content chunk");
    for (i, pair) in arrivals.windows(2).enumerate() {
        assert_close(pair[1] - pair[0], gap, &format!("gap after chunk {i}"));
    }
    // No drift: chunk k arrives at first + k · gap.
    for (k, arrival) in arrivals.iter().enumerate() {
        assert_close(
            *arrival,
            first + gap * u32::try_from(k).unwrap(),
            &format!("chunk {k}"),
        );
    }
}

#[tokio::test(start_paused = true)]
async fn first_token_after_ttft_then_one_every_itl() {
    let arrivals = content_arrivals(fixed_config(200, 10), 20).await;
    assert_schedule(
        &arrivals,
        Duration::from_millis(200),
        Duration::from_millis(10),
        20,
    );
}

#[tokio::test(start_paused = true)]
async fn time_scale_compresses_the_schedule() {
    let config = SimConfig {
        time_scale: 4.0,
        ..fixed_config(200, 10)
    };
    let arrivals = content_arrivals(config, 20).await;
    assert_schedule(
        &arrivals,
        Duration::from_millis(50),
        Duration::from_micros(2500),
        20,
    );
}
