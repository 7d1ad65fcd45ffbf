//! Wire times against a server on its own thread. Chunk times are when the server's bytes
//! reached this host, not when a busy client got round to reading them (the server notes the
//! moments around each write, the client blocks its only runtime thread while a chunk waits,
//! then reads it; real loopback TCP with kernel receive timestamps on Linux — elsewhere only the
//! ordering is checked). A first token read late together with the tokens after it keeps its
//! own arrival, not the last one's (the kernel keeps one stamp for the merged backlog; the
//! watcher thread saw each arrival). And a request leaves when `sent_at` says, even from a
//! task that spent its cooperative budget: it is not put behind other tasks between the stamp
//! and the write.
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::Duration;

use bytes::Bytes;
use goodput_core::backend::openai::{OpenAiBackend, OpenAiConfig};
use goodput_core::backend::{Activity, Backend, RequestInput, RequestSpec};
use goodput_core::http::{HttpClient, HttpConfig, Target};
use goodput_core::record::Exchange;
use http_body_util::Full;
use tokio::time::Instant;

/// The moments just before and just after a write, on the server's thread.
type Around = (std::time::Instant, std::time::Instant);

/// The next connection, with Nagle off (every write leaves at once).
fn accept(listener: &TcpListener) -> std::net::TcpStream {
    let (socket, _) = listener.accept().unwrap();
    socket.set_nodelay(true).unwrap();
    socket
}

/// Reads until a request head has ended (the clients here send one request at a time).
fn read_request(socket: &mut std::net::TcpStream) {
    let mut request = Vec::new();
    let mut buf = [0u8; 4096];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        let got = socket.read(&mut buf).unwrap();
        assert!(got > 0, "the client closed before its request ended");
        request.extend_from_slice(&buf[..got]);
    }
}

/// Serves one chunked response in lock step: head and first chunk, then (when told) the
/// second chunk and the end. Reports the moments around each chunk's write.
fn serve(listener: TcpListener, written: mpsc::Sender<Around>, go_on: mpsc::Receiver<()>) {
    let mut socket = accept(&listener);
    read_request(&mut socket);
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n";
    socket.write_all(head.as_bytes()).unwrap();
    for chunk in ["5\r\nfirst\r\n", "6\r\nsecond\r\n0\r\n\r\n"] {
        let before = std::time::Instant::now();
        socket.write_all(chunk.as_bytes()).unwrap();
        written.send((before, std::time::Instant::now())).unwrap();
        if go_on.recv().is_err() {
            return;
        }
    }
}

#[tokio::test]
async fn a_chunk_read_late_keeps_the_time_it_arrived() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (written, was_written) = mpsc::channel();
    let (go_on, told) = mpsc::channel();
    let server = std::thread::spawn(move || serve(listener, written, told));
    let target = Target::parse(&format!("http://{addr}")).unwrap();
    let client = HttpClient::tcp(target, HttpConfig::default());
    let request = http::Request::post(format!("http://{addr}/stream"))
        .body(Full::new(Bytes::from_static(b"{}")))
        .unwrap();
    let mut exchange = Exchange::default();
    let mut body = client
        .send(request, &mut exchange)
        .await
        .unwrap()
        .into_body();
    let mut late = Vec::new();
    for expected in ["first", "second"] {
        // The chunk is on its way; the client's only thread is busy for 100 ms.
        let (before, after) = was_written.recv().unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let bytes = body.data().await.unwrap().unwrap();
        let read_at = Instant::now();
        assert_eq!(bytes, expected.as_bytes());
        let received = body.received_at();
        late.push((
            Instant::from_std(before),
            Instant::from_std(after),
            received,
            read_at,
        ));
        go_on.send(()).unwrap();
    }
    if cfg!(target_os = "linux") {
        // How long bytes waited unread is known too: the second chunk, at least 100 ms.
        assert!(body.read_late().unwrap() >= Duration::from_millis(90));
    }
    assert!(body.data().await.is_none());
    server.join().unwrap();
    for (before, after, received, read_at) in late {
        assert!(received <= read_at);
        if cfg!(target_os = "linux") {
            // Between the write's start and end, give or take reading two clocks at once.
            let slack = Duration::from_millis(5);
            assert!(received + slack >= before, "{received:?} before {before:?}");
            assert!(received <= after + slack, "{received:?} after {after:?}");
            assert!(read_at.duration_since(received) >= Duration::from_millis(90));
        }
    }
}

/// Answers `requests` requests on one keep-alive connection (`content-length`, empty JSON),
/// reporting when each request's last bytes were read — the server thread waits in `read`, so
/// that is when they arrived.
fn answer_each(listener: TcpListener, requests: usize, read: mpsc::Sender<std::time::Instant>) {
    let mut socket = accept(&listener);
    for _ in 0..requests {
        read_request(&mut socket);
        read.send(std::time::Instant::now()).unwrap();
        let answer = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}";
        socket.write_all(answer.as_bytes()).unwrap();
    }
}

#[tokio::test]
async fn a_task_out_of_budget_still_writes_its_request_when_stamped() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (read, was_read) = mpsc::channel();
    let server = std::thread::spawn(move || answer_each(listener, 2, read));
    let target = Target::parse(&format!("http://{addr}")).unwrap();
    // Pooled connections are reused at once (the default waits 50 ms for servers that close).
    let config = HttpConfig {
        reuse_after: Duration::ZERO,
        ..HttpConfig::default()
    };
    let client = HttpClient::tcp(target, config);
    let get = || {
        http::Request::get(format!("http://{addr}/"))
            .body(Full::new(Bytes::new()))
            .unwrap()
    };
    // The first request leaves a pooled connection, so the second needs no connect.
    let mut first = Exchange::default();
    let mut body = client.send(get(), &mut first).await.unwrap().into_body();
    while body.data().await.is_some() {}
    was_read.recv().unwrap();
    // Spend the budget without yielding; a task queued meanwhile holds the thread 200 ms.
    for _ in 0..10_000 {
        if !tokio::task::coop::has_budget_remaining() {
            break;
        }
        tokio::task::coop::consume_budget().await;
    }
    assert!(
        !tokio::task::coop::has_budget_remaining(),
        "the budget is spent"
    );
    let hog = tokio::spawn(async { std::thread::sleep(Duration::from_millis(200)) });
    let mut second = Exchange::default();
    let response = client.send(get(), &mut second).await.unwrap();
    assert!(second.reused_connection);
    let arrived = Instant::from_std(was_read.recv().unwrap());
    let sent = second.sent_at.unwrap();
    assert!(
        arrived.duration_since(sent) < Duration::from_millis(100),
        "the request reached the server {:?} after sent_at",
        arrived.duration_since(sent)
    );
    drop(response);
    hog.await.unwrap();
    server.join().unwrap();
}

/// Reads one request, sends an SSE head at once, then `tokens` chat chunks `gap` apart (the
/// first `ttft` after the request), each one write; reports the moments around every write.
fn stream_tokens(
    listener: TcpListener,
    (ttft, gap, tokens): (Duration, Duration, u32),
) -> Vec<Around> {
    let mut socket = accept(&listener);
    read_request(&mut socket);
    let start = std::time::Instant::now();
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                transfer-encoding: chunked\r\n\r\n";
    socket.write_all(head.as_bytes()).unwrap();
    let event = |data: &str| {
        let data = format!("data: {data}\n\n");
        format!("{:x}\r\n{data}\r\n", data.len())
    };
    let mut written = Vec::new();
    for i in 0..tokens {
        let due = start + ttft + gap * i;
        std::thread::sleep(due.saturating_duration_since(std::time::Instant::now()));
        let delta = format!(r#"{{"content":" t{i}"}}"#);
        let chunk = event(&format!(
            r#"{{"choices":[{{"index":0,"delta":{delta},"finish_reason":null}}]}}"#
        ));
        let before = std::time::Instant::now();
        socket.write_all(chunk.as_bytes()).unwrap();
        written.push((before, std::time::Instant::now()));
    }
    let end = event(r#"{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#)
        + &event("[DONE]")
        + "0\r\n\r\n";
    socket.write_all(end.as_bytes()).unwrap();
    written
}

#[tokio::test]
async fn a_first_token_read_with_later_ones_keeps_its_own_arrival() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // First token at 100 ms, four more 20 ms apart: all five arrive while the client's only
    // runtime thread is blocked from 40 ms to 300 ms, and one read drains them.
    let timing = (Duration::from_millis(100), Duration::from_millis(20), 5);
    let server = std::thread::spawn(move || stream_tokens(listener, timing));
    let target = Target::parse(&format!("http://{addr}/v1")).unwrap();
    let config = OpenAiConfig {
        model: "m".into(),
        ..OpenAiConfig::default()
    };
    let client = HttpClient::tcp(target, HttpConfig::default());
    let backend = OpenAiBackend::new(config, client).unwrap();
    let spec = RequestSpec {
        index: 0,
        input: RequestInput::Text("hi".into()),
        expected_input_tokens: None,
        max_output_tokens: Some(5),
        turn: None,
        tags: Default::default(),
    };
    let blocker = tokio::spawn(async {
        tokio::time::sleep(Duration::from_millis(40)).await;
        std::thread::sleep(Duration::from_millis(260));
    });
    let mut exchange = Exchange::default();
    let activity = Activity::default();
    let send = backend.send(&spec, &mut exchange, &activity);
    tokio::time::timeout(Duration::from_secs(30), send)
        .await
        .unwrap();
    blocker.await.unwrap();
    let written = server.join().unwrap();
    assert!(exchange.failure.is_none(), "{:?}", exchange.failure);
    assert_eq!(exchange.chunks.len(), 5, "{}", exchange.text);
    if !cfg!(target_os = "linux") {
        return;
    }
    let slack = Duration::from_millis(5);
    let at = |(before, after): Around| (Instant::from_std(before), Instant::from_std(after));
    // The first token: when it was written, not when the last of the backlog was (80 ms on).
    let (before, after) = at(written[0]);
    let first = exchange.chunks[0].at();
    assert!(
        first + slack >= before && first <= after + slack,
        "first token at {:?} from its write",
        first.saturating_duration_since(before)
    );
    // None is earlier than its own write (the rest carry the read's last arrival).
    for (chunk, around) in exchange.chunks.iter().zip(&written) {
        assert!(chunk.at() + slack >= at(*around).0);
    }
    // They were read late, and the read lag says so.
    assert!(exchange.read_late.unwrap() >= Duration::from_millis(100));
}
