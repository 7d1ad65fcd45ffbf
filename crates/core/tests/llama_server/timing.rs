//! goodput's latencies against llama-server's own per-request `timings`: TTFT from the send is
//! the server's prompt time plus a small transport overhead (HTTP, tokenizing, scheduling, the
//! chunk's trip), TPOT is the server's generation time per token; and on the small model TTFT
//! grows with the prompt (prefill), per prompt-length bucket.

use goodput_core::backend::openai::ApiKind;
use goodput_core::record::RequestRecord;

use crate::server::{LlamaServer, Model, Options};
use crate::{assert_all_ok, closed, median, ms, openai, run};

/// Server prompt and generation times of a record, ms.
fn server_ms(record: &RequestRecord) -> (f64, f64) {
    let timings = record.server_timings.expect("llama.cpp timings");
    (timings.prompt_ms.unwrap(), timings.predicted_ms.unwrap())
}

#[tokio::test]
async fn client_ttft_and_tpot_agree_with_the_server_timings() {
    let server = LlamaServer::start(&Options::new(Model::Tiny, 1));
    let output = 64;
    let result = run(&server, closed(1, 12), openai(ApiKind::Chat), 64, output).await;
    assert_all_ok(&result.records);
    let mut overheads = Vec::new();
    let mut tpot_gaps = Vec::new();
    for record in &result.records {
        let (prompt_ms, predicted_ms) = server_ms(record);
        let ttft = ms(record.ttft_from_send().unwrap());
        let e2e = ms(record.e2e_from_send().unwrap());
        // Exact lower bounds: the server's intervals lie inside the client's.
        assert!(ttft >= prompt_ms, "TTFT {ttft} < server prompt {prompt_ms}");
        assert!(e2e >= prompt_ms + predicted_ms, "E2E {e2e} too short");
        overheads.push(ttft - prompt_ms);
        // The server's generation time runs from the first token to the last: n − 1 steps.
        let server_tpot = predicted_ms / f64::from(output - 1);
        let client_tpot = ms(record.tpot().unwrap());
        tpot_gaps.push(client_tpot - server_tpot);
        let span = ms(record.e2e_from_send().unwrap() - record.ttft_from_send().unwrap());
        assert!(
            (span - predicted_ms).abs() <= 50.0 + 0.1 * predicted_ms,
            "first-to-last token: client {span:.2} ms, server {predicted_ms:.2} ms"
        );
    }
    let overhead = median(&overheads);
    let tpot_gap = median(&tpot_gaps);
    let server_prompt = median(
        &result
            .records
            .iter()
            .map(|r| server_ms(r).0)
            .collect::<Vec<_>>(),
    );
    let server_tpot = median(
        &result
            .records
            .iter()
            .map(|r| server_ms(r).1 / f64::from(output - 1))
            .collect::<Vec<_>>(),
    );
    eprintln!(
        "server prompt {server_prompt:.2} ms, client TTFT − server prompt: median {overhead:.2} ms; \
         server TPOT {server_tpot:.3} ms, client − server TPOT: median {tpot_gap:+.3} ms"
    );
    assert!(
        overhead < 100.0,
        "transport overhead {overhead:.1} ms should be small"
    );
    assert!(tpot_gap.abs() < 1.0 + 0.1 * server_tpot, "{tpot_gap} ms");
}

#[tokio::test]
async fn ttft_grows_with_prompt_length_on_the_small_model() {
    let server = LlamaServer::start(&Options::new(Model::Small, 1));
    // The first requests on a fresh server are slow (buffers, threads): warm it up.
    assert_all_ok(
        &run(&server, closed(1, 2), openai(ApiKind::Chat), 32, 4)
            .await
            .records,
    );
    let mut buckets = Vec::new();
    for input in [32, 256, 1024] {
        let result = run(&server, closed(1, 3), openai(ApiKind::Chat), input, 4).await;
        assert_all_ok(&result.records);
        let ttft = result.step.latency_ms.ttft.p50.unwrap();
        let prompt_tokens = result.records[0].input_tokens.unwrap();
        let server_prompt = median(
            &result
                .records
                .iter()
                .map(|r| server_ms(r).0)
                .collect::<Vec<_>>(),
        );
        for record in &result.records {
            assert!(ms(record.ttft().unwrap()) >= server_ms(record).0);
        }
        eprintln!(
            "prompt {input} cl100k = {prompt_tokens} server tokens: TTFT p50 {ttft:.1} ms, \
             server prompt {server_prompt:.1} ms"
        );
        buckets.push((prompt_tokens, ttft, server_prompt));
    }
    for pair in buckets.windows(2) {
        assert!(pair[1].0 > pair[0].0);
        assert!(pair[1].2 > pair[0].2, "server prefill grows: {buckets:?}");
        assert!(pair[1].1 > pair[0].1, "TTFT grows: {buckets:?}");
    }
    let (first, last) = (buckets[0], buckets[buckets.len() - 1]);
    assert!(
        last.1 > 3.0 * first.1,
        "a prompt {}× longer takes visibly longer to prefill: {buckets:?}",
        last.0 / first.0
    );
}
