//! A server that sheds load past capacity is not stable. The server here is written in the
//! test: c slots of a fixed service time, FIFO, and a waiting queue capped at K — an exact
//! M/D/c/K queue computed from the arrival times (virtual time, in-memory pipes) — that answers
//! HTTP 429 beyond it, as TGI's `--max-concurrent-requests` or a rate-limiting gateway does.
//! Past capacity its in-flight count stays flat at c + K and the E2E of the requests it served
//! stops rising, so only the shed requests show the overload; below capacity it sheds nothing.
#![allow(clippy::unwrap_used)]

#[path = "support/harness.rs"]
mod harness;
mod support;
#[path = "support/wire_server.rs"]
mod wire_server;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use goodput_core::config::{Arrival, LoadSpec, RunConfig, Warmup};
use goodput_core::http::HttpClient;
use goodput_core::metrics::stability::Verdict;
use goodput_core::record::OutcomeKind;
use goodput_core::workload::SyntheticWorkload;
use harness::{DONE, ROLE, content, usage};
use support::{RunResult, openai, run_with};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use wire_server::{State, Step, response, sse};

/// An M/D/c/K queue: `slots` servers of `service`, at most `queue` waiting.
struct Queue {
    slots: Vec<Instant>,
    /// When each admitted request ends.
    ends: Vec<Instant>,
    queue: usize,
    service: Duration,
}

impl Queue {
    /// Admits a request arriving now (returning how long it will take) or sheds it.
    fn arrive(&mut self) -> Option<Duration> {
        let now = Instant::now();
        self.ends.retain(|end| *end > now);
        if self.ends.len() >= self.slots.len() + self.queue {
            return None;
        }
        let slot = (0..self.slots.len())
            .min_by_key(|&i| self.slots[i])
            .unwrap();
        let end = self.slots[slot].max(now) + self.service;
        self.slots[slot] = end;
        self.ends.push(end);
        Some(end - now)
    }
}

/// A client whose connections are in-memory pipes to a server of `slots` × `service_ms`
/// with `queue` waiting places.
fn shedding_server(slots: usize, service_ms: u64, queue: usize) -> HttpClient {
    let queue = Arc::new(Mutex::new(Queue {
        slots: vec![Instant::now(); slots],
        ends: Vec::new(),
        queue,
        service: Duration::from_millis(service_ms),
    }));
    let state = State::new(move |_, _| match queue.lock().unwrap().arrive() {
        None => vec![Step::Write(response(
            "429 Too Many Requests",
            "content-type: application/json\r\n",
            "{\"error\":{\"message\":\"queue full\"}}",
        ))],
        Some(wait) => {
            let usage = usage(8, 2, "\"choices\":[],");
            let pieces = [
                ROLE,
                &content("a", None),
                &content("b", Some("stop")),
                &usage,
                DONE,
            ];
            let mut steps = vec![Step::Sleep(wait)];
            steps.extend(sse(&pieces));
            steps
        }
    });
    wire_server::in_memory_client(state, "http://shed.test/v1")
}

/// `secs` of arrivals at `rate` against 4 slots × 1 s (4/s) with 8 waiting.
async fn run(rate: f64, arrival: Arrival, secs: u64) -> RunResult {
    run_against(shedding_server(4, 1_000, 8), rate, arrival, secs, 30).await
}

/// `secs` of arrivals at `rate` through `client`, each request timing out after `timeout_secs`.
async fn run_against(
    client: HttpClient,
    rate: f64,
    arrival: Arrival,
    secs: u64,
    timeout_secs: u64,
) -> RunResult {
    let config = RunConfig {
        load: LoadSpec::Open {
            rate_per_sec: rate,
            arrival,
            max_concurrency: None,
        },
        duration: Some(Duration::from_secs(secs)),
        max_requests: None,
        warmup: Warmup::Fraction(0.1),
        request_timeout: Duration::from_secs(timeout_secs),
        ..RunConfig::default()
    };
    let workload = Arc::new(SyntheticWorkload {
        input_tokens: 8,
        output_tokens: Some(2),
        seed: 1,
    });
    run_with(
        config,
        client,
        openai("m"),
        workload,
        CancellationToken::new(),
    )
    .await
}

#[tokio::test(start_paused = true)]
async fn a_server_shedding_a_third_of_its_arrivals_is_unstable() {
    // 6/s against 4/s: once the 8 places fill, 4 of every 6 arrivals are served and 2 shed.
    for secs in [20u64, 60] {
        let result = run(6.0, Arrival::Constant, secs).await;
        let step = &result.step;
        let s = &step.stability;
        assert_eq!(s.verdict, Verdict::Unstable, "{secs} s: {s:?}");
        assert!(s.reason.starts_with("the server shed load"), "{s:?}");
        let shed = s.shed_ratio.unwrap();
        assert!((shed - 1.0 / 3.0).abs() < 0.03, "{secs} s: shed {shed}");
        // The queue itself stayed flat: only the shed requests tell.
        assert!(s.queue_growth_per_sec.unwrap().abs() < 0.5, "{s:?}");
        let failed = &step.requests.failed_by_kind;
        assert!(
            failed
                .get(OutcomeKind::Http.as_str())
                .is_some_and(|n| *n > 0)
        );
        // What it completed is its capacity.
        let t = step.throughput.requests_per_sec;
        assert!((t - 4.0).abs() < 0.2, "{secs} s: {t} req/s");
    }
}

#[tokio::test(start_paused = true)]
async fn below_capacity_nothing_is_shed_and_the_run_is_stable() {
    let result = run(3.0, Arrival::Constant, 60).await;
    let s = &result.step.stability;
    assert_eq!(s.verdict, Verdict::Stable, "{s:?}");
    assert_eq!(s.shed_ratio, Some(0.0));
    assert_eq!(result.step.requests.failed, 0);
}

#[tokio::test(start_paused = true)]
async fn a_poisson_load_at_90_percent_sheds_a_little_and_stays_stable() {
    // Bursts fill the 12 places now and then (16 of 756 assessed arrivals, 2.1 %): below the
    // 5 % that makes a step unstable, and the reason says how many.
    let result = run(3.6, Arrival::Poisson, 300).await;
    let s = &result.step.stability;
    assert_eq!(s.verdict, Verdict::Stable, "{s:?}");
    let shed = s.shed_ratio.unwrap();
    assert!(shed > 0.0 && shed < 0.05, "{s:?}");
    assert!(
        s.reason.contains(" shed (429/503/504 or timed out)"),
        "{s:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_queue_the_client_gives_up_on_is_unstable() {
    // No cap on the queue, but every request times out after 3 s: past capacity the wait
    // passes 3 s within seconds and from then on nearly every request times out, so the
    // in-flight count stays flat at about 6/s × 3 s.
    let client = shedding_server(4, 1_000, usize::MAX / 2);
    let result = run_against(client, 6.0, Arrival::Constant, 60, 3).await;
    let s = &result.step.stability;
    assert_eq!(s.verdict, Verdict::Unstable, "{s:?}");
    let failed = &result.step.requests.failed_by_kind;
    assert!(
        failed
            .get(OutcomeKind::Timeout.as_str())
            .is_some_and(|n| *n > 0)
    );
}
