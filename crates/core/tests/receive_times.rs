//! Chunk times are when the server's bytes reached this host, not when a busy client got round
//! to reading them: a server on its own thread notes the moments around each write, the client
//! blocks its only runtime thread while a chunk waits, then reads it. Real loopback TCP (kernel
//! receive timestamps on Linux); elsewhere only the ordering holds and the test says so.
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
