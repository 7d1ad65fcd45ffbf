//! The OpenAI wire format as the simulator serves it over real loopback HTTP: streamed and
//! whole chat and text completions, usage accounting, `/v1/models`, `/health`, `/metrics`.
#![allow(clippy::unwrap_used)]

mod support;

use goodput_sim::config::{EngineConfig, PromptTokenizer};
use goodput_sim::{SimConfig, spawn};
use hyper::{Method, StatusCode};
use serde_json::{Value, json};
use support::{call, chat_prompt_tokens, cl100k_count, fixed_config, post};

const LOOPBACK: ([u8; 4], u16) = ([127, 0, 0, 1], 0);

fn chat_body(max_tokens: u64, stream_options: Value) -> Value {
    json!({
        "model": "sim-fixed",
        "messages": [
            {"role": "system", "content": "You are a terse assistant."},
            {"role": "user", "content": "Name three colours, please."}
        ],
        "max_tokens": max_tokens,
        "ignore_eos": true,
        "stream": true,
        "stream_options": stream_options,
    })
}

fn chat_prompt() -> u64 {
    chat_prompt_tokens(&[
        ("system", "You are a terse assistant."),
        ("user", "Name three colours, please."),
    ])
}

/// Checks the headers every event stream carries.
fn assert_stream_headers(reply: &support::Reply, id_prefix: &str) {
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.header("content-type"), Some("text/event-stream"));
    assert_eq!(reply.header("cache-control"), Some("no-cache"));
    let request_id = reply.header("x-request-id").unwrap();
    assert!(request_id.starts_with(id_prefix), "{request_id}");
    let server = concat!("goodput-sim/", env!("CARGO_PKG_VERSION"));
    assert_eq!(reply.header("server"), Some(server));
}

/// Checks one-token content chunks with `finish_reason` on the last; returns the text.
fn content_of_chat_chunks(chunks: &[Value]) -> String {
    let mut content = String::new();
    for (i, chunk) in chunks.iter().enumerate() {
        let choice = &chunk["choices"][0];
        assert_eq!(choice["index"], 0);
        assert!(choice["delta"].get("role").is_none());
        let text = choice["delta"]["content"].as_str().unwrap();
        assert_eq!(cl100k_count(text), 1, "one token per chunk: {text:?}");
        content.push_str(text);
        let last = i + 1 == chunks.len();
        let finish = if last { json!("length") } else { Value::Null };
        assert_eq!(choice["finish_reason"], finish);
        assert!(
            chunk.get("usage").is_none(),
            "intermediate chat chunks omit usage"
        );
    }
    content
}

#[tokio::test]
async fn streamed_chat_has_vllm_wire_shape_and_exact_usage() {
    let sim = spawn(fixed_config(5, 1), LOOPBACK.into()).await.unwrap();
    let body = chat_body(7, json!({"include_usage": true}));
    let reply = post(sim.addr(), "/v1/chat/completions", &body).await;
    assert_stream_headers(&reply, "chatcmpl-");
    assert_eq!(reply.events().last().map(String::as_str), Some("[DONE]"));
    let chunks = reply.json_events();
    // Role chunk, 7 content chunks (one token each), usage chunk.
    assert_eq!(chunks.len(), 1 + 7 + 1, "{:?}", reply.events());
    for chunk in &chunks {
        assert_eq!(chunk["id"], chunks[0]["id"]);
        assert_eq!(chunk["object"], "chat.completion.chunk");
        assert_eq!(chunk["model"], "sim-fixed");
    }
    let role = &chunks[0]["choices"][0];
    assert_eq!(role["delta"], json!({"role": "assistant", "content": ""}));
    assert_eq!(role["finish_reason"], Value::Null);
    assert!(chunks[0].get("usage").is_none());

    let content = content_of_chat_chunks(&chunks[1..8]);
    assert_eq!(
        cl100k_count(&content),
        7,
        "re-tokenizes to completion_tokens"
    );

    let usage = &chunks[8];
    assert_eq!(usage["choices"], json!([]));
    let prompt = chat_prompt();
    let expected =
        json!({"prompt_tokens": prompt, "completion_tokens": 7, "total_tokens": prompt + 7});
    assert_eq!(usage["usage"], expected);
    sim.shutdown_and_wait().await.unwrap();
}

#[tokio::test]
async fn continuous_usage_is_cumulative_on_every_chunk() {
    let sim = spawn(fixed_config(2, 1), LOOPBACK.into()).await.unwrap();
    let options = json!({"include_usage": false, "continuous_usage_stats": true});
    let reply = post(sim.addr(), "/v1/chat/completions", &chat_body(4, options)).await;
    let chunks = reply.json_events();
    assert_eq!(
        chunks.len(),
        1 + 4,
        "no final usage chunk without include_usage"
    );
    let completions: Vec<u64> = chunks
        .iter()
        .map(|chunk| chunk["usage"]["completion_tokens"].as_u64().unwrap())
        .collect();
    assert_eq!(completions, [0, 1, 2, 3, 4]);
    assert!(
        chunks
            .iter()
            .all(|chunk| chunk["usage"]["prompt_tokens"] == chat_prompt())
    );
}

#[tokio::test]
async fn streamed_completion_has_null_usage_and_no_role_chunk() {
    let sim = spawn(fixed_config(2, 1), LOOPBACK.into()).await.unwrap();
    let prompt = "The quick brown fox jumps over the lazy dog";
    let body = json!({
        "prompt": prompt, "max_tokens": 5, "ignore_eos": true, "stream": true,
        "stream_options": {"include_usage": true}
    });
    let reply = post(sim.addr(), "/v1/completions", &body).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert!(
        reply
            .header("x-request-id")
            .is_some_and(|id| id.starts_with("cmpl-"))
    );
    let chunks = reply.json_events();
    assert_eq!(chunks.len(), 5 + 1);
    let mut text = String::new();
    for (i, chunk) in chunks[..5].iter().enumerate() {
        assert_eq!(chunk["object"], "text_completion");
        assert_eq!(
            chunk["usage"],
            Value::Null,
            "the usage key is present and null"
        );
        let choice = &chunk["choices"][0];
        text.push_str(choice["text"].as_str().unwrap());
        assert_eq!(
            choice["finish_reason"],
            if i == 4 { json!("length") } else { Value::Null }
        );
    }
    assert_eq!(cl100k_count(&text), 5);
    let usage = &chunks[5];
    assert_eq!(usage["choices"], json!([]));
    assert_eq!(usage["usage"]["prompt_tokens"], cl100k_count(prompt) as u64);
    assert_eq!(usage["usage"]["completion_tokens"], 5);
    assert_eq!(reply.events().last().map(String::as_str), Some("[DONE]"));
}

#[tokio::test]
async fn multi_prompt_completions_interleave_choices_and_sum_usage() {
    let sim = spawn(fixed_config(2, 1), LOOPBACK.into()).await.unwrap();
    let prompts = ["one two three", "hello world"];
    let body = json!({
        "prompt": prompts, "max_tokens": 3, "ignore_eos": true, "stream": true,
        "stream_options": {"include_usage": true}
    });
    let chunks = post(sim.addr(), "/v1/completions", &body)
        .await
        .json_events();
    let mut tokens = [0u64; 2];
    let mut finished = [false; 2];
    for chunk in &chunks[..chunks.len() - 1] {
        let choice = &chunk["choices"][0];
        let index = choice["index"].as_u64().unwrap() as usize;
        assert!(!finished[index], "no chunk after a choice's finish_reason");
        tokens[index] += cl100k_count(choice["text"].as_str().unwrap()) as u64;
        finished[index] = choice["finish_reason"] == "length";
    }
    assert_eq!(tokens, [3, 3]);
    assert_eq!(finished, [true, true]);
    let usage = &chunks.last().unwrap()["usage"];
    let prompt_tokens: u64 = prompts.iter().map(|p| cl100k_count(p) as u64).sum();
    assert_eq!(usage["prompt_tokens"], prompt_tokens);
    assert_eq!(usage["completion_tokens"], 6);

    // Whole answer: one choice per prompt, in prompt order; token-id prompts count their ids.
    let body = json!({"prompt": [[1, 2, 3], [4, 5]], "max_tokens": 2, "ignore_eos": true});
    let whole = post(sim.addr(), "/v1/completions", &body).await.json();
    assert_eq!(whole["object"], "text_completion");
    assert_eq!(whole["choices"][0]["index"], 0);
    assert_eq!(whole["choices"][1]["index"], 1);
    assert_eq!(
        whole["usage"],
        json!({"prompt_tokens": 5, "completion_tokens": 4, "total_tokens": 9})
    );
}

#[tokio::test]
async fn whole_answers_carry_text_usage_and_defaults() {
    let mut config = fixed_config(2, 1);
    if let EngineConfig::Fixed(fixed) = &mut config.engine {
        fixed.max_model_len = 64;
    }
    let sim = spawn(config, LOOPBACK.into()).await.unwrap();
    let mut body = chat_body(6, Value::Null);
    body["stream"] = json!(false);
    let reply = post(sim.addr(), "/v1/chat/completions", &body).await;
    assert_eq!(reply.header("content-type"), Some("application/json"));
    let answer = reply.json();
    assert_eq!(answer["object"], "chat.completion");
    assert_eq!(answer["choices"][0]["message"]["role"], "assistant");
    assert_eq!(answer["choices"][0]["finish_reason"], "length");
    let content = answer["choices"][0]["message"]["content"].as_str().unwrap();
    assert_eq!(cl100k_count(content), 6);
    assert_eq!(answer["usage"]["completion_tokens"], 6);
    assert_eq!(answer["usage"]["prompt_tokens"], chat_prompt());

    // Chat without max_tokens fills the rest of the context.
    body.as_object_mut().unwrap().remove("max_tokens");
    let answer = post(sim.addr(), "/v1/chat/completions", &body).await.json();
    assert_eq!(answer["usage"]["completion_tokens"], 64 - chat_prompt());
    // Completions without max_tokens generate 16 tokens (vLLM's default).
    let answer = post(sim.addr(), "/v1/completions", &json!({"prompt": "hi"}))
        .await
        .json();
    assert_eq!(answer["usage"]["completion_tokens"], 16);
    assert_eq!(answer["choices"][0]["finish_reason"], "length");
}

#[tokio::test]
async fn natural_answers_stop_early_with_finish_reason_stop() {
    let config = SimConfig {
        natural_output_tokens_mean: Some(4.0),
        ..fixed_config(1, 1)
    };
    let sim = spawn(config, LOOPBACK.into()).await.unwrap();
    let mut stopped = 0;
    for _ in 0..10 {
        let body = json!({"prompt": "tell me", "max_tokens": 200, "min_tokens": 2});
        let answer = post(sim.addr(), "/v1/completions", &body).await.json();
        let tokens = answer["usage"]["completion_tokens"].as_u64().unwrap();
        assert!(tokens >= 2);
        if tokens < 200 {
            assert_eq!(answer["choices"][0]["finish_reason"], "stop");
            stopped += 1;
        }
    }
    assert!(stopped >= 9, "a mean of 4 tokens almost never reaches 200");
}

#[tokio::test]
async fn models_and_health() {
    let sim = spawn(fixed_config(1, 1), LOOPBACK.into()).await.unwrap();
    let models = call(sim.addr(), Method::GET, "/v1/models", None)
        .await
        .json();
    assert_eq!(models["object"], "list");
    let card = &models["data"][0];
    assert_eq!(
        (&card["id"], &card["object"]),
        (&json!("sim-fixed"), &json!("model"))
    );
    assert_eq!(card["max_model_len"], 4096);
    let health = call(sim.addr(), Method::GET, "/health", None).await;
    assert_eq!(health.status, StatusCode::OK);
}

/// Every metric family `/metrics` must describe (besides the token counters).
const METRIC_FAMILIES: [&str; 16] = [
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:cache_config_info",
    "vllm:num_preemptions_total",
    "vllm:prefix_cache_queries_total",
    "vllm:prefix_cache_hits_total",
    "vllm:spec_decode_num_drafts_total",
    "vllm:spec_decode_num_draft_tokens_total",
    "vllm:spec_decode_num_accepted_tokens_total",
    "vllm:spec_decode_num_accepted_tokens_per_pos_total",
    "goodput_sim:requests_rejected_total",
    "vllm:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds",
    "vllm:request_prompt_tokens",
    "vllm:request_generation_tokens",
    "vllm:iteration_tokens_total",
];

/// The value of the first sample line starting with `series`.
fn sample(text: &str, series: &str) -> String {
    let line = text.lines().find(|line| line.starts_with(series));
    let line = line.unwrap_or_else(|| panic!("{series} missing from\n{text}"));
    line.rsplit(' ').next().unwrap().to_string()
}

#[tokio::test]
async fn metrics_count_what_was_delivered() {
    let sim = spawn(fixed_config(1, 1), LOOPBACK.into()).await.unwrap();
    let body = json!({"prompt": "a b c", "max_tokens": 3, "ignore_eos": true, "stream": true});
    post(sim.addr(), "/v1/completions", &body).await;
    let body = json!({"prompt": "a b", "max_tokens": 2, "ignore_eos": true});
    post(sim.addr(), "/v1/completions", &body).await;
    let metrics = call(sim.addr(), Method::GET, "/metrics", None).await;
    assert!(
        metrics
            .header("content-type")
            .unwrap()
            .starts_with("text/plain")
    );
    let text = metrics.text();
    let labels = "{model_name=\"sim-fixed\"}";
    let value = |name: &str| sample(&text, &format!("{name}{labels}"));
    assert_eq!(value("vllm:generation_tokens_total"), "5");
    assert_eq!(value("vllm:prompt_tokens_total"), "5");
    assert_eq!(value("vllm:time_to_first_token_seconds_count"), "2");
    assert_eq!(value("vllm:inter_token_latency_seconds_count"), "3");
    assert_eq!(value("vllm:num_requests_running"), "0");
    let success = "vllm:request_success_total{model_name=\"sim-fixed\",finished_reason=\"length\"}";
    assert_eq!(sample(&text, success), "2");
    for name in METRIC_FAMILIES {
        assert!(text.contains(&format!("# HELP {name} ")), "{name}");
        assert!(text.contains(&format!("# TYPE {name} ")), "{name}");
    }
    let e2e = "vllm:e2e_request_latency_seconds_bucket{model_name=\"sim-fixed\",le=\"+Inf\"}";
    assert_eq!(sample(&text, e2e), "2");
}

#[tokio::test]
async fn batching_engine_serves_and_reports_prefix_cache_use() {
    let config = SimConfig {
        time_scale: 50.0,
        prompt_tokenizer: PromptTokenizer::Words,
        served_model_name: Some("llama-sim".to_string()),
        ..SimConfig::default()
    };
    let sim = spawn(config, LOOPBACK.into()).await.unwrap();
    let prompt = "word ".repeat(200);
    for _ in 0..2 {
        let body = json!({"prompt": prompt, "max_tokens": 4, "ignore_eos": true});
        let answer = post(sim.addr(), "/v1/completions", &body).await.json();
        assert_eq!(answer["usage"]["prompt_tokens"], 200);
        assert_eq!(answer["usage"]["completion_tokens"], 4);
        assert_eq!(answer["model"], "llama-sim");
    }
    let stats = sim.server().stats();
    assert_eq!(stats.prefix_queries_tokens, 400);
    // The second request reuses the 12 full blocks of 16 tokens of the first.
    assert_eq!(stats.prefix_hits_tokens, 192);
    let text = sim.server().metrics_text();
    assert!(text.contains("enable_prefix_caching=\"True\""), "{text}");
    assert!(text.contains("vllm:iteration_tokens_total_count{model_name=\"llama-sim\"}"));
}

#[tokio::test]
async fn one_connection_serves_requests_in_turn_and_echoes_request_ids() {
    let sim = spawn(fixed_config(1, 1), LOOPBACK.into()).await.unwrap();
    let mut sender = support::connect(sim.addr()).await;
    for stream in [true, false, true] {
        let body = json!({"prompt": "hi", "max_tokens": 3, "ignore_eos": true, "stream": stream});
        let mut request = support::request(Method::POST, "/v1/completions", Some(&body));
        let id = hyper::header::HeaderValue::from_static("client-42");
        request.headers_mut().insert("x-request-id", id);
        let response = support::send(&mut sender, request).await.unwrap();
        let reply = support::read_reply(response).await.unwrap();
        assert_eq!(reply.status, StatusCode::OK);
        assert_eq!(reply.header("x-request-id"), Some("client-42"));
    }
}

#[tokio::test]
async fn a_long_prompt_is_counted_exactly() {
    let mut config = fixed_config(1, 1);
    if let EngineConfig::Fixed(fixed) = &mut config.engine {
        fixed.max_model_len = 100_000;
    }
    let sim = spawn(config, LOOPBACK.into()).await.unwrap();
    let prompt = "The weather today is mild, with a light breeze. ".repeat(2_000);
    let body = json!({"prompt": prompt, "max_tokens": 1});
    let answer = post(sim.addr(), "/v1/completions", &body).await.json();
    assert_eq!(
        answer["usage"]["prompt_tokens"],
        cl100k_count(&prompt) as u64
    );
}
