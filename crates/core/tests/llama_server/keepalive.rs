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
use crate::support::{RunResult, run_with};
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

/// Idle time before each request but the first: its send minus the previous request's end.
fn idle_gaps(run: &RunResult) -> Vec<Duration> {
    let mut records: Vec<_> = run.records.iter().collect();
    records.sort_by_key(|r| r.index);
    records
        .windows(2)
        .map(|pair| {
            let idle_us = pair[1].sent_us.unwrap().saturating_sub(pair[0].end_us);
            Duration::from_micros(idle_us)
        })
        .collect()
}

#[tokio::test]
async fn idle_connections_closed_by_the_server_never_fail_requests() {
    // Non-streamed answers (after which the server keeps the connection), one every 6.5 s:
    // idle well past the server's 5 s even when a request is slow, so no send races its close.
    const REQUESTS: u64 = 5;
    let gap = Duration::from_millis(6500);
    assert!(gap > SERVER_KEEP_ALIVE + Duration::from_millis(1000));
    let server = LlamaServer::start(&Options::new(Model::Tiny, 2));
    // The first requests on a fresh server are slow: warm it up so the idle times are gaps.
    let warm = run_counting(&server, closed(2, 4), false, HttpConfig::default()).await;
    assert_no_failure("warm-up", &warm.0, 4);
    // goodput's defaults (idle connections expire after 4 s), and a client that trusts pooled
    // connections for a minute, like the clients that fail here: by each next request the
    // server has closed its connection. Both run at once against the same server.
    let default = HttpConfig::default();
    let trusting = HttpConfig {
        idle_timeout: Duration::from_secs(60),
        ..default
    };
    let config = open(1.0 / gap.as_secs_f64(), Arrival::Constant, REQUESTS);
    let ((default_run, default_pool), (trusting_run, trusting_pool)) = tokio::join!(
        run_counting(&server, config.clone(), false, default),
        run_counting(&server, config.clone(), false, trusting)
    );
    for (name, run, pool, reusable_below) in [
        ("default", &default_run, default_pool, default.idle_timeout),
        (
            "60 s idle timeout",
            &trusting_run,
            trusting_pool,
            SERVER_KEEP_ALIVE,
        ),
    ] {
        assert_no_failure(name, run, REQUESTS);
        let gaps = idle_gaps(run);
        eprintln!("{name}: idle before each request {gaps:?}; {pool:?}");
        // A connection idle longer than goodput's idle timeout (default) or than the server's
        // keep-alive (trusting) was dropped unused: it carried no request.
        let short_gaps = gaps.iter().filter(|g| **g < reusable_below).count() as u64;
        assert!(
            pool.reused <= short_gaps,
            "{name}: nothing went out on a stale connection"
        );
        assert_eq!(
            pool.opened + pool.reused,
            REQUESTS + run.step.requests.retries,
            "{name}: every send used a fresh or a live pooled connection"
        );
        assert_eq!(pool.discarded + pool.reused + 1, REQUESTS, "{name}");
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
