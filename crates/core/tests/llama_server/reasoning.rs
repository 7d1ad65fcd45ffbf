//! llama-server's reasoning channel against goodput's split. The generated models never think
//! by themselves, so the server gets a ChatML chat template that opens `<think>` in the
//! assistant prefix (as Qwen3 and DeepSeek-R1 templates do with thinking on): llama.cpp's
//! template analyser then parses the output as tag-based reasoning and, with
//! `--reasoning-format deepseek`, streams every token before `</think>` as a
//! `reasoning_content` delta. A request grammar makes the random model close the block after a
//! few dozen letters and keep answering, so one stream carries both channels. (The budget
//! sampler, `--reasoning-budget`, cannot end the block on these models: it matches the start
//! tag as tokenized alone, `▁<think>` with the llama-spm tokenizer's leading space, which never
//! equals the prompt's tokens.)
//!
//! A relay between goodput and the server keeps the raw bytes with their arrival times; the
//! test parses that SSE itself and checks goodput's reasoning and answer tokens, TTFT and time
//! to first answer token against it and against the server's `timings`; with
//! `--reasoning-format none` the same block arrives as `<think>` tags inside `content`.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use goodput_core::backend::openai::ApiKind;
use goodput_core::http::{HttpClient, HttpConfig, Target};
use goodput_core::record::{ReasoningSource, RequestRecord};
use goodput_core::report::StepReport;
use goodput_core::workload::SyntheticWorkload;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use crate::server::{LlamaServer, Model, Options};
use crate::{assert_all_ok, closed, openai};

/// ChatML whose generation prompt opens a thinking block, and which renders an assistant
/// message's `reasoning_content` inside `<think>` tags (what llama.cpp's analyser looks for).
const THINKING_TEMPLATE: &str = "\
{%- for message in messages -%}
{{- '<|im_start|>' + message['role'] + '\\n' -}}
{%- if message['role'] == 'assistant' and message.get('reasoning_content') -%}
{{- '<think>\\n' + message['reasoning_content'] + '\\n</think>\\n\\n' -}}
{%- endif -%}
{{- message['content'] + '<|im_end|>\\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\\n' -}}
{%- if enable_thinking is defined and enable_thinking is false -%}
{{- '<think>\\n\\n</think>\\n\\n' -}}
{%- else -%}
{{- '<think>\\n' -}}
{%- endif -%}
{%- endif -%}
";

/// A server with the thinking template and `--reasoning-format deepseek`.
fn thinking_server(dir: &tempfile::TempDir) -> LlamaServer {
    server_with_format(dir, "deepseek")
}

/// A server with the thinking template and `--reasoning-format FORMAT`.
fn server_with_format(dir: &tempfile::TempDir, format: &str) -> LlamaServer {
    let template = dir.path().join("thinking.jinja");
    std::fs::write(&template, THINKING_TEMPLATE).unwrap();
    let mut options = Options::new(Model::Tiny, 1);
    options.extra = vec![
        "--jinja".into(),
        "--chat-template-file".into(),
        template.display().to_string(),
        "--reasoning-format".into(),
        format.into(),
    ];
    LlamaServer::start(&options)
}

/// Bytes one side of the relay saw, each read with its arrival time.
type Reads = Arc<Mutex<Vec<(Instant, Vec<u8>)>>>;

/// A TCP relay to `upstream` for one connection, keeping what each side sent.
struct Relay {
    address: String,
    requests: Reads,
    responses: Reads,
}

async fn relay(upstream: String) -> Relay {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let (requests, responses) = (Reads::default(), Reads::default());
    let (up_log, down_log) = (Arc::clone(&requests), Arc::clone(&responses));
    tokio::spawn(async move {
        let (client, _) = listener.accept().await.unwrap();
        let server = TcpStream::connect(&upstream).await.unwrap();
        let (client_read, client_write) = client.into_split();
        let (server_read, server_write) = server.into_split();
        tokio::spawn(pump(client_read, server_write, up_log));
        pump(server_read, client_write, down_log).await;
    });
    Relay {
        address,
        requests,
        responses,
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    log: Reads,
) {
    let mut buffer = vec![0u8; 1 << 16];
    while let Ok(read) = from.read(&mut buffer).await {
        if read == 0 {
            break;
        }
        let at = Instant::now();
        log.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((at, buffer[..read].to_vec()));
        if to.write_all(&buffer[..read]).await.is_err() {
            break;
        }
    }
}

/// One `data:` event of the raw stream: when its line was complete, and its JSON.
fn events(reads: &[(Instant, Vec<u8>)]) -> Vec<(Instant, Value)> {
    let (mut pending, mut events) = (String::new(), Vec::new());
    for (at, bytes) in reads {
        pending.push_str(&String::from_utf8_lossy(bytes));
        while let Some(end) = pending.find('\n') {
            let line: String = pending.drain(..=end).collect();
            let line = line.trim();
            if let Some(data) = line.strip_prefix("data: ")
                && data != "[DONE]"
            {
                let value = serde_json::from_str(data)
                    .unwrap_or_else(|error| panic!("bad SSE data {data:?}: {error}"));
                events.push((*at, value));
            }
        }
    }
    events
}

/// What the raw stream says about one answer.
#[derive(Debug, Default)]
struct Stream {
    reasoning_deltas: u64,
    answer_deltas: u64,
    /// The `content` deltas' texts and arrival times.
    contents: Vec<(Instant, String)>,
    /// Tokens the deltas' `logprobs` list, by channel.
    reasoning_logprobs: u64,
    answer_logprobs: u64,
    first_reasoning: Option<Instant>,
    first_answer: Option<Instant>,
    completion_tokens: Option<u64>,
    predicted_n: Option<f64>,
    prompt_ms: Option<f64>,
}

fn read_stream(events: &[(Instant, Value)]) -> Stream {
    let mut stream = Stream::default();
    for (at, event) in events {
        for choice in event["choices"].as_array().into_iter().flatten() {
            let delta = &choice["delta"];
            let logprobs = choice["logprobs"]["content"].as_array().map_or(0, Vec::len) as u64;
            if delta["reasoning_content"]
                .as_str()
                .is_some_and(|t| !t.is_empty())
            {
                stream.reasoning_deltas += 1;
                stream.reasoning_logprobs += logprobs;
                stream.first_reasoning.get_or_insert(*at);
            }
            if let Some(text) = delta["content"].as_str().filter(|t| !t.is_empty()) {
                stream.contents.push((*at, text.to_string()));
                stream.answer_deltas += 1;
                stream.answer_logprobs += logprobs;
                stream.first_answer.get_or_insert(*at);
            }
        }
        if let Some(tokens) = event["usage"]["completion_tokens"].as_u64() {
            stream.completion_tokens = Some(tokens);
            stream.predicted_n = event["timings"]["predicted_n"].as_f64();
            stream.prompt_ms = event["timings"]["prompt_ms"].as_f64();
        }
    }
    stream
}

/// One request of `output` tokens through a relay; goodput's record and the raw stream.
async fn one_request(
    server: &LlamaServer,
    output: u32,
    extra: &[(&str, Value)],
) -> (RequestRecord, Stream, Instant, StepReport) {
    let relay = relay(server.address()).await;
    let mut config = openai(ApiKind::Chat);
    for (key, value) in extra {
        config.extra_body.insert((*key).into(), value.clone());
    }
    let workload = Arc::new(SyntheticWorkload {
        input_tokens: 24,
        output_tokens: Some(output),
        seed: 21,
    });
    let target = Target::parse(&format!("http://{}/v1", relay.address)).unwrap();
    let client = HttpClient::tcp(target, HttpConfig::default());
    let result = crate::support::run_with(
        closed(1, 1),
        client,
        config,
        workload,
        CancellationToken::new(),
    )
    .await;
    assert_all_ok(&result.records);
    let responses = relay.responses.lock().unwrap().clone();
    let sent = relay.requests.lock().unwrap()[0].0;
    let record = result.records[0].clone();
    (record, read_stream(&events(&responses)), sent, result.step)
}

/// Microseconds from `from` to `to`.
fn us(from: Instant, to: Instant) -> u64 {
    to.duration_since(from).as_micros() as u64
}

/// goodput's token counts against the raw stream's: one token per reasoning delta, the
/// `hidden` end-tag tokens with the first answer token.
fn assert_counts(record: &RequestRecord, stream: &Stream, hidden: u64) {
    let r = stream.reasoning_deltas;
    assert_eq!(record.output_tokens, stream.completion_tokens.unwrap());
    assert_eq!(record.reasoning_tokens, Some(r), "reasoning tokens");
    assert_eq!(
        record.reasoning_tokens_source,
        Some(ReasoningSource::Deltas)
    );
    assert_eq!(record.chunks.len() as u64, r + stream.answer_deltas);
    let counts: Vec<u64> = record.chunks.iter().map(|c| c[1]).collect();
    assert!(counts[..r as usize].iter().all(|&n| n == 1), "{counts:?}");
    assert_eq!(
        counts[r as usize],
        hidden + 1,
        "the end tag's tokens arrive with the first answer token: {counts:?}"
    );
}

#[tokio::test]
async fn reasoning_content_tokens_and_first_answer_token_agree_with_the_raw_stream() {
    let dir = tempfile::tempdir().unwrap();
    let server = thinking_server(&dir);
    // Letters, then `</think>`, then the answer: both channels in every stream.
    let grammar = "root ::= [a-z]{24,48} \"</think>\" [a-z ]{1,400}";
    let extra = [
        ("grammar", json!(grammar)),
        ("logprobs", json!(true)),
        ("timings_per_token", json!(true)),
    ];
    for _ in 0..3 {
        let (record, stream, relay_sent, step) = one_request(&server, 40, &extra).await;
        let r = stream.reasoning_deltas;
        assert!(r > 0 && stream.answer_deltas > 0, "{stream:?}");
        // One token per delta (the logprobs say so); the `</think>` tokens have no delta.
        assert_eq!(stream.reasoning_logprobs, r, "{stream:?}");
        assert_eq!(stream.answer_logprobs, stream.answer_deltas, "{stream:?}");
        let completion = stream.completion_tokens.expect("usage");
        assert_eq!(completion, 40);
        assert_eq!(stream.predicted_n, Some(40.0), "the server's own timings");
        let hidden = completion - r - stream.answer_deltas;
        assert!(hidden > 0, "the end tag costs tokens: {stream:?}");

        assert_counts(&record, &stream, hidden);

        // TTFT is the first reasoning delta, TTFAT the first content delta.
        let first_token = record.first_token_us.unwrap();
        let first_answer = record.first_answer_us.expect("time to first answer token");
        assert_eq!(first_token, record.chunks[0][0]);
        assert_eq!(first_answer, record.chunks[r as usize][0]);
        let sent = record.sent_us.unwrap();
        // goodput sends before the relay sees the request and reads each event after the relay
        // forwarded it, so its times from send can only be longer than the relay's.
        let relay_ttft = us(relay_sent, stream.first_reasoning.unwrap());
        let relay_ttfat = us(relay_sent, stream.first_answer.unwrap());
        assert!(first_token - sent + 1 >= relay_ttft, "TTFT");
        assert!(first_answer - sent + 1 >= relay_ttfat, "TTFAT");
        assert!(relay_ttfat > relay_ttft);
        // The server processed the prompt before sending its first token.
        let prompt_ms = stream.prompt_ms.expect("timings.prompt_ms");
        assert!((first_token - sent) as f64 / 1e3 >= prompt_ms);
        assert_eq!(record.finish_reason.as_deref(), Some("length"));
        let reasoning = step.reasoning.expect("steps[].reasoning");
        assert_eq!(reasoning.reasoning_tokens_total, r);
        assert_eq!(reasoning.answer_tokens_total, completion - r);
        assert_eq!(reasoning.time_to_first_answer_from_send_ms.count, 1);
        assert_eq!(reasoning.empty_answers, 0);
        eprintln!(
            "reasoning {r} + end tag {hidden} + answer {} tokens; TTFT {} µs, TTFAT {} µs \
             (relay {relay_ttft} / {relay_ttfat} µs)",
            stream.answer_deltas,
            first_token - sent,
            first_answer - sent
        );
    }
}

#[tokio::test]
async fn thinking_that_fills_the_budget_leaves_an_empty_answer() {
    let dir = tempfile::tempdir().unwrap();
    let server = thinking_server(&dir);
    // No grammar: the random model never writes `</think>`, so all 24 tokens are reasoning.
    let extra = [("timings_per_token", json!(true))];
    let (record, stream, _, step) = one_request(&server, 24, &extra).await;
    assert_eq!(stream.answer_deltas, 0, "{stream:?}");
    assert_eq!(stream.completion_tokens, Some(24));
    assert_eq!(record.reasoning_tokens, Some(24));
    assert_eq!(record.output_tokens, 24);
    assert_eq!(record.first_answer_us, None);
    assert_eq!(record.finish_reason.as_deref(), Some("length"));
    let reasoning = step.reasoning.expect("steps[].reasoning");
    assert_eq!(
        reasoning.empty_answers, 1,
        "the answer_budget_exhausted warning counts it"
    );
    assert_eq!(reasoning.answer_tokens_total, 0);
}

#[tokio::test]
async fn think_tags_in_content_split_reasoning_from_the_answer() {
    // `--reasoning-format none`: the server leaves the thinking in `content`, the template's
    // opening `<think>` prepended to the first delta. The llama-spm vocabulary has no token
    // joining `>` to a letter or space, so the delta that completes `</think>` ends with it.
    let dir = tempfile::tempdir().unwrap();
    let server = server_with_format(&dir, "none");
    let grammar = "root ::= [a-z]{16,32} \"</think>\" [a-z ]{1,400}";
    let extra = [
        ("grammar", json!(grammar)),
        ("timings_per_token", json!(true)),
    ];
    let (record, stream, relay_sent, _) = one_request(&server, 32, &extra).await;
    assert_eq!(
        stream.reasoning_deltas, 0,
        "no reasoning_content: {stream:?}"
    );
    assert!(stream.contents[0].1.starts_with("<think>"), "{stream:?}");
    let mut text = String::new();
    let close = stream
        .contents
        .iter()
        .position(|(_, piece)| {
            text.push_str(piece);
            text.contains("</think>")
        })
        .expect("the grammar closes the block");
    assert!(text.ends_with("</think>"), "{text:?}");
    let thinking = close as u64 + 1;
    assert_eq!(
        record.chunks.len(),
        stream.contents.len(),
        "one chunk per delta"
    );
    assert!(
        record.chunks.iter().all(|c| c[1] == 1),
        "one token each (timings)"
    );
    assert_eq!(record.output_tokens, 32);
    assert_eq!(record.reasoning_tokens, Some(thinking), "tags included");
    assert_eq!(
        record.reasoning_tokens_source,
        Some(ReasoningSource::Deltas)
    );
    assert_eq!(record.answer_tokens(), 32 - thinking);
    let first_answer = record.first_answer_us.unwrap();
    assert_eq!(first_answer, record.chunks[thinking as usize][0]);
    let relay_ttfat = us(relay_sent, stream.contents[thinking as usize].0);
    assert!(first_answer - record.sent_us.unwrap() + 1 >= relay_ttfat);
}
