//! Reasoning models and tool calls, end to end through the runner in virtual time: against a
//! hand-written server whose every byte and delay the test chooses (the independent reference),
//! and against the simulator's emulation. TTFT counts the first generated token of any kind;
//! the time to first answer token (TTFAT) the first that is not reasoning.
#![allow(clippy::unwrap_used)]

#[path = "support/wire_server.rs"]
mod wire_server;

mod support;

use std::sync::Arc;
use std::time::Duration;

use goodput_core::backend::openai::ApiKind;
use goodput_core::config::{LoadSpec, RunConfig, Warmup};
use goodput_core::http::{BoxIo, FnConnector, HttpClient, HttpConfig, Target};
use goodput_core::metrics::Slo;
use goodput_core::record::ReasoningSource;
use goodput_core::workload::SyntheticWorkload;
use goodput_sim::config::{AgentConfig, ReasoningFormat};
use serde_json::json;
use support::{RunResult, assert_ms, fixed, openai, run_sim, run_with};
use tokio_util::sync::CancellationToken;
use wire_server::{LAST_CHUNK, State, Step, chunk, sse_head};

fn closed(requests: u64) -> RunConfig {
    RunConfig {
        load: LoadSpec::Closed { concurrency: 1 },
        max_requests: Some(requests),
        warmup: Warmup::None,
        ..RunConfig::default()
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn event(json: serde_json::Value) -> Step {
    Step::Write(chunk(format!("data: {json}\n\n").as_bytes()))
}

fn delta(delta: serde_json::Value, finish: Option<&str>) -> Step {
    event(json!({"object": "chat.completion.chunk",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}))
}

/// A scripted answer: role chunk, then `(delay, step)` pairs, then usage and `[DONE]`.
fn script(steps: Vec<(u64, Step)>, usage: Option<serde_json::Value>) -> Vec<Step> {
    let mut out = vec![
        Step::Write(sse_head("")),
        delta(json!({"role": "assistant", "content": ""}), None),
    ];
    for (delay, step) in steps {
        if delay > 0 {
            out.push(Step::Sleep(ms(delay)));
        }
        out.push(step);
    }
    if let Some(usage) = usage {
        out.push(event(json!({"choices": [], "usage": usage})));
    }
    out.push(Step::Write(chunk(b"data: [DONE]\n\n")));
    out.push(Step::Write(LAST_CHUNK.to_vec()));
    out
}

/// Runs `requests` requests against a hand-written server answering every one with `steps`.
async fn run_script(steps: Vec<Step>, requests: u64, slo: Option<&str>) -> RunResult {
    run_api(steps, requests, slo, ApiKind::Chat).await.0
}

/// [`run_script`] on `api`; also returns what the server received.
async fn run_api(
    steps: Vec<Step>,
    requests: u64,
    slo: Option<&str>,
    api: ApiKind,
) -> (RunResult, State) {
    let state = State::new(move |_, _| steps.clone());
    let captured = state.clone();
    let connector = FnConnector::new(move || {
        let state = state.clone();
        async move {
            let (client, mut served) = tokio::io::duplex(1 << 16);
            tokio::spawn(async move { wire_server::serve(&mut served, &state).await });
            Ok(Box::new(client) as BoxIo)
        }
    });
    let target = Target::parse("http://script.test/v1").unwrap();
    let client = HttpClient::new(target, Arc::new(connector), HttpConfig::default());
    let workload = Arc::new(SyntheticWorkload {
        input_tokens: 8,
        output_tokens: Some(6),
        seed: 1,
    });
    let mut config = closed(requests);
    config.slo = slo.map(|text| Slo::parse(text).unwrap());
    let mut openai = openai("m");
    openai.continuous_usage = false;
    openai.api = api;
    let result = run_with(config, client, openai, workload, CancellationToken::new()).await;
    (result, captured)
}

#[tokio::test(start_paused = true)]
async fn reasoning_content_then_answer_is_timed_and_counted_apart() {
    // First reasoning token at 100 ms, two more 10 ms apart, the answer's first token 50 ms
    // later (at 170 ms), then two more answer tokens; usage says 3 of 6 tokens were reasoning.
    let steps = script(
        vec![
            (100, delta(json!({"reasoning_content": "Let"}), None)),
            (10, delta(json!({"reasoning_content": " me"}), None)),
            (10, delta(json!({"reasoning_content": " think"}), None)),
            (50, delta(json!({"content": "The"}), None)),
            (10, delta(json!({"content": " answer"}), None)),
            (10, delta(json!({"content": " is"}), Some("stop"))),
        ],
        Some(
            json!({"prompt_tokens": 9, "completion_tokens": 6, "total_tokens": 15,
                    "completion_tokens_details": {"reasoning_tokens": 3}}),
        ),
    );
    let result = run_script(steps, 3, Some("ttfat=170ms,ttfat_p99=200ms")).await;
    for record in &result.records {
        assert_eq!(record.reasoning_tokens, Some(3));
        assert_eq!(record.reasoning_tokens_source, Some(ReasoningSource::Usage));
        assert_eq!(record.answer_tokens(), 3);
        assert_eq!(record.ttft(), Some(ms(100)));
        assert_eq!(record.ttfat(), Some(ms(170)));
        assert_eq!(record.thinking_time(), Some(ms(70)));
        assert!(!record.ended_in_tool_call && record.tool_calls == 0);
    }
    let step = &result.step;
    assert_ms(step.latency_ms.ttft.p50, 100.0, 0.2);
    let reasoning = step.reasoning.as_ref().unwrap();
    assert_eq!(reasoning.requests_with_reasoning, 3);
    assert_eq!(reasoning.reasoning_from_usage, 3);
    assert_eq!(
        (
            reasoning.reasoning_tokens_total,
            reasoning.answer_tokens_total
        ),
        (9, 9)
    );
    assert_ms(reasoning.time_to_first_answer_ms.p50, 170.0, 0.2);
    assert_ms(reasoning.time_to_first_answer_ms.max, 170.0, 0.2);
    assert_ms(reasoning.thinking_ms.p99, 70.0, 0.2);
    let output = step.throughput.output_tokens_per_sec;
    assert!((reasoning.reasoning_tokens_per_sec - output / 2.0).abs() < 1e-9);
    assert!((reasoning.answer_tokens_per_sec - output / 2.0).abs() < 1e-9);
    assert_eq!(
        (reasoning.empty_answers, reasoning.truncated_answers),
        (0, 0)
    );
    assert!(step.tool_calls.is_none());
    assert_eq!(step.goodput.attained_fraction, Some(1.0));
    assert_eq!(step.goodput.objectives_passed, Some(true));
}

#[tokio::test(start_paused = true)]
async fn think_tags_in_content_are_reasoning_counted_from_the_deltas() {
    // No usage details: the reasoning count comes from the chunks (one token each). The
    // `<think>` tag arrives alone, split over two chunks of the answer's own stream.
    let steps = script(
        vec![
            (40, delta(json!({"content": "<th"}), None)),
            (0, delta(json!({"content": "ink>"}), None)),
            (10, delta(json!({"content": "hm"}), None)),
            (10, delta(json!({"content": "</think>"}), None)),
            (30, delta(json!({"content": "Yes"}), None)),
            (10, delta(json!({"content": "!"}), Some("stop"))),
        ],
        Some(json!({"prompt_tokens": 9, "completion_tokens": 6, "total_tokens": 15})),
    );
    let result = run_script(steps, 1, None).await;
    let record = &result.records[0];
    // "<th" was taken for answer text when it arrived; the tag it began is reasoning.
    assert_eq!(record.reasoning_tokens, Some(3));
    assert_eq!(
        record.reasoning_tokens_source,
        Some(ReasoningSource::Deltas)
    );
    assert_eq!(record.ttft(), Some(ms(40)));
    assert_eq!(record.ttfat(), Some(ms(40)));
}

/// A chat chunk carrying `delta` and llama.cpp's per-chunk `timings` (`timings_per_token`).
fn timed(delta: serde_json::Value, predicted: u64) -> Step {
    event(json!({"object": "chat.completion.chunk",
                 "choices": [{"index": 0, "delta": delta, "finish_reason": null}],
                 "timings": {"predicted_n": predicted, "prompt_n": 9}}))
}

#[tokio::test(start_paused = true)]
async fn llama_cpp_per_chunk_timings_give_exact_counts_across_a_hidden_end_tag() {
    // As llama-server streams a thinking template: two reasoning tokens, then three tokens of
    // `</think>` that produce no delta, then the answer's first token (cumulative 6) and one
    // more. Without the timings the 7 tokens would be spread over 4 chunks by tokenizer count.
    let steps = script(
        vec![
            (10, timed(json!({"reasoning_content": "Hmm"}), 1)),
            (10, timed(json!({"reasoning_content": " so"}), 2)),
            (40, timed(json!({"content": "Yes"}), 6)),
            (10, timed(json!({"content": "!"}), 7)),
            (0, delta(json!({}), Some("length"))),
        ],
        Some(json!({"prompt_tokens": 9, "completion_tokens": 7, "total_tokens": 16})),
    );
    let result = run_script(steps, 1, None).await;
    let record = &result.records[0];
    let counts: Vec<u64> = record.chunks.iter().map(|c| c[1]).collect();
    assert_eq!(counts, [1, 1, 4, 1]);
    assert_eq!(record.reasoning_tokens, Some(2));
    assert_eq!(record.answer_tokens(), 5);
    assert_eq!(record.ttft(), Some(ms(10)));
    assert_eq!(record.ttfat(), Some(ms(60)));
}

#[tokio::test(start_paused = true)]
async fn an_unopened_close_tag_makes_the_earlier_content_reasoning() {
    // DeepSeek-R1 without a reasoning parser: the template opened `<think>`, the model only
    // closes it.
    let steps = script(
        vec![
            (60, delta(json!({"content": "Okay"}), None)),
            (10, delta(json!({"content": " so"}), None)),
            (10, delta(json!({"content": "</think>"}), None)),
            (20, delta(json!({"content": "Four"}), Some("stop"))),
        ],
        Some(json!({"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13})),
    );
    let record = run_script(steps, 1, None).await.records.remove(0);
    assert_eq!(record.reasoning_tokens, Some(3));
    assert_eq!(record.answer_tokens(), 1);
    assert_eq!(record.ttft(), Some(ms(60)));
    assert_eq!(record.ttfat(), Some(ms(100)));
}

#[tokio::test(start_paused = true)]
async fn tool_call_deltas_are_counted_and_timed() {
    let call = |id: Option<&str>, name: Option<&str>, arguments: &str| {
        let mut function = json!({"arguments": arguments});
        if let Some(name) = name {
            function["name"] = json!(name);
        }
        let mut call = json!({"index": 0, "function": function});
        if let Some(id) = id {
            call["id"] = json!(id);
            call["type"] = json!("function");
        }
        json!({"tool_calls": [call]})
    };
    let steps = script(
        vec![
            (50, delta(json!({"reasoning": "need data"}), None)),
            (80, delta(call(Some("c1"), Some("get_weather"), ""), None)),
            (10, delta(call(None, None, "{\"city\": "), None)),
            (
                10,
                delta(call(None, None, "\"Paris\"}"), Some("tool_calls")),
            ),
        ],
        Some(json!({"prompt_tokens": 9, "completion_tokens": 9, "total_tokens": 18})),
    );
    let result = run_script(steps, 2, None).await;
    let record = &result.records[0];
    assert_eq!(record.tool_calls, 1);
    assert!(record.ended_in_tool_call);
    assert_eq!(record.ttft(), Some(ms(50)));
    assert_eq!(record.ttfat(), Some(ms(130)));
    assert_eq!(record.time_to_first_tool_call(), Some(ms(130)));
    assert_eq!(
        record.reasoning_tokens_source,
        Some(ReasoningSource::Deltas)
    );
    // 9 usage tokens over chunks weighted by cl100k: "need data" (2), "get_weather" (3),
    // "{\"city\": " (4), "\"Paris\"}" (3) → 9·2/12 rounds to 2 reasoning tokens, 7 for the call.
    assert_eq!(record.reasoning_tokens, Some(2));
    assert_eq!(record.tool_call_tokens, Some(7));
    let tools = result.step.tool_calls.as_ref().unwrap();
    assert_eq!(
        (
            tools.requests_with_tool_calls,
            tools.ended_in_tool_call,
            tools.ended_in_text
        ),
        (2, 2, 0)
    );
    assert_eq!((tools.tool_calls, tools.tool_call_tokens_total), (2, 14));
    assert_ms(tools.time_to_first_tool_call_ms.p50, 130.0, 0.2);
}

#[tokio::test(start_paused = true)]
async fn thinking_that_uses_the_budget_leaves_an_empty_answer_that_misses_ttfat() {
    let steps = script(
        vec![
            (30, delta(json!({"reasoning_content": "a"}), None)),
            (
                10,
                delta(json!({"reasoning_content": " b"}), Some("length")),
            ),
        ],
        Some(
            json!({"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11,
                    "completion_tokens_details": {"reasoning_tokens": 2}}),
        ),
    );
    let result = run_script(steps, 2, Some("ttft=1s,ttfat=1s,ttfat_p50=1s")).await;
    let record = &result.records[0];
    assert!(record.answer_empty_after_reasoning());
    assert_eq!((record.ttft(), record.ttfat()), (Some(ms(30)), None));
    let step = &result.step;
    assert_eq!(step.reasoning.as_ref().unwrap().empty_answers, 2);
    assert_eq!(step.goodput.attained_fraction, Some(0.0));
    assert_eq!(step.goodput.objectives[0].measured_ms, None);
    assert_eq!(step.goodput.objectives_passed, Some(false));
}

fn agent(reasoning: u32, format: ReasoningFormat, tool_calls: f64) -> AgentConfig {
    AgentConfig {
        reasoning_tokens: reasoning,
        reasoning_format: format,
        tool_call_probability: tool_calls,
        ..AgentConfig::default()
    }
}

#[tokio::test(start_paused = true)]
async fn the_simulator_emulates_reasoning_in_every_format() {
    // TTFT 100 ms, ITL 10 ms, 50 tokens of which 20 reasoning: the 21st token, the first of
    // the answer, comes 20 ITLs after the first: TTFAT = 300 ms.
    for format in [
        ReasoningFormat::ReasoningContent,
        ReasoningFormat::Reasoning,
        ReasoningFormat::ThinkTags,
    ] {
        let mut sim = fixed(100, 10, 4);
        sim.agent = agent(20, format, 0.0);
        let result = run_sim(sim, closed(4), 16, 50).await;
        for record in &result.records {
            assert_eq!(record.output_tokens, 50, "{format:?}");
            assert_eq!(record.reasoning_tokens, Some(20), "{format:?}");
            assert_eq!(record.answer_tokens(), 30, "{format:?}");
        }
        let reasoning = result.step.reasoning.unwrap();
        assert_ms(result.step.latency_ms.ttft.p50, 100.0, 1.0);
        assert_ms(reasoning.time_to_first_answer_ms.p50, 300.0, 1.0);
        assert_ms(reasoning.time_to_first_answer_ms.max, 300.0, 1.0);
        assert_eq!(reasoning.reasoning_from_usage, 4, "{format:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn the_simulator_budget_and_tool_calls() {
    // Thinking longer than max_tokens: every answer is empty and cut at the limit.
    let mut sim = fixed(100, 10, 4);
    sim.agent = agent(80, ReasoningFormat::ReasoningContent, 0.0);
    let result = run_sim(sim, closed(2), 16, 50).await;
    let reasoning = result.step.reasoning.unwrap();
    assert_eq!(
        (reasoning.empty_answers, reasoning.reasoning_tokens_total),
        (2, 100)
    );
    assert_eq!(reasoning.time_to_first_answer_ms.count, 0);
    // A server-side budget of 10 tokens: the answer starts at the 11th.
    let mut sim = fixed(100, 10, 4);
    sim.agent = AgentConfig {
        reasoning_budget: Some(10),
        ..agent(80, ReasoningFormat::ReasoningContent, 0.0)
    };
    let result = run_sim(sim, closed(2), 16, 50).await;
    assert_ms(
        result.step.reasoning.unwrap().time_to_first_answer_ms.p50,
        200.0,
        1.0,
    );
    // Tool calls: only for requests that offer tools.
    let server = goodput_sim::SimServer::new({
        let mut sim = fixed(100, 10, 4);
        sim.agent = agent(5, ReasoningFormat::Reasoning, 1.0);
        sim
    })
    .unwrap();
    let mut config = openai(server.model_name());
    config.extra_body.insert(
        "tools".into(),
        json!([{"type": "function", "function": {"name": "lookup", "parameters": {}}}]),
    );
    let workload = Arc::new(SyntheticWorkload {
        input_tokens: 16,
        output_tokens: Some(20),
        seed: 1,
    });
    let client = support::in_memory_client(&server);
    let result = run_with(
        closed(3),
        client,
        config,
        workload,
        CancellationToken::new(),
    )
    .await;
    for record in &result.records {
        assert_eq!(record.finish_reason.as_deref(), Some("tool_calls"));
        assert!(record.ended_in_tool_call);
        assert_eq!(record.time_to_first_tool_call(), Some(ms(150)));
    }
    let tools = result.step.tool_calls.unwrap();
    assert_eq!((tools.ended_in_tool_call, tools.tool_calls), (3, 3));
    assert_eq!(tools.tool_call_tokens_total, 45, "15 answer tokens each");
}

#[tokio::test(start_paused = true)]
async fn the_responses_api_streams_typed_events() {
    let typed = |kind: &str, delta: &str| event(json!({"type": kind, "delta": delta}));
    let completed = json!({"type": "response.completed", "response": {"status": "completed",
        "usage": {"input_tokens": 9, "output_tokens": 4, "total_tokens": 13,
                  "input_tokens_details": {"cached_tokens": 3},
                  "output_tokens_details": {"reasoning_tokens": 2}}}});
    let steps = vec![
        Step::Write(sse_head("")),
        Step::Write(chunk(
            b"event: response.created\ndata: {\"type\":\"response.created\"}\n\n",
        )),
        Step::Sleep(ms(100)),
        typed("response.reasoning_text.delta", "Let"),
        Step::Sleep(ms(10)),
        typed("response.reasoning_text.delta", " me"),
        Step::Sleep(ms(50)),
        typed("response.output_text.delta", "Yes"),
        Step::Sleep(ms(10)),
        typed("response.output_text.delta", " sir"),
        event(completed),
        Step::Write(LAST_CHUNK.to_vec()),
    ];
    let (result, state) = run_api(steps, 2, None, ApiKind::Responses).await;
    let record = &result.records[0];
    assert_eq!(record.failure, None);
    assert_eq!(
        (record.ttft(), record.ttfat()),
        (Some(ms(100)), Some(ms(160)))
    );
    assert_eq!(
        (record.output_tokens, record.reasoning_tokens),
        (4, Some(2))
    );
    assert_eq!(
        (record.input_tokens, record.cached_input_tokens),
        (Some(9), Some(3))
    );
    assert_eq!(record.finish_reason.as_deref(), Some("stop"));
    let request = &state.requests()[0];
    assert!(request.head.starts_with("POST /v1/responses HTTP/1.1"));
    let body = request.json();
    assert!(
        body["input"].is_array() || body["input"].is_string(),
        "{body}"
    );
    assert_eq!(body["max_output_tokens"], 6);
    assert!(body.get("stream_options").is_none() && body.get("max_tokens").is_none());
}
