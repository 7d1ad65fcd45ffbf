//! Connections llama-server closes never become failed requests. Two closes: cpp-httplib
//! closes a keep-alive connection idle for 5 s, and llama-server closes the connection right
//! after every streamed answer (its chunk provider reports "cancelled" once done) while
//! announcing `Keep-Alive: timeout=5, max=100`. goodput drops pooled connections idle for more
//! than 4 s, finds one the server closed before sending on it (a connection is reused only after
//! it has been idle 50 ms, by when the server's close has arrived), and re-sends only a request
//! that provably never left (counted in `retries`).

use std::sync::Arc;
use std::time::Duration;

use goodput_core::backend::openai::ApiKind;
use goodput_core::config::Arrival;
use goodput_core::http::{HttpConfig, PoolStats};
use goodput_core::workload::SyntheticWorkload;
use tokio_util::sync::CancellationToken;

use crate::server::{LlamaServer, Model, Options};
use crate::util::{RunResult, run_with};
use crate::{assert_all_ok, client, closed, open, openai};

/// cpp-httplib's keep-alive timeout (`CPPHTTPLIB_KEEPALIVE_TIMEOUT_SECOND`).
const SERVER_KEEP_ALIVE: Duration = Duration::from_secs(5);

/// Runs `config` with short requests (streamed or not) through a client with settings `http`;
/// returns the result and the client's connection counters.
async fn run_counting(
    server: &LlamaServer,
    config: goodput_core::config::RunConfig,
    stream: bool,
    http: HttpConfig,
) -> (RunResult, PoolStats) {
    let client = client(server, http);
    let workload = Arc::new(SyntheticWorkload {
        input_tokens: 16,
        output_tokens: Some(8),
        seed: 8,
    });
    let mut openai = openai(ApiKind::Chat);
    openai.stream = stream;
    let result = run_with(
        config,
        client.clone(),
        openai,
        workload,
        CancellationToken::new(),
    )
    .await;
    (result, client.stats())
}

/// No failure, and every re-send counted.
#[track_caller]
fn assert_no_failure(name: &str, run: &RunResult, requests: u64) {
    assert_all_ok(&run.records);
    let step = &run.step;
    assert_eq!(
        (step.requests.completed, step.requests.failed),
        (requests, 0),
        "{name}"
    );
    let retries: u64 = run.records.iter().map(|r| u64::from(r.retries)).sum();
    assert_eq!(
        step.requests.retries, retries,
        "{name}: re-sends are counted"
    );
}

#[tokio::test]
async fn idle_connections_closed_by_the_server_never_fail_requests() {
    // Non-streamed answers (after which the server keeps the connection), one every 5.6 s.
    const REQUESTS: u64 = 5;
    let gap = Duration::from_millis(5600);
    assert!(gap > SERVER_KEEP_ALIVE + Duration::from_millis(500));
    let server = LlamaServer::start(&Options::new(Model::Tiny, 2));
    // goodput's defaults (idle connections expire after 4 s), and a client that trusts pooled
    // connections for a minute, like the clients that fail here: by each next request the
    // server has closed its connection. Both run at once against the same server.
    let trusting = HttpConfig {
        idle_timeout: Duration::from_secs(60),
        ..HttpConfig::default()
    };
    let config = open(1.0 / gap.as_secs_f64(), Arrival::Constant, REQUESTS);
    let ((default_run, default_pool), (trusting_run, trusting_pool)) = tokio::join!(
        run_counting(&server, config.clone(), false, HttpConfig::default()),
        run_counting(&server, config.clone(), false, trusting)
    );
    for (name, run, pool) in [
        ("default", &default_run, default_pool),
        ("60 s idle timeout", &trusting_run, trusting_pool),
    ] {
        assert_no_failure(name, run, REQUESTS);
        eprintln!("idle {gap:?} between requests, {name}: {pool:?}");
        assert_eq!(
            pool.reused, 0,
            "{name}: nothing went out on a stale connection"
        );
        // Each next request found the previous connection expired (default) or closed by the
        // server (trusting), dropped it unused and opened a fresh one.
        assert_eq!(pool.discarded, REQUESTS - 1, "{name}");
        assert_eq!(pool.opened, REQUESTS + run.step.requests.retries, "{name}");
    }
}

#[tokio::test]
async fn connections_closed_after_every_streamed_answer_never_fail_requests() {
    // 40 streamed requests back to back (other clients fail 1–3 of these), then 40 non-streamed
    // ones, after which the server keeps the connection open.
    let server = LlamaServer::start(&Options::new(Model::Tiny, 2));
    let (streamed, streamed_pool) =
        run_counting(&server, closed(2, 40), true, HttpConfig::default()).await;
    assert_no_failure("streamed", &streamed, 40);
    eprintln!("40 streamed requests, closed loop of 2: {streamed_pool:?}");
    assert_eq!(
        streamed_pool.reused, 0,
        "llama-server closed every connection after its streamed answer"
    );
    assert_eq!(streamed_pool.opened, 40 + streamed.step.requests.retries);
    let (whole, whole_pool) =
        run_counting(&server, closed(2, 40), false, HttpConfig::default()).await;
    assert_no_failure("non-streamed", &whole, 40);
    eprintln!("40 non-streamed requests, closed loop of 2: {whole_pool:?}");
    assert!(
        whole_pool.reused > 0,
        "non-streamed answers keep the connection alive"
    );
}
