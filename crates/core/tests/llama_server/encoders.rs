//! The encoder APIs against llama-server: `--embeddings` (mean pooling over the generated
//! model) and `--reranking`. goodput's items and input tokens are checked against the server's
//! own answer to a raw request the test writes by hand for the same inputs (count of vectors or
//! results, `usage.prompt_tokens`), and a closed-loop run of batches completes with every
//! record's items equal to the batch. (llama-server reports no timings for these endpoints.)

use std::sync::Arc;

use goodput_core::backend::RequestInput;
use goodput_core::backend::openai::ApiKind;
use goodput_core::decide::sweep::BatchedWorkload;
use goodput_core::http::HttpConfig;
use goodput_core::workload::{SyntheticWorkload, Workload};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::server::{LlamaServer, Model, Options};
use crate::{assert_all_ok, client, closed, support};

const BATCH: u32 = 4;

fn workload() -> BatchedWorkload {
    let inner = Arc::new(SyntheticWorkload {
        input_tokens: 24,
        output_tokens: None,
        seed: 11,
    });
    BatchedWorkload {
        inner,
        batch: BATCH,
    }
}

fn texts(workload: &BatchedWorkload, index: u64) -> Vec<String> {
    match workload.request(index).input {
        RequestInput::Batch(texts) => texts,
        other => panic!("a batch, not {other:?}"),
    }
}

fn start(flags: &[&str]) -> LlamaServer {
    let mut options = Options::new(Model::Tiny, 2);
    options.extra = flags.iter().map(|f| f.to_string()).collect();
    LlamaServer::start(&options)
}

/// Runs 8 batches at concurrency 2 and checks each record against a raw request for the same
/// inputs: `(path, body of the raw request, key of the items)`.
async fn check(
    server: &LlamaServer,
    api: ApiKind,
    raw: impl Fn(&[String]) -> (&'static str, Value, &'static str),
) {
    let workload = Arc::new(workload());
    let mut openai = crate::openai(api);
    openai.stream = false;
    let run = support::run_with(
        closed(2, 8),
        client(server, HttpConfig::default()),
        openai,
        Arc::clone(&workload) as Arc<dyn Workload>,
        CancellationToken::new(),
    )
    .await;
    assert_all_ok(&run.records);
    assert_eq!(run.step.requests.completed, 8);
    for record in &run.records {
        let (path, body, key) = raw(&texts(&workload, record.index));
        let (status, answer) = server.post(path, &body.to_string());
        assert_eq!(status, 200, "{answer}");
        let answer: Value = serde_json::from_str(&answer).unwrap();
        let items = answer[key].as_array().unwrap().len();
        assert_eq!(items, BATCH as usize);
        assert_eq!(record.items, BATCH, "{api:?} record {}", record.index);
        let tokens = answer["usage"]["prompt_tokens"].as_u64().unwrap();
        assert_eq!(
            record.input_tokens,
            Some(tokens),
            "{api:?} {}",
            record.index
        );
        assert!(record.e2e().is_some() && record.output_tokens == 0);
    }
    let ratio = run.step.throughput.items_per_sec / run.step.throughput.requests_per_sec;
    assert!((ratio - f64::from(BATCH)).abs() < 1e-9, "{ratio}");
}

#[tokio::test]
async fn embeddings_items_and_tokens_match_the_server() {
    let server = start(&["--embeddings", "--pooling", "mean"]);
    check(&server, ApiKind::Embeddings, |texts| {
        let body = json!({"input": texts, "encoding_format": "float"});
        ("/v1/embeddings", body, "data")
    })
    .await;
}

#[tokio::test]
async fn rerank_items_and_tokens_match_the_server() {
    let server = start(&["--reranking"]);
    check(&server, ApiKind::Rerank, |texts| {
        let words: Vec<&str> = texts[0].split_whitespace().take(16).collect();
        let body = json!({"query": words.join(" "), "documents": texts});
        ("/v1/rerank", body, "results")
    })
    .await;
}
