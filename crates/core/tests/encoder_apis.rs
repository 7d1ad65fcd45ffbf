//! The encoder APIs (`/v1/embeddings`, `/v1/rerank`): request shapes and item counts against
//! scripted servers written here (exact bytes, a known delay), failures when a server returns
//! fewer items than inputs, and a whole run against the simulator in virtual time whose
//! items/s and per-item latency follow from its fixed prefill time.
#![allow(clippy::unwrap_used)]

#[path = "support/harness.rs"]
mod harness;
mod support;
#[path = "support/wire_server.rs"]
mod wire_server;

use std::sync::Arc;
use std::time::Duration;

use goodput_core::backend::RequestInput;
use goodput_core::backend::openai::ApiKind;
use goodput_core::config::{LoadSpec, RunConfig, Warmup};
use goodput_core::decide::sweep::BatchedWorkload;
use goodput_core::metrics::Slo;
use goodput_core::record::OutcomeKind;
use goodput_core::workload::SyntheticWorkload;
use goodput_sim::SimServer;
use harness::{backend_at, config, send, spec};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use wire_server::{State, Step, TcpServer, response};

const EMBEDDINGS: &str = r#"{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]},{"object":"embedding","index":1,"embedding":[0.3,0.4]},{"object":"embedding","index":2,"embedding":[0.5,0.6]}],"model":"m","usage":{"prompt_tokens":23,"total_tokens":23}}"#;

fn batch(n: usize) -> RequestInput {
    RequestInput::Batch(
        (0..n)
            .map(|i| format!("document number {i} text"))
            .collect(),
    )
}

/// A server answering every request with `body` after `delay`.
async fn server(body: &'static str, delay: Duration) -> TcpServer {
    TcpServer::start(State::new(move |_, _| {
        vec![
            Step::Sleep(delay),
            Step::Write(response(
                "200 OK",
                "content-type: application/json\r\n",
                body,
            )),
        ]
    }))
    .await
}

#[tokio::test]
async fn embeddings_send_an_input_array_and_count_the_vectors_returned() {
    let delay = Duration::from_millis(40);
    let server = server(EMBEDDINGS, delay).await;
    let backend = backend_at(&server.url(), config(ApiKind::Embeddings));
    let started = tokio::time::Instant::now();
    let exchange = send(&backend, &spec(batch(3))).await;
    assert_eq!(exchange.failure, None);
    assert_eq!(exchange.choices, 3);
    assert_eq!(exchange.usage.unwrap().prompt_tokens, 23);
    // One output event, when the body ended: after the server's own delay.
    assert_eq!(exchange.chunks.len(), 1);
    assert!(exchange.chunks[0].at().duration_since(started) >= delay);
    let request = &server.state.requests()[0];
    assert!(
        request.head.starts_with("POST /v1/embeddings "),
        "{}",
        request.head
    );
    assert_eq!(request.header("accept"), None);
    let body = request.json();
    assert_eq!(body["input"].as_array().unwrap().len(), 3);
    assert_eq!(body["encoding_format"], json!("float"));
    assert_eq!(body["model"], json!("m"));
    for absent in ["stream", "max_tokens", "stream_options", "ignore_eos"] {
        assert!(body.get(absent).is_none(), "{absent} sent: {body}");
    }
    // Four inputs, three vectors back: a protocol failure, never three items.
    let short = send(&backend, &spec(batch(4))).await;
    let failure = short.failure.unwrap();
    assert_eq!(failure.kind, OutcomeKind::Protocol);
    assert!(
        failure.message.contains("3 data entries for 4 inputs"),
        "{failure:?}"
    );
}

#[tokio::test]
async fn rerank_sends_query_and_documents_and_counts_results() {
    let body = r#"{"results":[{"index":1,"relevance_score":0.8},{"index":0,"relevance_score":0.2}],"usage":{"total_tokens":31}}"#;
    let server = server(body, Duration::ZERO).await;
    let backend = backend_at(&server.url(), config(ApiKind::Rerank));
    let exchange = send(&backend, &spec(batch(2))).await;
    assert_eq!(exchange.failure, None);
    assert_eq!(exchange.choices, 2);
    assert_eq!(exchange.usage.unwrap().prompt_tokens, 31);
    let request = &server.state.requests()[0];
    assert!(
        request.head.starts_with("POST /v1/rerank "),
        "{}",
        request.head
    );
    let sent = request.json();
    assert_eq!(sent["query"], json!("document number 0 text"));
    assert_eq!(sent["documents"].as_array().unwrap().len(), 2);
    let none = server_with_no_results().await;
    let backend = backend_at(&none.url(), config(ApiKind::Rerank));
    let failure = send(&backend, &spec(batch(2))).await.failure.unwrap();
    assert_eq!(failure.kind, OutcomeKind::Protocol);
}

async fn server_with_no_results() -> TcpServer {
    server(r#"{"results":[]}"#, Duration::ZERO).await
}

/// Embeddings of 4 inputs per request, one request at a time, against the fixed engine (each
/// prefill 80 ms, 8 slots): every request takes exactly 80 ms, so 50 inputs/s, 12.5 req/s and
/// 20 ms per input; the simulator's usage counts each input's words.
#[tokio::test(start_paused = true)]
async fn embeddings_run_against_the_simulator_counts_items() {
    let sim = support::fixed(80, 10, 8);
    for (api, tokens_per_item) in [(ApiKind::Embeddings, 12), (ApiKind::Rerank, 24)] {
        let server = SimServer::new(sim.clone()).unwrap();
        let client = support::in_memory_client(&server);
        let mut openai = support::openai(server.model_name());
        openai.api = api;
        openai.stream = false;
        let inner = Arc::new(SyntheticWorkload {
            input_tokens: 12,
            output_tokens: None,
            seed: 3,
        });
        let workload = Arc::new(BatchedWorkload { inner, batch: 4 });
        let config = RunConfig {
            load: LoadSpec::Closed { concurrency: 1 },
            max_requests: Some(40),
            duration: None,
            warmup: Warmup::Requests(0),
            slo: Some(Slo::parse("e2e=100ms").unwrap()),
            seed: 1,
            ..RunConfig::default()
        };
        let run =
            support::run_with(config, client, openai, workload, CancellationToken::new()).await;
        let step = &run.step;
        assert_eq!(step.requests.completed, 40, "{api:?}: {:?}", step.requests);
        assert!(
            run.records
                .iter()
                .all(|r| r.items == 4 && r.output_tokens == 0)
        );
        let per_item = run.records[0].input_tokens.unwrap() / 4;
        // Rerank reads the query (the first prompt's words) with every document.
        assert!(per_item >= tokens_per_item / 2, "{api:?}: {per_item}");
        support::assert_ms(step.latency_ms.e2e.p50, 80.0, 1.0);
        support::assert_ms(step.latency_ms.e2e_per_item.p50, 20.0, 0.5);
        let t = &step.throughput;
        assert!((t.items_per_sec - 50.0).abs() < 1.0, "{api:?}: {t:?}");
        assert!((t.items_per_sec / t.requests_per_sec - 4.0).abs() < 1e-9);
        assert_eq!(step.goodput.attained_fraction, Some(1.0));
    }
}

/// `--api http`: the template rendered on the wire (typed and spliced placeholders), the
/// items counted by the path, and a path that finds nothing or a body that is not JSON as
/// protocol failures.
#[tokio::test]
async fn templated_json_api_renders_the_body_and_counts_items_by_path() {
    use goodput_core::backend::template::{
        ItemsPath, RequestTemplate, TemplateBackend, TemplateConfig,
    };
    use goodput_core::http::{HttpClient, HttpConfig, Target};

    let reply = r#"{"outputs": [{"scores": [0.1, 0.9]}, {"scores": [0.3, 0.7]}, {"scores": [0.5, 0.5]}], "usage": {"input_tokens": 9}}"#;
    let server = server(reply, Duration::from_millis(20)).await;
    let backend = |path: &str| {
        let template = RequestTemplate::parse(
            r#"{"instances": "{{prompts}}", "note": "batch of {{batch_size}} #{{index}}"}"#,
        )
        .unwrap();
        let config = TemplateConfig {
            template,
            items: Some(ItemsPath::parse(path).unwrap()),
            stream: goodput_core::backend::template::StreamFormat::None,
            tokens: None,
            headers: Vec::new(),
            api_key: None,
            sigv4: None,
            max_body_bytes: 1 << 20,
        };
        let url = format!("{}/predict?v=2", server.url().trim_end_matches("/v1"));
        let client = HttpClient::tcp(Target::parse(&url).unwrap(), HttpConfig::default());
        TemplateBackend::new(config, client).unwrap()
    };
    let exchange = send(&backend("$.outputs[*]"), &spec(batch(3))).await;
    assert_eq!(exchange.failure, None);
    assert_eq!(exchange.choices, 3);
    assert_eq!(exchange.usage.unwrap().prompt_tokens, 9);
    let request = &server.state.requests()[0];
    assert!(
        request.head.starts_with("POST /predict?v=2 "),
        "{}",
        request.head
    );
    let body = request.json();
    assert_eq!(body["instances"].as_array().unwrap().len(), 3);
    assert_eq!(body["note"], json!("batch of 3 #0"));
    let nothing = send(&backend("$.predictions[*]"), &spec(batch(3))).await;
    let failure = nothing.failure.unwrap();
    assert_eq!(failure.kind, OutcomeKind::Protocol);
    assert!(
        failure.message.contains("`$.predictions[*]` found nothing"),
        "{failure:?}"
    );
}
