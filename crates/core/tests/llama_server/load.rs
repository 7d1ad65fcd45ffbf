//! Load against llama-server's slots: requests beyond the slot count wait, and that wait shows
//! in their TTFT (not in the server's own prompt time); an open loop below capacity completes
//! what it offers and is stable, one far above capacity is not.

use std::sync::Arc;
use std::time::Duration;

use goodput_core::backend::openai::ApiKind;
use goodput_core::config::Arrival;
use goodput_core::http::HttpConfig;
use goodput_core::record::RequestRecord;
use goodput_core::workload::SyntheticWorkload;
use tokio_util::sync::CancellationToken;

use crate::server::{LlamaServer, Model, Options};
use crate::support::run_with;
use crate::{assert_all_ok, client, closed, ms, open, openai, run};

fn ttft_ms(record: &RequestRecord) -> f64 {
    ms(record.ttft().unwrap())
}

#[tokio::test]
async fn requests_beyond_the_slots_queue_and_it_shows_in_ttft() {
    // 4 slots, 8 requests at once: 4 start at once, 4 wait until a slot frees.
    let server = LlamaServer::start(&Options::new(Model::Tiny, 4));
    let result = run(&server, closed(8, 8), openai(ApiKind::Chat), 32, 200).await;
    assert_all_ok(&result.records);
    let first_end_us = result
        .records
        .iter()
        .map(|r| r.last_token_us.unwrap())
        .min()
        .unwrap();
    let (queued, served): (Vec<&RequestRecord>, Vec<&RequestRecord>) = result
        .records
        .iter()
        .partition(|r| r.first_token_us.unwrap() >= first_end_us);
    assert_eq!(
        (served.len(), queued.len()),
        (4, 4),
        "exactly the requests beyond the 4 slots got their first token only after a request ended"
    );
    let longest_served = served.iter().map(|r| ttft_ms(r)).fold(0.0, f64::max);
    let shortest_queued = queued.iter().map(|r| ttft_ms(r)).fold(f64::MAX, f64::min);
    let first_end_ms = first_end_us as f64 / 1e3;
    assert!(shortest_queued >= first_end_ms);
    for record in &queued {
        // The server's prompt time excludes the wait for a slot; goodput's TTFT includes it.
        let prompt_ms = record.server_timings.unwrap().prompt_ms.unwrap();
        assert!(ttft_ms(record) > prompt_ms + 0.5 * first_end_ms);
    }
    eprintln!(
        "TTFT: served at once ≤ {longest_served:.1} ms; queued ≥ {shortest_queued:.1} ms \
         (first request ended at {first_end_ms:.1} ms)"
    );
}

/// Service times of 4 requests of `output` tokens, one at a time, shortest first. Other load on
/// the machine only lengthens them: the shortest is the closest to the server's capacity, a
/// longer one a cautious estimate.
async fn service_times(server: &LlamaServer, output: u32) -> Vec<f64> {
    let result = run(server, closed(1, 4), openai(ApiKind::Chat), 32, output).await;
    assert_all_ok(&result.records);
    let mut e2e: Vec<f64> = result
        .records
        .iter()
        .map(|r| r.e2e().unwrap().as_secs_f64())
        .collect();
    e2e.sort_by(f64::total_cmp);
    e2e
}

/// The server's own token counters: (prompt tokens processed + reused, tokens generated).
fn server_tokens(server: &LlamaServer) -> (f64, f64) {
    (
        server.metric("prompt_tokens_total") + server.metric("prompt_tokens_cached_total"),
        server.metric("tokens_predicted_total"),
    )
}

#[tokio::test]
async fn below_capacity_everything_offered_completes_and_counts_match_the_server() {
    // One slot: capacity is one request per service time; offer a fifth of it (at most 4/s).
    let server = LlamaServer::start(&Options::new(Model::Tiny, 1));
    let service = service_times(&server, 64).await[2];
    let rate = (1.0 / service / 5.0).min(4.0);
    let mut config = open(rate, Arrival::Constant, 24);
    config.window = Duration::from_millis(500);
    let before = server_tokens(&server);
    let result = run(&server, config, openai(ApiKind::Chat), 32, 64).await;
    let after = server_tokens(&server);
    assert_all_ok(&result.records);
    let step = &result.step;
    let offered = step.throughput.offered_requests_per_sec.unwrap();
    assert!((offered - rate).abs() / rate < 0.01, "{offered} vs {rate}");
    let completed = step.throughput.requests_per_sec;
    assert!(
        completed > 0.8 * offered && completed < 1.2 * offered,
        "below capacity what is offered completes: {completed} vs {offered}"
    );
    assert!(step.stability.stable, "{:?}", step.stability);
    // goodput's token totals are the server's own counts, exactly.
    assert_eq!(step.tokens.output_total as f64, after.1 - before.1);
    assert_eq!(step.tokens.input_total as f64, after.0 - before.0);
    eprintln!(
        "service {:.1} ms alone; offered {offered:.2}/s, completed {completed:.2}/s, stable; \
         {} input and {} output tokens, as the server counted",
        service * 1e3,
        step.tokens.input_total,
        step.tokens.output_total
    );
}

#[tokio::test]
async fn far_above_capacity_completions_fall_behind_and_the_run_is_unstable() {
    // Three times what one slot serves at best (at most 60/s) for 4 s; the run is stopped at
    // the end of the schedule instead of draining the queue.
    let server = LlamaServer::start(&Options::new(Model::Tiny, 1));
    let service = service_times(&server, 512).await[0];
    let rate = (3.0 / service).min(60.0);
    let mut config = open(rate, Arrival::Constant, (rate * 4.0) as u64);
    config.window = Duration::from_millis(500);
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    let stopper = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs_f64(4.0 + 2.0 * service)).await;
        stop.cancel();
    });
    let workload = Arc::new(SyntheticWorkload {
        input_tokens: 32,
        output_tokens: Some(512),
        seed: 8,
    });
    let client = client(&server, HttpConfig::default());
    let before = server_tokens(&server);
    let result = run_with(config, client, openai(ApiKind::Chat), workload, cancel).await;
    stopper.abort();
    let step = &result.step;
    let offered = step.throughput.offered_requests_per_sec.unwrap();
    let completed = step.throughput.requests_per_sec;
    assert!(
        completed < 0.5 * offered,
        "completed {completed}/s of {offered}/s offered"
    );
    assert!(!step.stability.stable, "{:?}", step.stability);
    let failed_by_kind = &step.requests.failed_by_kind;
    assert!(
        failed_by_kind.keys().all(|kind| kind == "cancelled"),
        "only the requests stopped at the end fail: {failed_by_kind:?}"
    );
    // The server generated at least what goodput counted as completed (stopped requests may
    // have generated some tokens too).
    let generated = server_tokens(&server).1 - before.1;
    assert!(step.tokens.output_total as f64 <= generated);
    eprintln!(
        "service {:.1} ms alone (capacity {:.1}/s); offered {offered:.2}/s, completed \
         {completed:.2}/s; {}",
        service * 1e3,
        1.0 / service,
        step.stability.reason
    );
}
