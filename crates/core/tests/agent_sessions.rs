//! Agentic sessions end to end in virtual time against a hand-written server: tool-result turns
//! are sent as a `tool` message answering a call on the previous reply, after the tool's latency
//! (not the user's think time); a reply that ends in a tool call makes the next turn a tool
//! result; per-session figures and the expected prefix reuse are exact.
#![allow(clippy::unwrap_used)]

#[path = "support/wire_server.rs"]
mod wire_server;

mod support;

use std::sync::Arc;
use std::time::Duration;

use goodput_core::config::{LoadSpec, RunConfig, Warmup};
use goodput_core::workload::{AgentTurns, PromptVocabulary, SyntheticConversations, ThinkTime};
use serde_json::{Value, json};
use support::{RunResult, openai, run_with};
use tokio_util::sync::CancellationToken;
use wire_server::{LAST_CHUNK, State, Step, chunk, sse_head};

fn event(json: Value) -> Step {
    Step::Write(chunk(format!("data: {json}\n\n").as_bytes()))
}

/// An answer of one token 50 ms after the request, ending in text or in a tool call.
fn answer(tool_call: bool) -> Vec<Step> {
    let (delta, finish) = if tool_call {
        (
            json!({"tool_calls": [{"index": 0, "id": "c", "type": "function",
                                   "function": {"name": "f", "arguments": "{}"}}]}),
            "tool_calls",
        )
    } else {
        (json!({"content": "ok"}), "stop")
    };
    vec![
        Step::Write(sse_head("")),
        Step::Sleep(Duration::from_millis(50)),
        event(json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})),
        event(
            json!({"choices": [], "usage": {"prompt_tokens": 40, "completion_tokens": 1,
                     "total_tokens": 41, "prompt_tokens_details": {"cached_tokens": 8}}}),
        ),
        Step::Write(chunk(b"data: [DONE]\n\n")),
        Step::Write(LAST_CHUNK.to_vec()),
    ]
}

async fn play(agent: &str, tool_calls_from_server: bool) -> (RunResult, Vec<Value>) {
    let state = State::new(move |_, _| answer(tool_calls_from_server));
    let server = state.clone();
    let client = wire_server::in_memory_client(server, "http://agent.test/v1");
    let sessions = Arc::new(SyntheticConversations {
        turns: "3".parse().unwrap(),
        user_tokens: "10".parse().unwrap(),
        output_tokens: Some("1".parse().unwrap()),
        think_time: ThinkTime::Fixed(Duration::from_secs(1)),
        prefix: None,
        agent: Some(AgentTurns::parse(agent).unwrap()),
        vocabulary: Arc::new(PromptVocabulary::cl100k()),
        seed: 4,
    });
    let config = RunConfig {
        load: LoadSpec::Closed { concurrency: 1 },
        max_requests: Some(3),
        warmup: Warmup::None,
        ..RunConfig::default()
    };
    let mut openai = openai("m");
    openai.continuous_usage = false;
    let result = run_with(config, client, openai, sessions, CancellationToken::new()).await;
    let bodies = state.requests().iter().map(|r| r.json()).collect();
    (result, bodies)
}

#[tokio::test(start_paused = true)]
async fn tool_results_follow_a_call_after_the_tool_latency() {
    let (result, bodies) = play("tool-prob=1,tool-latency=200ms,result-tokens=10", false).await;
    let messages = &bodies[1]["messages"];
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(messages[1]["content"], "ok", "the server's reply");
    assert_eq!(messages[1]["tool_calls"][0]["id"], "call_0_1");
    assert_eq!(messages[2]["role"], "tool");
    assert_eq!(messages[2]["tool_call_id"], "call_0_1");
    assert_eq!(bodies[2]["messages"].as_array().unwrap().len(), 5);
    let records = &result.records;
    // Turn 0 is scheduled at 0 and ends at 50 ms; each tool result goes 200 ms after a reply.
    let scheduled: Vec<u64> = records.iter().map(|r| r.scheduled_us / 1000).collect();
    assert_eq!(scheduled, vec![0, 250, 500]);
    let prefixes: Vec<Option<u64>> = records.iter().map(|r| r.expected_prefix_tokens).collect();
    assert_eq!(prefixes, vec![None, Some(11), Some(22)]);
    assert_eq!(records[2].expected_input_tokens, Some(32));
    assert!(records[1].tool_result_turn && records[2].tool_result_turn);
    let sessions = result.step.sessions.as_ref().unwrap();
    assert_eq!(
        (
            sessions.sessions,
            sessions.turns,
            sessions.tool_result_turns
        ),
        (1, 3, 2)
    );
    assert_eq!(sessions.session_duration_ms.max, Some(550.0));
    assert_eq!(sessions.final_context_tokens.max, Some(32));
    let reuse = result.step.prefix_reuse.as_ref().unwrap();
    // Expected: (0 + 11 + 22) of (10 + 21 + 32) prompt tokens re-sent; the server said 8 of
    // its 40 prompt tokens were cached on every turn.
    assert_eq!(
        (
            reuse.expected_shareable_tokens_total,
            reuse.expected_input_tokens_total
        ),
        (33, 63)
    );
    assert_eq!(reuse.cached_fraction, Some(0.2));
}

#[tokio::test(start_paused = true)]
async fn a_reply_that_calls_a_tool_is_answered_with_a_tool_result() {
    let (result, bodies) = play("tool-prob=0,tool-latency=200ms,result-tokens=10", true).await;
    assert_eq!(bodies[1]["messages"][2]["role"], "tool");
    // The workload drew a user turn, so the wait is the user's think time.
    let scheduled: Vec<u64> = result
        .records
        .iter()
        .map(|r| r.scheduled_us / 1000)
        .collect();
    assert_eq!(scheduled, vec![0, 1050, 2100]);
    let tools = result.step.tool_calls.as_ref().unwrap();
    assert_eq!(tools.ended_in_tool_call, 3);
}

#[tokio::test(start_paused = true)]
async fn the_simulator_reports_the_prefix_it_served_from_its_cache() {
    // The batching engine caches prefixes by 16-token blocks: every later turn finds its
    // history cached (whole blocks of it), a first turn finds nothing.
    let mut sim = goodput_sim::config::SimConfig::default();
    sim.agent.prompt_tokens_details = true;
    let server = goodput_sim::SimServer::new(sim).unwrap();
    let sessions = Arc::new(SyntheticConversations {
        turns: "3".parse().unwrap(),
        user_tokens: "200".parse().unwrap(),
        output_tokens: Some("20".parse().unwrap()),
        think_time: ThinkTime::Fixed(Duration::from_millis(100)),
        prefix: None,
        agent: Some(
            AgentTurns::parse("tool-prob=0.5,tool-latency=50ms,result-tokens=300").unwrap(),
        ),
        vocabulary: Arc::new(PromptVocabulary::cl100k()),
        seed: 4,
    });
    let config = RunConfig {
        load: LoadSpec::Closed { concurrency: 2 },
        max_requests: Some(12),
        warmup: Warmup::None,
        ..RunConfig::default()
    };
    let client = support::in_memory_client(&server);
    let result = run_with(
        config,
        client,
        openai(server.model_name()),
        sessions,
        CancellationToken::new(),
    )
    .await;
    for record in &result.records {
        let (cached, input) = (
            record.cached_input_tokens.unwrap(),
            record.input_tokens.unwrap(),
        );
        if record.turn == Some(0) {
            assert_eq!(cached, 0);
        } else {
            let prefix = record.expected_prefix_tokens.unwrap();
            assert!(
                cached > 0 && cached % 16 == 0 && cached <= input,
                "{cached} of {input}"
            );
            assert!(
                cached + 64 >= prefix,
                "{cached} cached of a {prefix}-token history"
            );
        }
    }
    let reuse = result.step.prefix_reuse.unwrap();
    assert_eq!(reuse.requests_reporting_cached, 12);
    assert!(reuse.cached_fraction.unwrap() > 0.4, "{reuse:?}");
}
