//! Tiny scripted HTTP/1.1 servers for the backend tests: exact bytes, chosen split points,
//! delays, resets and stalls, over TCP or any in-memory pipe.
#![allow(dead_code, clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use goodput_core::http::{BoxIo, FnConnector, HttpClient, HttpConfig, Target};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// One thing the server does while answering.
#[derive(Debug, Clone)]
pub(crate) enum Step {
    /// Write these bytes (and flush).
    Write(Vec<u8>),
    /// Wait.
    Sleep(Duration),
    /// Reset the connection (TCP: RST; pipes: plain close).
    Reset,
    /// Close the connection after this response.
    Close,
    /// Never answer again (the connection stays open).
    Stall,
}

/// A request as the server read it.
#[derive(Debug, Clone)]
pub(crate) struct Captured {
    /// Request line and headers.
    pub(crate) head: String,
    /// Body.
    pub(crate) body: Vec<u8>,
}

impl Captured {
    /// The body as JSON.
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }

    /// A header value (name lower-case).
    pub(crate) fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_string())
        })
    }
}

/// Chooses the steps answering request `n` (counted over all connections).
pub(crate) type Responder = Arc<dyn Fn(usize, &Captured) -> Vec<Step> + Send + Sync>;

/// Shared state of a server.
#[derive(Clone)]
pub(crate) struct State {
    pub(crate) responder: Responder,
    pub(crate) requests: Arc<Mutex<Vec<Captured>>>,
    pub(crate) connections: Arc<AtomicUsize>,
    /// Close a connection idle longer than this (keep-alive timeout).
    pub(crate) idle_close: Option<Duration>,
}

impl State {
    pub(crate) fn new(
        responder: impl Fn(usize, &Captured) -> Vec<Step> + Send + Sync + 'static,
    ) -> Self {
        State {
            responder: Arc::new(responder),
            requests: Arc::new(Mutex::new(Vec::new())),
            connections: Arc::new(AtomicUsize::new(0)),
            idle_close: None,
        }
    }

    pub(crate) fn requests(&self) -> Vec<Captured> {
        self.requests.lock().unwrap().clone()
    }
}

/// How a connection ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum End {
    Eof,
    Close,
    Reset,
}

/// Reads one request (None at EOF or after `idle` without a new request).
pub(crate) async fn read_request<IO: AsyncRead + Unpin>(
    io: &mut IO,
    idle: Option<Duration>,
) -> Option<Captured> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break at + 4;
        }
        let read = match idle.filter(|_| buffer.is_empty()) {
            Some(limit) => tokio::time::timeout(limit, io.read(&mut chunk))
                .await
                .ok()?,
            None => io.read(&mut chunk).await,
        };
        match read {
            Ok(0) | Err(_) => return None,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut captured = Captured {
        head,
        body: buffer[head_end..].to_vec(),
    };
    let length: usize = captured
        .header("content-length")
        .map_or(0, |value| value.parse().unwrap());
    while captured.body.len() < length {
        match io.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => captured.body.extend_from_slice(&chunk[..n]),
        }
    }
    Some(captured)
}

/// Serves requests on one connection until the script closes it or the client goes away.
pub(crate) async fn serve<IO: AsyncRead + AsyncWrite + Unpin>(io: &mut IO, state: &State) -> End {
    state.connections.fetch_add(1, Ordering::SeqCst);
    loop {
        let Some(request) = read_request(io, state.idle_close).await else {
            return End::Eof;
        };
        let n = {
            let mut requests = state.requests.lock().unwrap();
            requests.push(request.clone());
            requests.len() - 1
        };
        for step in (state.responder)(n, &request) {
            match step {
                Step::Write(bytes) => {
                    if io.write_all(&bytes).await.is_err() || io.flush().await.is_err() {
                        return End::Eof;
                    }
                }
                Step::Sleep(duration) => tokio::time::sleep(duration).await,
                Step::Reset => return End::Reset,
                Step::Close => return End::Close,
                Step::Stall => std::future::pending::<()>().await,
            }
        }
    }
}

/// A TCP server on 127.0.0.1:0 (stopped when dropped).
pub(crate) struct TcpServer {
    pub(crate) addr: SocketAddr,
    pub(crate) state: State,
    task: JoinHandle<()>,
}

impl TcpServer {
    pub(crate) async fn start(state: State) -> TcpServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let state = shared.clone();
                tokio::spawn(async move {
                    if serve(&mut stream, &state).await == End::Reset {
                        let _ = stream.set_zero_linger();
                    }
                });
            }
        });
        TcpServer { addr, state, task }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }
}

impl Drop for TcpServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// An HTTP client for `url` whose connections are in-memory pipes served by `state` (exact
/// under paused time: no socket, no kernel).
pub(crate) fn in_memory_client(state: State, url: &str) -> HttpClient {
    let connector = FnConnector::new(move || {
        let state = state.clone();
        async move {
            let (client, mut served) = tokio::io::duplex(1 << 16);
            tokio::spawn(async move { serve(&mut served, &state).await });
            Ok(Box::new(client) as BoxIo)
        }
    });
    let target = Target::parse(url).unwrap();
    HttpClient::new(target, Arc::new(connector), HttpConfig::default())
}

/// One HTTP/1.1 chunk of a chunked body.
pub(crate) fn chunk(piece: &[u8]) -> Vec<u8> {
    let mut bytes = format!("{:x}\r\n", piece.len()).into_bytes();
    bytes.extend_from_slice(piece);
    bytes.extend_from_slice(b"\r\n");
    bytes
}

/// The last chunk of a chunked body.
pub(crate) const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// Response head of an SSE stream (chunked).
pub(crate) fn sse_head(extra_headers: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n\
         transfer-encoding: chunked\r\n{extra_headers}\r\n"
    )
    .into_bytes()
}

/// A whole SSE response: each piece is one HTTP chunk written separately.
pub(crate) fn sse(pieces: &[&str]) -> Vec<Step> {
    let mut steps = vec![Step::Write(sse_head(""))];
    steps.extend(
        pieces
            .iter()
            .map(|piece| Step::Write(chunk(piece.as_bytes()))),
    );
    steps.push(Step::Write(LAST_CHUNK.to_vec()));
    steps
}

/// A response with a content-length body.
pub(crate) fn response(status: &str, headers: &str, body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\ncontent-length: {}\r\n{headers}\r\n{body}",
        body.len()
    )
    .into_bytes()
}
