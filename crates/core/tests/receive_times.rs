//! Wire times against a server on its own thread. Chunk times are when the server's bytes
//! reached this host, not when a busy client got round to reading them (the server notes the
//! moments around each write, the client blocks its only runtime thread while a chunk waits,
//! then reads it; real loopback TCP with kernel receive timestamps on Linux — elsewhere only the
//! ordering is checked). And a request leaves when `sent_at` says, even from a task that spent
//! its cooperative budget: it is not put behind other tasks between the stamp and the write.
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::Duration;

use bytes::Bytes;
use goodput_core::http::{HttpClient, HttpConfig, Target};
use goodput_core::record::Exchange;
use http_body_util::Full;
use tokio::time::Instant;

/// The moments just before and just after a write, on the server's thread.
type Around = (std::time::Instant, std::time::Instant);

/// Serves one chunked response in lock step: head and first chunk, then (when told) the
/// second chunk and the end. Reports the moments around each chunk's write.
fn serve(listener: TcpListener, written: mpsc::Sender<Around>, go_on: mpsc::Receiver<()>) {
    let (mut socket, _) = listener.accept().unwrap();
    socket.set_nodelay(true).unwrap();
    let mut request = Vec::new();
    let mut buf = [0u8; 1024];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        let read = socket.read(&mut buf).unwrap();
        assert!(read > 0, "the client closed before its request ended");
        request.extend_from_slice(&buf[..read]);
    }
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
    let (mut socket, _) = listener.accept().unwrap();
    socket.set_nodelay(true).unwrap();
    let mut buf = [0u8; 4096];
    for _ in 0..requests {
        let mut request = Vec::new();
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            let got = socket.read(&mut buf).unwrap();
            assert!(got > 0, "the client closed before its request ended");
            request.extend_from_slice(&buf[..got]);
        }
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
