//! goodput against a real inference server: llama.cpp's `llama-server` serving small generated
//! models (real HTTP stack, slots, continuous batching, tokenizer and chunk merging). Built
//! only with `--features llama-server`; `.ci/run` builds the server
//! (`scripts/llama-server.sh`) and runs this target, which fails — never skips — when the
//! server or a model is missing.
#![allow(clippy::unwrap_used, unreachable_pub)]

#[allow(missing_debug_implementations)]
#[path = "../support/mod.rs"]
mod support;

mod calibrate;
mod encoders;
mod keepalive;
mod load;
mod reasoning;
mod server;
mod timing;
mod wire;

use std::sync::Arc;
use std::time::Duration;

use goodput_core::backend::openai::{ApiKind, OpenAiBackend, OpenAiConfig};
use goodput_core::backend::{Activity, Backend, RequestInput, RequestSpec};
use goodput_core::config::{Arrival, LoadSpec, RunConfig, Warmup};
use goodput_core::http::{HttpClient, HttpConfig, Target};
use goodput_core::record::{Exchange, RequestRecord};
use goodput_core::workload::SyntheticWorkload;
use tokio_util::sync::CancellationToken;

use server::LlamaServer;
use support::RunResult;

/// A client of `server` with goodput's default settings (or `config`).
pub fn client(server: &LlamaServer, config: HttpConfig) -> HttpClient {
    HttpClient::tcp(Target::parse(&server.url()).unwrap(), config)
}

/// goodput's default request settings (those of `goodput run`): streamed, usage asked for
/// (final and continuous), fixed output length, no model name (the server's only model).
pub fn openai(api: ApiKind) -> OpenAiConfig {
    OpenAiConfig {
        api,
        ..support::openai("")
    }
}

/// A closed loop of `concurrency` for `requests` requests.
pub fn closed(concurrency: u32, requests: u64) -> RunConfig {
    RunConfig {
        load: LoadSpec::Closed { concurrency },
        max_requests: Some(requests),
        warmup: Warmup::None,
        request_timeout: Duration::from_secs(120),
        ..RunConfig::default()
    }
}

/// An open loop at `rate` req/s with `arrival` for `requests` requests.
pub fn open(rate: f64, arrival: Arrival, requests: u64) -> RunConfig {
    RunConfig {
        load: LoadSpec::Open {
            rate_per_sec: rate,
            arrival,
            max_concurrency: None,
        },
        ..closed(1, requests)
    }
}

/// Runs `config` against `server` with synthetic prompts of `input` (cl100k) tokens asking for
/// `output` tokens.
pub async fn run(
    server: &LlamaServer,
    config: RunConfig,
    openai: OpenAiConfig,
    input: u32,
    output: u32,
) -> RunResult {
    let workload = Arc::new(SyntheticWorkload {
        input_tokens: input,
        output_tokens: Some(output),
        seed: 8,
    });
    let client = client(server, HttpConfig::default());
    support::run_with(config, client, openai, workload, CancellationToken::new()).await
}

/// One request through the backend, keeping the whole [`Exchange`] (every event's time).
pub async fn exchange(server: &LlamaServer, config: OpenAiConfig, spec: &RequestSpec) -> Exchange {
    let backend = OpenAiBackend::new(config, client(server, HttpConfig::default())).unwrap();
    let mut exchange = Exchange::default();
    let activity = Activity::default();
    tokio::time::timeout(
        Duration::from_secs(120),
        backend.send(spec, &mut exchange, &activity),
    )
    .await
    .expect("llama-server answers within 2 minutes");
    exchange
}

/// A request for `prompt` asking for `max_tokens`.
pub fn spec(prompt: &str, max_tokens: u64) -> RequestSpec {
    RequestSpec {
        index: 0,
        input: RequestInput::Text(prompt.to_string()),
        expected_input_tokens: None,
        max_output_tokens: Some(max_tokens),
        turn: None,
        tags: Default::default(),
    }
}

/// Asserts every record completed, showing the failures otherwise.
#[track_caller]
pub fn assert_all_ok(records: &[RequestRecord]) {
    let failed: Vec<_> = records.iter().filter_map(|r| r.failure.as_ref()).collect();
    assert!(failed.is_empty(), "failed requests: {failed:?}");
}

/// Milliseconds of a duration.
pub fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// The median of `values` (sorted copy).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}
