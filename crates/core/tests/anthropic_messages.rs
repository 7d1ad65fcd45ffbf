//! The Anthropic Messages API (`--api messages`), end to end through the runner in virtual
//! time, against a hand-written server whose every byte and delay the test chooses (the
//! independent reference): typed events timed like chat chunks, usage with cache counts,
//! thinking as reasoning, tool use, `error` events, whole answers and the request's headers.
#![allow(clippy::unwrap_used)]

#[path = "support/wire_server.rs"]
mod wire_server;

mod support;

use std::sync::Arc;
use std::time::Duration;

use goodput_core::backend::openai::ApiKind;
use goodput_core::config::{LoadSpec, RunConfig, Warmup};
use goodput_core::record::OutcomeKind;
use goodput_core::workload::SyntheticWorkload;
use serde_json::{Value, json};
use support::{RunResult, openai, run_with};
use tokio_util::sync::CancellationToken;
use wire_server::{LAST_CHUNK, State, Step, chunk, response, sse_head};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// One SSE event the way Anthropic sends it: `event: <type>` then its JSON.
fn event(json: Value) -> Step {
    let kind = json["type"].as_str().unwrap_or("").to_string();
    Step::Write(chunk(format!("event: {kind}\ndata: {json}\n\n").as_bytes()))
}

fn text(index: u32, text: &str) -> Step {
    event(json!({"type": "content_block_delta", "index": index,
                 "delta": {"type": "text_delta", "text": text}}))
}

fn thinking(index: u32, text: &str) -> Step {
    event(json!({"type": "content_block_delta", "index": index,
                 "delta": {"type": "thinking_delta", "thinking": text}}))
}

fn start(input: u64, created: u64, read: u64) -> Step {
    event(json!({"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "content": [],
        "model": "m", "stop_reason": null,
        "usage": {"input_tokens": input, "cache_creation_input_tokens": created,
                  "cache_read_input_tokens": read, "output_tokens": 1}}}))
}

fn stop(reason: &str, output: u64) -> Vec<Step> {
    vec![
        event(json!({"type": "message_delta",
                     "delta": {"stop_reason": reason, "stop_sequence": null},
                     "usage": {"output_tokens": output}})),
        event(json!({"type": "message_stop"})),
        Step::Write(LAST_CHUNK.to_vec()),
    ]
}

/// Runs `requests` requests (8 prompt tokens, 6 output tokens asked) against a server
/// answering every one with `steps`; also returns what the server received.
async fn run(
    steps: Vec<Step>,
    requests: u64,
    key: Option<&str>,
    stream: bool,
) -> (RunResult, State) {
    let state = State::new(move |_, _| steps.clone());
    let captured = state.clone();
    let client = wire_server::in_memory_client(state, "http://script.test/v1");
    let workload = Arc::new(SyntheticWorkload {
        input_tokens: 8,
        output_tokens: Some(6),
        seed: 1,
    });
    let config = RunConfig {
        load: LoadSpec::Closed { concurrency: 1 },
        max_requests: Some(requests),
        warmup: Warmup::None,
        ..RunConfig::default()
    };
    let mut config_api = openai("claude-test");
    config_api.api = ApiKind::Messages;
    config_api.ignore_eos = false;
    config_api.continuous_usage = false;
    config_api.stream = stream;
    config_api.api_key = key.map(str::to_string);
    let result = run_with(
        config,
        client,
        config_api,
        workload,
        CancellationToken::new(),
    )
    .await;
    (result, captured)
}

/// The first request went to `/v1/messages` with the key as `x-api-key`, the API version
/// and a Messages body.
fn assert_sent_the_anthropic_way(state: &State) {
    let request = &state.requests()[0];
    assert!(
        request.head.starts_with("POST /v1/messages HTTP/1.1"),
        "{}",
        request.head
    );
    assert_eq!(
        request.header("x-api-key").as_deref(),
        Some("sk-ant-secret")
    );
    assert_eq!(
        request.header("anthropic-version").as_deref(),
        Some("2023-06-01")
    );
    assert_eq!(request.header("authorization"), None);
    let body = request.json();
    assert_eq!(body["model"], "claude-test");
    assert_eq!(body["max_tokens"], 6);
    assert_eq!(body["stream"], true);
    assert_eq!(body["messages"][0]["role"], "user");
    assert!(body.get("stream_options").is_none(), "{body}");
}

#[tokio::test(start_paused = true)]
async fn a_streamed_message_is_timed_from_its_deltas_and_counted_from_its_usage() {
    // Thinking at 100 and 110 ms, the answer's first token at 160 ms, then 10 ms apart to
    // 180 ms; usage: 2 uncached + 3 written + 4 read prompt tokens, 5 output tokens.
    let mut steps = vec![
        Step::Write(sse_head("")),
        start(2, 3, 4),
        event(json!({"type": "content_block_start", "index": 0,
                     "content_block": {"type": "thinking", "thinking": ""}})),
        event(json!({"type": "ping"})),
        Step::Sleep(ms(100)),
        thinking(0, "Let"),
        Step::Sleep(ms(10)),
        thinking(0, " me"),
        event(json!({"type": "content_block_stop", "index": 0})),
        event(json!({"type": "content_block_start", "index": 1,
                     "content_block": {"type": "text", "text": ""}})),
        Step::Sleep(ms(50)),
        text(1, "Yes"),
        Step::Sleep(ms(10)),
        text(1, " sir"),
        Step::Sleep(ms(10)),
        text(1, "!"),
        event(json!({"type": "content_block_stop", "index": 1})),
        event(json!({"type": "some_future_event", "index": 1})),
    ];
    steps.extend(stop("end_turn", 5));
    let (result, state) = run(steps, 2, Some("sk-ant-secret"), true).await;
    for record in &result.records {
        assert_eq!(record.failure, None);
        assert_eq!(
            (record.ttft(), record.ttfat()),
            (Some(ms(100)), Some(ms(160)))
        );
        assert_eq!(record.output_tokens, 5);
        // (180 - 100) ms over 4 gaps between 5 tokens.
        assert_eq!(record.tpot(), Some(ms(20)));
        assert_eq!(
            (record.input_tokens, record.cached_input_tokens),
            (Some(9), Some(4))
        );
        assert_eq!(record.finish_reason.as_deref(), Some("stop"));
        assert_eq!(record.response_id.as_deref(), Some("msg_1"));
    }
    assert_sent_the_anthropic_way(&state);
}

#[tokio::test(start_paused = true)]
async fn tool_use_and_max_tokens_map_to_chat_finish_reasons() {
    let mut steps = vec![
        Step::Write(sse_head("")),
        start(8, 0, 0),
        Step::Sleep(ms(40)),
        event(json!({"type": "content_block_start", "index": 0,
                     "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get",
                                       "input": {}}})),
        Step::Sleep(ms(10)),
        event(json!({"type": "content_block_delta", "index": 0,
                     "delta": {"type": "input_json_delta", "partial_json": "{\"q\":"}})),
        event(json!({"type": "content_block_delta", "index": 0,
                     "delta": {"type": "input_json_delta", "partial_json": "1}"}})),
        event(json!({"type": "content_block_stop", "index": 0})),
    ];
    steps.extend(stop("tool_use", 6));
    let (result, _) = run(steps, 1, None, true).await;
    let record = &result.records[0];
    assert_eq!(record.failure, None);
    assert_eq!(record.finish_reason.as_deref(), Some("tool_calls"));
    assert!(record.ended_in_tool_call);
    assert_eq!(record.tool_calls, 1);
    assert_eq!(record.ttft(), Some(ms(40)));
    assert_eq!(
        (record.input_tokens, record.cached_input_tokens),
        (Some(8), Some(0))
    );
}

#[tokio::test(start_paused = true)]
async fn an_error_event_fails_the_request_with_the_servers_message_and_keeps_its_tokens() {
    let steps = vec![
        Step::Write(sse_head("")),
        start(8, 0, 0),
        Step::Sleep(ms(30)),
        text(0, "Hi"),
        event(json!({"type": "error",
                     "error": {"type": "overloaded_error", "message": "Overloaded"}})),
        Step::Write(LAST_CHUNK.to_vec()),
    ];
    let (result, _) = run(steps, 1, None, true).await;
    let record = &result.records[0];
    let failure = record.failure.as_ref().unwrap();
    assert_eq!(failure.kind, OutcomeKind::StreamError);
    assert!(
        failure.message.contains("Overloaded (overloaded_error)"),
        "{}",
        failure.message
    );
    assert_eq!(record.ttft(), Some(ms(30)));
}

#[tokio::test(start_paused = true)]
async fn an_event_without_a_type_or_a_stream_without_message_stop_is_a_protocol_failure() {
    let typeless = vec![
        Step::Write(sse_head("")),
        start(8, 0, 0),
        Step::Write(chunk(b"data: {\"index\":0}\n\n")),
        Step::Write(LAST_CHUNK.to_vec()),
    ];
    let (result, _) = run(typeless, 1, None, true).await;
    let failure = result.records[0].failure.clone().unwrap();
    assert_eq!(failure.kind, OutcomeKind::Protocol);
    assert!(
        failure.message.contains("without a `type`"),
        "{}",
        failure.message
    );
    let cut = vec![
        Step::Write(sse_head("")),
        start(8, 0, 0),
        text(0, "Hi"),
        Step::Write(LAST_CHUNK.to_vec()),
    ];
    let (result, _) = run(cut, 1, None, true).await;
    let failure = result.records[0].failure.clone().unwrap();
    assert_eq!(failure.kind, OutcomeKind::Protocol, "{}", failure.message);
}

#[tokio::test(start_paused = true)]
async fn a_whole_message_counts_its_blocks_and_usage() {
    let body = json!({"id": "msg_2", "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "thinking", "thinking": "Hmm", "signature": "x"},
                    {"type": "text", "text": "Hello there"}],
        "stop_reason": "max_tokens", "stop_sequence": null,
        "usage": {"input_tokens": 5, "cache_creation_input_tokens": 0,
                  "cache_read_input_tokens": 3, "output_tokens": 6}})
    .to_string();
    let steps = vec![
        Step::Sleep(ms(250)),
        Step::Write(response(
            "200 OK",
            "content-type: application/json\r\n",
            &body,
        )),
    ];
    let (result, state) = run(steps, 1, None, false).await;
    let record = &result.records[0];
    assert_eq!(record.failure, None);
    assert_eq!(record.e2e(), Some(ms(250)));
    assert_eq!(record.output_tokens, 6);
    assert_eq!(
        (record.input_tokens, record.cached_input_tokens),
        (Some(8), Some(3))
    );
    assert_eq!(record.finish_reason.as_deref(), Some("length"));
    assert_eq!(state.requests()[0].json()["stream"], false);
}

#[tokio::test(start_paused = true)]
async fn an_http_error_body_in_anthropics_shape_is_the_failures_message() {
    let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: field required"}}"#;
    let steps = vec![Step::Write(response(
        "400 Bad Request",
        "content-type: application/json\r\n",
        body,
    ))];
    let (result, _) = run(steps, 1, None, true).await;
    let failure = result.records[0].failure.clone().unwrap();
    assert_eq!(
        (failure.kind, failure.status),
        (OutcomeKind::Http, Some(400))
    );
    assert!(
        failure
            .message
            .contains("max_tokens: field required (invalid_request_error)"),
        "{}",
        failure.message
    );
}
