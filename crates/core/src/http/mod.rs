//! A small HTTP/1.1 client made for measuring (and, with [`HttpConfig::http2`], HTTP/2
//! through hyper: `h2.rs`): one request per connection at a time, written
//! and read by the request's own task (no connection task, one small read buffer: a waiting
//! stream costs little and a chunk is timestamped right where it is read), a bounded pool of
//! idle keep-alive connections, pluggable [`Connector`]s (TCP/TLS, or in-memory pipes for
//! tests), and exact timestamps written into the [`Exchange`].
//!
//! Reliability rules:
//! - an idle connection is reused only if it is still open, younger than
//!   [`HttpConfig::idle_timeout`] and ready; closed ones are dropped (servers such as
//!   llama.cpp and uvicorn close idle keep-alive connections after ~5 s);
//! - and only once it has been idle for [`HttpConfig::reuse_after`]: llama.cpp's llama-server
//!   closes the connection right after every streamed answer while announcing keep-alive, and
//!   a request sent on it at once would go into a closing socket (and could not be proven
//!   unsent); by then the server's close has arrived and the connection is dropped unused;
//! - a request is re-sent (at most [`HttpConfig::max_retries`] times, on a fresh connection)
//!   only when not one of its bytes could be written, i.e. it provably never reached the
//!   server;
//! - a connection returns to the pool only after its response body was read to the end.

#[cfg(target_os = "linux")]
mod arrivals;
mod body;
mod conn;
mod connect;
mod h2;
mod pool;
pub mod sigv4;
#[cfg(target_os = "linux")]
mod stamped;
mod target;
#[cfg(feature = "tls")]
pub mod tls;

use std::error::Error as StdError;
use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use http::header::{CONTENT_LENGTH, HOST, HeaderValue, USER_AGENT};
use http::{Method, Request, Response, Uri};
use http_body_util::{BodyExt, Full};
use tokio::time::Instant;

pub use body::{Arrivals, ResponseBody};

/// A request extension for streamed responses: until the body's reader has its first token
/// ([`ResponseBody::watch_arrivals`]), every arrival on the connection is noted by a watcher
/// thread as it happens (Linux TCP), so a first token read late together with later ones
/// keeps its own arrival time ([`ResponseBody::arrivals`]). Costs a wake-up of that
/// thread per arrival; whole (non-streamed) responses do without.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WatchArrivals;
pub use conn::HttpError;
pub use connect::{
    Alpn, BoxIo, ConnectError, Connector, FnConnector, Io, TcpConnector, TcpOptions,
};
pub use pool::PoolStats;
pub use target::{Target, TargetError};

use crate::record::{Exchange, Failure, KEPT_HEADERS, OutcomeKind};
use conn::{Conn, Head};
use pool::Pool;

/// Client settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpConfig {
    /// Most idle connections kept (set it to at least the run's concurrency).
    pub max_idle: usize,
    /// Idle connections older than this are closed instead of reused. Default 4 s: just under
    /// the 5 s idle keep-alive timeout of uvicorn (vLLM, SGLang) and cpp-httplib (llama.cpp),
    /// so goodput does not send on a connection the server is about to close.
    pub idle_timeout: Duration,
    /// Re-sends of a request that provably never reached the server.
    pub max_retries: u32,
    /// An idle connection is reused only after it has been idle this long without the server
    /// closing it. Default 50 ms: llama.cpp's llama-server closes the connection within about
    /// a millisecond after every streamed answer without announcing it (measured: 30 µs
    /// typical, 1.2 ms under load); servers that keep connections alive lose nothing but a
    /// second connection per worker when requests follow each other back to back.
    pub reuse_after: Duration,
    /// Speak HTTP/2 (`h2.rs`): one connection multiplexing every request — ALPN `h2` over
    /// TLS, h2c with prior knowledge over plain TCP. Default off (HTTP/1.1).
    pub http2: bool,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            max_idle: 4096,
            idle_timeout: Duration::from_secs(4),
            max_retries: 2,
            reuse_after: Duration::from_millis(50),
            http2: false,
        }
    }
}

struct Inner {
    target: Target,
    connector: Arc<dyn Connector>,
    config: HttpConfig,
    pool: Arc<Pool>,
    host: HeaderValue,
    user_agent: HeaderValue,
    /// The HTTP/2 connection, with [`HttpConfig::http2`].
    h2: Option<h2::H2>,
}

/// HTTP/1.1 client for one [`Target`]. Cheap to clone (shared pool).
#[derive(Clone)]
pub struct HttpClient {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient")
            .field("target", &self.inner.target.to_string())
            .field("connector", &self.inner.connector)
            .field("config", &self.inner.config)
            .finish()
    }
}

/// A connection ready to carry a request.
struct Checkout {
    conn: Conn,
    reused: bool,
}

impl HttpClient {
    /// A client for `target` opening connections with `connector`.
    pub fn new(target: Target, connector: Arc<dyn Connector>, config: HttpConfig) -> Self {
        let host = HeaderValue::from_str(target.authority())
            .unwrap_or_else(|_| HeaderValue::from_static("localhost"));
        let user_agent = HeaderValue::from_static(concat!("goodput/", env!("CARGO_PKG_VERSION")));
        let pool = Arc::new(Pool::new(
            config.max_idle,
            config.idle_timeout,
            config.reuse_after,
        ));
        HttpClient {
            inner: Arc::new(Inner {
                target,
                connector,
                config,
                pool,
                host,
                user_agent,
                h2: config.http2.then(h2::H2::default),
            }),
        }
    }

    /// A client dialing TCP (and TLS for https) with default options.
    pub fn tcp(target: Target, config: HttpConfig) -> Self {
        HttpClient::new(target, Arc::new(TcpConnector::default()), config)
    }

    /// The target.
    pub fn target(&self) -> &Target {
        &self.inner.target
    }

    /// A new connection to the target, outside the pool, for another protocol over the same
    /// transport (gRPC's HTTP/2, a WebSocket): TCP live, in-memory pipes in virtual time.
    pub async fn connect_raw(&self) -> Result<BoxIo, ConnectError> {
        self.inner.connector.connect(&self.inner.target).await
    }

    /// [`HttpClient::connect_raw`] for HTTP/2 (gRPC): TLS offers ALPN `h2`.
    pub async fn connect_raw_h2(&self) -> Result<BoxIo, ConnectError> {
        self.inner
            .connector
            .connect_for(&self.inner.target, Alpn::Http2)
            .await
    }

    /// Connection counters.
    pub fn stats(&self) -> PoolStats {
        self.inner.pool.stats()
    }

    /// Sends `request` and waits for the response head, recording into `exchange`:
    /// `reused_connection`, `connect_time`, `retries`, `sent_at` (right before the request is
    /// written to the connection), then `response_at`, `status` and kept headers.
    ///
    /// The URI may be origin-form (`/v1/…`) or absolute (only its path and query are used);
    /// `Host` and `User-Agent` are added when missing. Read the returned body to its end for
    /// the connection to be reused. A request carrying the [`WatchArrivals`] extension has
    /// its arrivals watched until its reader turns that off.
    pub async fn send(
        &self,
        mut request: Request<Full<Bytes>>,
        exchange: &mut Exchange,
    ) -> Result<Response<ResponseBody>, Failure> {
        self.prepare(&mut request);
        if let Some(h2) = &self.inner.h2 {
            return h2.send(&self.inner, request, exchange).await;
        }
        let head_request = request.method() == Method::HEAD;
        let watch = request.extensions().get::<WatchArrivals>().is_some();
        let wire = serialize(request).await;
        let mut fresh_only = false;
        let (mut conn, reused) = loop {
            let Checkout { mut conn, reused } = self.checkout(fresh_only, exchange).await?;
            exchange.reused_connection = reused;
            conn.read_late = None;
            conn.watch_arrivals(watch);
            exchange.sent_at = Some(Instant::now());
            // Out without yielding: a task whose cooperative budget went on reading its last
            // answer would otherwise be sent to the back of the run queue between `sent_at`
            // and the write — milliseconds at a thousand streams, counted as the server's.
            // One small request is bounded work.
            match tokio::task::coop::unconstrained(conn.write_all(&wire)).await {
                Ok(()) => break (conn, reused),
                Err((_, false)) if exchange.retries < self.inner.config.max_retries => {
                    exchange.retries += 1;
                    fresh_only = true;
                    continue;
                }
                Err((_, false)) => {
                    exchange.sent_at = None;
                    return Err(Failure::new(
                        OutcomeKind::Transport,
                        format!(
                            "connection closed before the request was sent ({} retries)",
                            exchange.retries
                        ),
                    ));
                }
                Err((error, true)) => {
                    return Err(failure_from_http(&HttpError::Io(error), reused));
                }
            }
        };
        // The request is out: its bytes are not kept while the answer is awaited.
        drop(wire);
        let head = conn
            .read_head(head_request)
            .await
            .map_err(|error| failure_from_http(&error, reused))?;
        Ok(self.respond(conn, head, exchange))
    }

    fn prepare(&self, request: &mut Request<Full<Bytes>>) {
        if request.uri().authority().is_some() {
            let origin = request.uri().path_and_query().cloned();
            *request.uri_mut() = origin.map_or_else(|| Uri::from_static("/"), Uri::from);
        }
        let headers = request.headers_mut();
        if !headers.contains_key(HOST) {
            headers.insert(HOST, self.inner.host.clone());
        }
        if !headers.contains_key(USER_AGENT) {
            headers.insert(USER_AGENT, self.inner.user_agent.clone());
        }
    }

    /// A pooled connection that is open and quiet, else a new one.
    async fn checkout(
        &self,
        fresh_only: bool,
        exchange: &mut Exchange,
    ) -> Result<Checkout, Failure> {
        let pool = &self.inner.pool;
        if !fresh_only && let Some(conn) = pool.take() {
            pool.reused.fetch_add(1, Ordering::Relaxed);
            return Ok(Checkout { conn, reused: true });
        }
        let started = Instant::now();
        let io = self
            .inner
            .connector
            .connect(&self.inner.target)
            .await
            .map_err(|error| Failure::new(OutcomeKind::Transport, error.to_string()))?;
        exchange.connect_time = Some(started.elapsed());
        pool.opened.fetch_add(1, Ordering::Relaxed);
        Ok(Checkout {
            conn: Conn::new(io),
            reused: false,
        })
    }

    /// Records the head into `exchange` and wraps the body.
    fn respond(&self, conn: Conn, head: Head, exchange: &mut Exchange) -> Response<ResponseBody> {
        exchange.response_at = Some(conn.received.unwrap_or_else(Instant::now));
        exchange.status = Some(head.status.as_u16());
        exchange.headers.clear();
        for name in KEPT_HEADERS {
            if let Some(value) = head.headers.get(name) {
                let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
                exchange.headers.push((name.to_string(), value));
            }
        }
        let pool = self.inner.pool.clone();
        let body = ResponseBody::new(conn, head.framing, head.keep_alive, pool);
        let mut response = Response::new(body);
        *response.status_mut() = head.status;
        *response.version_mut() = head.version;
        *response.headers_mut() = head.headers;
        response
    }
}

/// The request as bytes on the wire: request line, headers, `content-length`, body.
async fn serialize(request: Request<Full<Bytes>>) -> Vec<u8> {
    let (parts, body) = request.into_parts();
    let body = match body.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(never) => match never {},
    };
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut wire = Vec::with_capacity(256 + body.len());
    wire.extend_from_slice(parts.method.as_str().as_bytes());
    wire.push(b' ');
    wire.extend_from_slice(target.as_bytes());
    wire.extend_from_slice(b" HTTP/1.1\r\n");
    for (name, value) in &parts.headers {
        wire.extend_from_slice(name.as_str().as_bytes());
        wire.extend_from_slice(b": ");
        wire.extend_from_slice(value.as_bytes());
        wire.extend_from_slice(b"\r\n");
    }
    let bodiless = matches!(parts.method, Method::GET | Method::HEAD) && body.is_empty();
    if !parts.headers.contains_key(CONTENT_LENGTH) && !bodiless {
        wire.extend_from_slice(format!("content-length: {}\r\n", body.len()).as_bytes());
    }
    wire.extend_from_slice(b"\r\n");
    wire.extend_from_slice(&body);
    wire
}

/// `text` percent-encoded as RFC 3986 asks: every byte but the unreserved characters
/// (`A–Z a–z 0–9 - _ . ~`) as `%XX`, and `/` kept too when `keep_slash` (a path).
pub fn percent_encode(text: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        let keep =
            byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) || (keep_slash && byte == b'/');
        if keep {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// A response body that failed while it was read, as a failure saying how far it got:
/// `connection closed {progress}: {cause}` (`progress` e.g. "after 12 chunks"), of the
/// kind [`failure_from_http`] gives the error.
pub fn closed_mid_body(error: &HttpError, progress: &str) -> Failure {
    let cause = failure_from_http(error, false);
    Failure::new(
        cause.kind,
        format!("connection closed {progress}: {}", cause.message),
    )
}

/// Classifies a client error: unparsable responses are [`OutcomeKind::Protocol`], everything
/// else [`OutcomeKind::Transport`], with a message saying what happened.
pub fn failure_from_http(error: &HttpError, reused: bool) -> Failure {
    let on = if reused {
        " (on a reused keep-alive connection)"
    } else {
        ""
    };
    let what = match error {
        HttpError::Parse(_) => return Failure::new(OutcomeKind::Protocol, error.to_string()),
        HttpError::Incomplete => error.to_string(),
        HttpError::Io(io_error) => match io_error.kind() {
            io::ErrorKind::ConnectionReset => "connection reset by the server".to_string(),
            io::ErrorKind::BrokenPipe => {
                "connection closed by the server while sending".to_string()
            }
            io::ErrorKind::UnexpectedEof => {
                "connection closed before a complete response".to_string()
            }
            io::ErrorKind::TimedOut => format!("timed out: {}", chain(io_error)),
            _ => chain(io_error),
        },
    };
    Failure::new(OutcomeKind::Transport, format!("{what}{on}"))
}

/// An error and its sources joined with `: `.
pub(crate) fn chain(error: &dyn StdError) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(current) = source {
        let next = current.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = current.source();
    }
    text
}
