//! Trace replay against the simulator: requests reach the server at the trace's (scaled)
//! timestamps — exactly in virtual time, never early and within a loose bound over loopback
//! TCP. Arrivals are noted server-side, on the bytes of each request.
#![allow(clippy::unwrap_used)]

mod support;

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use goodput_core::config::{LoadSpec, RunConfig, Warmup};
use goodput_core::http::{BoxIo, FnConnector, HttpClient, HttpConfig, Target};
use goodput_core::workload::source::Loaded;
use goodput_core::workload::trace::{TraceFormat, TraceRow};
use goodput_core::workload::{PromptVocabulary, ReplayOptions, TraceWorkload};
use goodput_sim::SimServer;
use support::{fixed, openai, run_with};
use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Tokens the simulator adds to a one-message chat prompt: 3 + role (`user`: 1) + 3.
const CHAT_OVERHEAD: u64 = 7;

fn vocabulary() -> Arc<PromptVocabulary> {
    Arc::new(PromptVocabulary::cl100k())
}

/// A server-side stream that notes when each request's first bytes arrive.
struct Tap {
    inner: DuplexStream,
    arrivals: Arc<Mutex<Vec<Instant>>>,
}

impl AsyncRead for Tap {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled()[before..].starts_with(b"POST ") {
            self.arrivals.lock().unwrap().push(Instant::now());
        }
        poll
    }
}

impl AsyncWrite for Tap {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

fn tapped_client(server: &SimServer, arrivals: Arc<Mutex<Vec<Instant>>>) -> HttpClient {
    let server = server.clone();
    let connector = FnConnector::new(move || {
        let (server, arrivals) = (server.clone(), Arc::clone(&arrivals));
        async move {
            let (client, served) = tokio::io::duplex(1 << 16);
            tokio::spawn(server.serve_connection(Tap {
                inner: served,
                arrivals,
            }));
            Ok(Box::new(client) as BoxIo)
        }
    });
    let target = Target::parse("http://sim.test/v1").unwrap();
    HttpClient::new(target, Arc::new(connector), HttpConfig::default())
}

fn trace(timestamps_ms: &[u64]) -> Loaded<TraceRow> {
    Loaded {
        path: "trace.csv".into(),
        records: timestamps_ms
            .iter()
            .enumerate()
            .map(|(i, &at)| TraceRow {
                line: i + 2,
                at_us: 1_700_000_000_000_000 + at * 1000,
                input_tokens: 20 + i as u32,
                output_tokens: 3,
                hash_ids: Vec::new(),
            })
            .collect(),
        skipped: 0,
        first_skipped: None,
    }
}

#[tokio::test(start_paused = true)]
async fn a_replay_reaches_the_server_at_the_trace_timestamps_scaled() {
    let timestamps = [0, 40, 45, 45, 300, 1200, 1210, 3000, 3001, 5000];
    let options = ReplayOptions {
        time_scale: 2.0,
        ..ReplayOptions::default()
    };
    let workload = Arc::new(TraceWorkload::new(
        TraceFormat::Goodput,
        trace(&timestamps),
        options,
        vocabulary(),
        1,
    ));
    let server = SimServer::new(fixed(50, 5, 64)).unwrap();
    let arrivals = Arc::new(Mutex::new(Vec::new()));
    let config = RunConfig {
        load: LoadSpec::Replay {
            max_concurrency: None,
        },
        max_requests: Some(timestamps.len() as u64),
        warmup: Warmup::None,
        ..RunConfig::default()
    };
    let started = Instant::now();
    let result = run_with(
        config,
        tapped_client(&server, Arc::clone(&arrivals)),
        openai(server.model_name()),
        workload,
        CancellationToken::new(),
    )
    .await;
    assert_eq!(result.step.requests.completed, timestamps.len() as u64);
    assert_eq!(result.step.load.mode, "replay");
    let mut arrivals = arrivals.lock().unwrap().clone();
    arrivals.sort();
    assert_eq!(arrivals.len(), timestamps.len());
    for (arrival, at_ms) in arrivals.iter().zip(timestamps) {
        let expected = Duration::from_micros(at_ms * 1000 / 2);
        let actual = arrival.duration_since(started);
        let error = actual.abs_diff(expected);
        assert!(
            error < Duration::from_millis(1),
            "{actual:?} vs {expected:?}"
        );
    }
    for record in &result.records {
        assert_eq!(record.expected_input_tokens, Some(20 + record.index));
        assert_eq!(record.input_tokens, Some(20 + record.index + CHAT_OVERHEAD));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_real_tcp_a_replay_is_never_early_and_close_to_its_timestamps() {
    let timestamps = [0, 50, 100, 100, 260, 400, 410, 700];
    let workload = Arc::new(TraceWorkload::new(
        TraceFormat::Goodput,
        trace(&timestamps),
        ReplayOptions::default(),
        vocabulary(),
        1,
    ));
    let server = SimServer::new(fixed(5, 1, 64)).unwrap();
    let arrivals = Arc::new(Mutex::new(Vec::new()));
    let (addr, accept) = tapped_tcp_server(&server, Arc::clone(&arrivals)).await;
    let client = HttpClient::tcp(
        Target::parse(&format!("http://{addr}/v1")).unwrap(),
        HttpConfig::default(),
    );
    let config = RunConfig {
        load: LoadSpec::Replay {
            max_concurrency: None,
        },
        max_requests: Some(timestamps.len() as u64),
        warmup: Warmup::None,
        ..RunConfig::default()
    };
    let before = Instant::now();
    let result = run_with(
        config,
        client,
        openai(server.model_name()),
        workload,
        CancellationToken::new(),
    )
    .await;
    accept.abort();
    assert_eq!(result.step.requests.completed, timestamps.len() as u64);
    let mut arrivals = arrivals.lock().unwrap().clone();
    arrivals.sort();
    let mut worst = Duration::ZERO;
    for (arrival, at_ms) in arrivals.iter().zip(timestamps) {
        let due = before + Duration::from_millis(at_ms);
        assert!(
            *arrival >= due,
            "a request reached the server before its timestamp"
        );
        worst = worst.max(*arrival - due);
    }
    println!("worst lag behind the trace over loopback TCP: {worst:?}");
    assert!(worst < Duration::from_millis(250), "{worst:?}");
}

/// The simulator on 127.0.0.1:0, each connection relayed through a [`Tap`].
async fn tapped_tcp_server(
    server: &SimServer,
    arrivals: Arc<Mutex<Vec<Instant>>>,
) -> (std::net::SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = server.clone();
    let accept = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            stream.set_nodelay(true).unwrap();
            let (tap, pipe) = tokio::io::duplex(1 << 16);
            tokio::spawn(server.serve_connection(Tap {
                inner: tap,
                arrivals: Arc::clone(&arrivals),
            }));
            tokio::spawn(async move {
                let (mut stream, mut pipe) = (stream, pipe);
                let _ = tokio::io::copy_bidirectional(&mut stream, &mut pipe).await;
            });
        }
    });
    (addr, accept)
}
