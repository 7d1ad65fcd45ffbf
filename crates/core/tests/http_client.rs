//! The HTTP client under the backend: keep-alive connections the server closes, requests
//! re-sent only when provably unsent, exact timestamps under paused time, refused
//! connections, TLS errors, pool bounds. Loopback or in-memory pipes only.
#![allow(clippy::unwrap_used)]

#[path = "support/harness.rs"]
mod harness;
#[path = "support/wire_server.rs"]
mod wire_server;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use goodput_core::backend::Activity;
use goodput_core::backend::Backend;
use goodput_core::backend::openai::{ApiKind, OpenAiBackend};
use goodput_core::http::{BoxIo, FnConnector, HttpClient, HttpConfig, ResponseBody, Target};
use goodput_core::record::{Exchange, OutcomeKind};
use harness::*;
use http_body_util::Full;
use tokio::time::Instant;
use wire_server::{LAST_CHUNK, State, Step, TcpServer, chunk, sse_head};

#[tokio::test]
async fn connection_refused_is_transport() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let exchange = send(
        &backend_at(&format!("http://{addr}"), config(ApiKind::Chat)),
        &text_spec(),
    )
    .await;
    let (kind, message) = failure(&exchange);
    assert_eq!(kind, OutcomeKind::Transport);
    assert!(
        message.contains("refused") && message.contains(&addr.to_string()),
        "{message}"
    );
    assert!(exchange.sent_at.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_closing_keep_alive_connections_cost_no_request() {
    // After each response, with and without `connection: close`; then a 50 ms idle timeout.
    let closing = |header: &'static str| {
        move |_: usize, _: &wire_server::Captured| {
            let mut steps = ok_stream();
            steps[0] = Step::Write(sse_head(header));
            steps.push(Step::Close);
            steps
        }
    };
    for (state, gaps) in [
        (State::new(closing("connection: close\r\n")), [0, 0]),
        (State::new(closing("")), [0, 5]),
        (
            State {
                idle_close: Some(Duration::from_millis(50)),
                ..State::new(|_, _| ok_stream())
            },
            [0, 80],
        ),
    ] {
        let server = TcpServer::start(state).await;
        let backend = backend_at(&server.url(), config(ApiKind::Chat));
        for n in 0..30 {
            tokio::time::sleep(Duration::from_millis(gaps[n % 2])).await;
            let exchange = send(&backend, &text_spec()).await;
            assert_eq!(exchange.failure, None, "request {n}");
        }
        assert_eq!(server.state.requests().len(), 30);
    }
}

#[tokio::test]
async fn request_the_server_may_have_seen_is_not_resent() {
    let server = TcpServer::start(State::new(|n, _| {
        if n == 1 {
            vec![Step::Close]
        } else {
            ok_stream()
        }
    }))
    .await;
    let backend = backend_at(&server.url(), config(ApiKind::Chat));
    assert_eq!(send(&backend, &text_spec()).await.failure, None);
    settle().await;
    let exchange = send(&backend, &text_spec()).await;
    assert_eq!(failure(&exchange).0, OutcomeKind::Transport);
    assert!(exchange.reused_connection);
    assert_eq!((exchange.retries, server.state.requests().len()), (0, 2));
}

#[tokio::test]
async fn stalled_stream_keeps_what_arrived_when_the_caller_gives_up() {
    let steps = vec![
        Step::Write(sse_head("")),
        Step::Write(chunk(content("a", None).as_bytes())),
        Step::Stall,
    ];
    let server = TcpServer::start(State::new(move |_, _| steps.clone())).await;
    let backend = backend_at(&server.url(), config(ApiKind::Chat));
    let mut exchange = Exchange::default();
    let activity = Activity::default();
    let spec = text_spec();
    let timed_out = tokio::time::timeout(
        Duration::from_millis(300),
        backend.send(&spec, &mut exchange, &activity),
    )
    .await;
    assert!(timed_out.is_err());
    assert_eq!((exchange.chunks.len(), exchange.text.as_str()), (1, "a"));
}

/// Waits until an idle connection may be reused ([`HttpConfig::reuse_after`]).
async fn settle() {
    tokio::time::sleep(HttpConfig::default().reuse_after).await;
}

type Slot = Arc<Mutex<Option<tokio::io::DuplexStream>>>;

/// A client whose connections are in-memory pipes served by `state`; with `first`, the
/// server end of the first connection is handed to the test instead.
fn duplex_client(state: State, first: Option<Slot>, config: HttpConfig) -> HttpClient {
    let opened = Arc::new(Mutex::new(0usize));
    let connector = FnConnector::new(move || {
        let (client, mut server) = tokio::io::duplex(1 << 16);
        let (state, first, opened) = (state.clone(), first.clone(), opened.clone());
        async move {
            let n = std::mem::replace(&mut *opened.lock().unwrap(), usize::MAX);
            match first {
                Some(slot) if n == 0 => *slot.lock().unwrap() = Some(server),
                _ => drop(tokio::spawn(async move {
                    wire_server::serve(&mut server, &state).await
                })),
            }
            Ok(Box::new(client) as BoxIo)
        }
    });
    let target = Target::parse("http://sim.local/v1").unwrap();
    HttpClient::new(target, Arc::new(connector), config)
}

/// Waits for the server end of the first connection.
async fn take_first(slot: &Slot) -> tokio::io::DuplexStream {
    loop {
        if let Some(io) = slot.lock().unwrap().take() {
            return io;
        }
        tokio::task::yield_now().await;
    }
}

#[tokio::test(start_paused = true)]
async fn exact_timestamps_under_paused_time() {
    let ms = Duration::from_millis;
    let steps = vec![
        Step::Sleep(ms(100)),
        Step::Write(sse_head("")),
        Step::Sleep(ms(50)),
        Step::Write(chunk(ROLE.as_bytes())),
        Step::Sleep(ms(50)),
        Step::Write(chunk(content("Hel", None).as_bytes())),
        Step::Sleep(ms(20)),
        Step::Write(chunk(
            format!("{}{DONE}", content("lo", Some("stop"))).as_bytes(),
        )),
        Step::Write(LAST_CHUNK.to_vec()),
    ];
    let state = State::new(move |_, _| steps.clone());
    let client = duplex_client(state, None, HttpConfig::default());
    let backend = OpenAiBackend::new(config(ApiKind::Chat), client.clone()).unwrap();
    let mut exchanges = Vec::new();
    for n in 0..2 {
        if n > 0 {
            settle().await;
        }
        let t0 = Instant::now();
        exchanges.push((t0, send(&backend, &text_spec()).await));
    }
    for (n, (t0, exchange)) in exchanges.iter().enumerate() {
        assert_eq!(exchange.failure, None);
        assert_eq!(exchange.sent_at, Some(*t0));
        assert_eq!(exchange.response_at, Some(*t0 + ms(100)));
        assert_eq!(exchange.first_event_at, Some(*t0 + ms(150)));
        let times: Vec<_> = exchange.chunks.iter().map(|c| c.at() - *t0).collect();
        assert_eq!(times, [ms(200), ms(220)]);
        assert_eq!(exchange.reused_connection, n == 1);
        assert_eq!(exchange.connect_time, (n == 0).then_some(Duration::ZERO));
    }
    assert_eq!(client.stats().opened, 1);
}

#[tokio::test(start_paused = true)]
async fn idle_connection_closed_by_the_server_is_never_used() {
    let state = State::new(|_, _| ok_stream());
    let first: Slot = Arc::new(Mutex::new(None));
    let client = duplex_client(state.clone(), Some(first.clone()), HttpConfig::default());
    let backend = OpenAiBackend::new(config(ApiKind::Chat), client.clone()).unwrap();
    let serve_one = async {
        let mut io = take_first(&first).await;
        let request = wire_server::read_request(&mut io, None).await.unwrap();
        for step in (state.responder)(0, &request) {
            if let Step::Write(bytes) = step {
                tokio::io::AsyncWriteExt::write_all(&mut io, &bytes)
                    .await
                    .unwrap();
            }
        }
        io
    };
    let spec = text_spec();
    let (exchange, server_end) = tokio::join!(send(&backend, &spec), serve_one);
    assert_eq!((exchange.failure, exchange.retries), (None, 0));
    tokio::task::yield_now().await;
    settle().await;
    // The server closes the idle connection just before the next request is written.
    drop(server_end);
    let exchange = send(&backend, &text_spec()).await;
    assert_eq!(exchange.failure, None);
    assert_eq!((exchange.retries, exchange.reused_connection), (0, false));
    let stats = client.stats();
    assert_eq!((stats.opened, stats.discarded), (2, 1));
}

/// A connection that takes no byte: every write fails at once (a socket closed under it).
struct Unwritable;

impl tokio::io::AsyncRead for Unwritable {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        _: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Pending
    }
}

impl goodput_core::http::Io for Unwritable {}

impl tokio::io::AsyncWrite for Unwritable {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        _: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::task::Poll::Ready(Err(std::io::ErrorKind::BrokenPipe.into()))
    }
    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// A client whose first `dead` connections refuse every byte; later ones are served by `state`.
fn client_with_dead_connections(dead: usize, state: State) -> HttpClient {
    let opened = Arc::new(Mutex::new(0usize));
    let connector = FnConnector::new(move || {
        let (state, opened) = (state.clone(), opened.clone());
        async move {
            let n = {
                let mut opened = opened.lock().unwrap();
                *opened += 1;
                *opened
            };
            if n <= dead {
                return Ok(Box::new(Unwritable) as BoxIo);
            }
            let (client, mut server) = tokio::io::duplex(1 << 16);
            tokio::spawn(async move { wire_server::serve(&mut server, &state).await });
            Ok(Box::new(client) as BoxIo)
        }
    });
    let target = Target::parse("http://sim.local/v1").unwrap();
    HttpClient::new(target, Arc::new(connector), HttpConfig::default())
}

#[tokio::test(start_paused = true)]
async fn request_of_which_no_byte_was_written_is_resent_on_a_fresh_connection() {
    let state = State::new(|_, _| ok_stream());
    let client = client_with_dead_connections(1, state.clone());
    let backend = OpenAiBackend::new(config(ApiKind::Chat), client.clone()).unwrap();
    let exchange = send(&backend, &text_spec()).await;
    assert_eq!((exchange.failure, exchange.retries), (None, 1));
    assert_eq!((client.stats().opened, state.requests().len()), (2, 1));
    // Past the retry budget (2) the request fails as unsent, with no send time.
    let client = client_with_dead_connections(3, state.clone());
    let backend = OpenAiBackend::new(config(ApiKind::Chat), client).unwrap();
    let exchange = send(&backend, &text_spec()).await;
    let (kind, message) = failure(&exchange);
    assert_eq!(kind, OutcomeKind::Transport);
    assert!(
        message.contains("before the request was sent (2 retries)"),
        "{message}"
    );
    assert_eq!(exchange.sent_at, None);
}

/// A POST through the client alone (no backend).
fn post(uri: &str) -> http::Request<Full<Bytes>> {
    let mut request = http::Request::new(Full::new(Bytes::from_static(b"{}")));
    *request.method_mut() = http::Method::POST;
    *request.uri_mut() = uri.parse().unwrap();
    request
}

async fn read_to_end(body: &mut ResponseBody) -> usize {
    let mut bytes = 0;
    while let Some(frame) = body.data().await {
        bytes += frame.unwrap().len();
    }
    bytes
}

#[tokio::test]
async fn only_bodies_read_to_the_end_give_their_connection_back() {
    let server = TcpServer::start(State::new(|_, _| ok_stream())).await;
    let client = HttpClient::tcp(Target::parse(&server.url()).unwrap(), HttpConfig::default());
    let mut exchange = Exchange::default();
    let response = client
        .send(post("/v1/chat/completions"), &mut exchange)
        .await
        .unwrap();
    drop(response);
    let mut response = client
        .send(post("/v1/chat/completions"), &mut exchange)
        .await
        .unwrap();
    assert!(
        !exchange.reused_connection,
        "a body dropped midway closes its connection"
    );
    assert!(read_to_end(response.body_mut()).await > 0);
    settle().await;
    client
        .send(post("/v1/chat/completions"), &mut exchange)
        .await
        .unwrap();
    assert!(exchange.reused_connection);
    let stats = client.stats();
    assert_eq!((stats.opened, stats.reused), (2, 1));
}

#[tokio::test]
async fn absolute_uris_are_sent_in_origin_form_with_host_and_user_agent() {
    let server = TcpServer::start(State::new(|_, _| ok_stream())).await;
    let client = HttpClient::tcp(Target::parse(&server.url()).unwrap(), HttpConfig::default());
    let mut exchange = Exchange::default();
    let mut response = client
        .send(post("http://elsewhere.example/v1/x?y=1"), &mut exchange)
        .await
        .unwrap();
    read_to_end(response.body_mut()).await;
    let request = &server.state.requests()[0];
    assert!(
        request.head.starts_with("POST /v1/x?y=1 HTTP/1.1\r\n"),
        "{}",
        request.head
    );
    assert_eq!(request.header("host"), Some(server.addr.to_string()));
    assert!(
        request
            .header("user-agent")
            .unwrap()
            .starts_with("goodput/")
    );
}

#[tokio::test]
async fn idle_pool_is_bounded() {
    let server = TcpServer::start(State::new(|_, _| ok_stream())).await;
    let config = HttpConfig {
        max_idle: 1,
        ..HttpConfig::default()
    };
    let client = HttpClient::tcp(Target::parse(&server.url()).unwrap(), config);
    let one = || async {
        let mut exchange = Exchange::default();
        client
            .send(post("/v1/chat/completions"), &mut exchange)
            .await
            .unwrap()
    };
    let mut responses = vec![one().await, one().await, one().await];
    for response in &mut responses {
        read_to_end(response.body_mut()).await;
    }
    let stats = client.stats();
    assert_eq!((stats.opened, stats.idle), (3, 1));
}

#[tokio::test(start_paused = true)]
async fn connections_idle_past_the_timeout_are_not_reused() {
    let config = HttpConfig {
        idle_timeout: Duration::from_secs(4),
        ..HttpConfig::default()
    };
    let client = duplex_client(State::new(|_, _| ok_stream()), None, config);
    let backend = OpenAiBackend::new(harness::config(ApiKind::Chat), client.clone()).unwrap();
    assert_eq!(send(&backend, &text_spec()).await.failure, None);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(send(&backend, &text_spec()).await.reused_connection);
    tokio::time::sleep(Duration::from_secs(5)).await;
    let exchange = send(&backend, &text_spec()).await;
    assert_eq!(
        (exchange.failure, exchange.reused_connection),
        (None, false)
    );
    assert_eq!((client.stats().opened, client.stats().discarded), (2, 1));
}

#[cfg(feature = "tls")]
#[tokio::test]
async fn tls_errors_are_transport_failures_naming_the_host() {
    // A plain-HTTP server answering the TLS ClientHello with an HTTP error.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut stream, _) = listener.accept().await.unwrap();
        let reply = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n";
        tokio::io::AsyncWriteExt::write_all(&mut stream, reply)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_secs(5)).await;
    });
    let url = format!("https://{addr}/v1");
    let exchange = send(&backend_at(&url, config(ApiKind::Chat)), &text_spec()).await;
    let (kind, message) = failure(&exchange);
    assert_eq!(kind, OutcomeKind::Transport);
    assert!(
        message.contains("TLS handshake with `127.0.0.1` failed"),
        "{message}"
    );
}

#[tokio::test]
async fn host_names_resolve_and_the_working_address_is_kept() {
    // `localhost` may resolve to ::1 first while the server listens on 127.0.0.1 only.
    let server = TcpServer::start(State::new(|_, _| ok_stream())).await;
    let url = format!("http://localhost:{}/v1", server.addr.port());
    let backend = backend_at(&url, config(ApiKind::Chat));
    for _ in 0..3 {
        assert_eq!(send(&backend, &text_spec()).await.failure, None);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn servers_closing_after_every_streamed_answer_without_saying_so_cost_no_request() {
    // llama.cpp's llama-server (cpp-httplib) closes the connection a moment after the end of
    // every streamed answer while announcing `Keep-Alive: timeout=5, max=100`; a request sent
    // on that connection at once goes into a socket about to close, and may have been read.
    let state = State::new(|_, _| {
        let mut steps = ok_stream();
        steps[0] = Step::Write(sse_head("keep-alive: timeout=5, max=100\r\n"));
        steps.push(Step::Sleep(Duration::from_millis(5)));
        steps.push(Step::Close);
        steps
    });
    let server = TcpServer::start(state).await;
    let client = HttpClient::tcp(Target::parse(&server.url()).unwrap(), HttpConfig::default());
    let backend = OpenAiBackend::new(config(ApiKind::Chat), client.clone()).unwrap();
    for n in 0..20 {
        let exchange = send(&backend, &text_spec()).await;
        assert_eq!(
            (exchange.failure, exchange.retries),
            (None, 0),
            "request {n}"
        );
        assert!(!exchange.reused_connection);
    }
    assert_eq!(server.state.requests().len(), 20);
    assert_eq!(client.stats().opened, 20);
}

/// Everything a body carried, and whether the connection went back to the pool.
async fn body_of(step_writes: Vec<Vec<u8>>, close: bool) -> (Result<Vec<u8>, String>, u64) {
    let state = State::new(move |_, _| {
        let mut steps: Vec<Step> = step_writes.iter().cloned().map(Step::Write).collect();
        if close {
            steps.push(Step::Close);
        }
        steps
    });
    let server = TcpServer::start(state).await;
    let client = HttpClient::tcp(Target::parse(&server.url()).unwrap(), HttpConfig::default());
    let mut exchange = Exchange::default();
    let mut response = client.send(post("/x"), &mut exchange).await.unwrap();
    let mut bytes = Vec::new();
    while let Some(frame) = response.body_mut().data().await {
        match frame {
            Ok(data) => bytes.extend_from_slice(&data),
            Err(error) => {
                let failure = goodput_core::http::failure_from_http(&error, false);
                return (Err(format!("{:?}: {}", failure.kind, failure.message)), 0);
            }
        }
    }
    (Ok(bytes), client.stats().idle as u64)
}

#[tokio::test]
async fn bodies_framed_every_way_are_read_whole_split_anywhere() {
    let head = |framing: &str| format!("HTTP/1.1 200 OK\r\n{framing}\r\n").into_bytes();
    let b = |text: &str| text.as_bytes().to_vec();
    // Content-length, split inside the head and the body.
    let (body, idle) = body_of(
        vec![
            b("HTTP/1.1 200 OK\r\ncontent-le"),
            b("ngth: 11\r\n\r\nhello"),
            b(" world"),
        ],
        false,
    )
    .await;
    assert_eq!((body.unwrap(), idle), (b("hello world"), 1));
    // Chunked with an extension, a size line split in two, and trailers.
    let (body, idle) = body_of(
        vec![
            head("transfer-encoding: chunked\r\n"),
            b("5;ext=1\r\nhel"),
            b("lo\r\n"),
            b("1"),
            b("0\r\n world, goodbye!\r\n0\r\nx-trailer: 1\r\n\r\n"),
        ],
        false,
    )
    .await;
    assert_eq!((body.unwrap(), idle), (b("hello world, goodbye!"), 1));
    // Until close: read to the end, the connection is not kept.
    let (body, idle) = body_of(vec![head(""), b("all of it")], true).await;
    assert_eq!((body.unwrap(), idle), (b("all of it"), 0));
    // A 1xx interim response before the real one.
    let (body, _) = body_of(
        vec![
            b("HTTP/1.1 100 Continue\r\n\r\n"),
            head("content-length: 2\r\n"),
            b("ok"),
        ],
        false,
    )
    .await;
    assert_eq!(body.unwrap(), b("ok"));
}

#[tokio::test]
async fn broken_bodies_are_protocol_or_transport_failures() {
    let head = |framing: &str| format!("HTTP/1.1 200 OK\r\n{framing}\r\n").into_bytes();
    let chunked = head("transfer-encoding: chunked\r\n");
    let (body, _) = body_of(vec![chunked.clone(), b"zz\r\n".to_vec()], false).await;
    let message = body.unwrap_err();
    assert!(
        message.starts_with("Protocol: invalid HTTP response: invalid chunk size"),
        "{message}"
    );
    let (body, _) = body_of(vec![chunked, b"5\r\nhello!!\r\n".to_vec()], false).await;
    assert!(
        body.unwrap_err()
            .contains("chunk data longer than its size")
    );
    let (body, _) = body_of(
        vec![head("content-length: 10\r\n"), b"short".to_vec()],
        true,
    )
    .await;
    let message = body.unwrap_err();
    assert!(
        message.starts_with("Transport: connection closed before a complete response"),
        "{message}"
    );
}

#[tokio::test]
async fn a_head_that_is_not_http_is_a_protocol_failure() {
    let state = State::new(|_, _| vec![Step::Write(b"SSH-2.0-OpenSSH_9.6\r\n\r\n".to_vec())]);
    let server = TcpServer::start(state).await;
    let client = HttpClient::tcp(Target::parse(&server.url()).unwrap(), HttpConfig::default());
    let failure = client
        .send(post("/x"), &mut Exchange::default())
        .await
        .unwrap_err();
    assert_eq!(failure.kind, OutcomeKind::Protocol, "{}", failure.message);
    assert!(
        failure.message.starts_with("invalid HTTP response"),
        "{}",
        failure.message
    );
}
