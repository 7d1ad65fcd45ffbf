//! A small HTTP/1.1 client over hyper, made for measuring: one request per connection at a
//! time, a bounded pool of idle keep-alive connections, pluggable [`Connector`]s (TCP/TLS, or
//! in-memory pipes for tests), and exact timestamps written into the [`Exchange`].
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
//!   only when hyper hands it back unsent, i.e. it provably never reached the server;
//! - a connection returns to the pool only after its response body was read to the end.

mod connect;
mod pool;
mod target;
#[cfg(feature = "tls")]
pub mod tls;

use std::error::Error as StdError;
use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HOST, HeaderValue, USER_AGENT};
use http::{Request, Response, Uri};
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use tokio::time::Instant;

pub use connect::{BoxIo, ConnectError, Connector, FnConnector, Io, TcpConnector, TcpOptions};
pub use pool::{PoolStats, ResponseBody};
pub use target::{Target, TargetError};

use crate::record::{Exchange, Failure, KEPT_HEADERS, OutcomeKind};
use pool::{Pool, Sender};

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
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            max_idle: 4096,
            idle_timeout: Duration::from_secs(4),
            max_retries: 2,
            reuse_after: Duration::from_millis(50),
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
    sender: Sender,
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

    /// Connection counters.
    pub fn stats(&self) -> PoolStats {
        self.inner.pool.stats()
    }

    /// Sends `request` and waits for the response head, recording into `exchange`:
    /// `reused_connection`, `connect_time`, `retries`, `sent_at` (right before the request is
    /// handed to the connection), then `response_at`, `status` and kept headers.
    ///
    /// The URI may be origin-form (`/v1/…`) or absolute (only its path and query are used);
    /// `Host` and `User-Agent` are added when missing. Read the returned body to its end for
    /// the connection to be reused.
    pub async fn send(
        &self,
        mut request: Request<Full<Bytes>>,
        exchange: &mut Exchange,
    ) -> Result<Response<ResponseBody>, Failure> {
        self.prepare(&mut request);
        let mut fresh_only = false;
        loop {
            let Checkout { mut sender, reused } = self.checkout(fresh_only, exchange).await?;
            exchange.reused_connection = reused;
            exchange.sent_at = Some(Instant::now());
            match sender.try_send_request(request).await {
                Ok(response) => {
                    self.record_head(&response, exchange);
                    let pool = self.inner.pool.clone();
                    return Ok(response.map(|body| ResponseBody::new(body, pool, sender)));
                }
                Err(mut error) => match error.take_message() {
                    Some(unsent) if exchange.retries < self.inner.config.max_retries => {
                        exchange.retries += 1;
                        request = unsent;
                        fresh_only = true;
                    }
                    Some(_) => {
                        exchange.sent_at = None;
                        return Err(Failure::new(
                            OutcomeKind::Transport,
                            format!(
                                "connection closed before the request was sent ({} retries)",
                                exchange.retries
                            ),
                        ));
                    }
                    None => return Err(failure_from_hyper(error.error(), reused)),
                },
            }
        }
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

    /// A pooled connection that is open and ready, else a new one.
    async fn checkout(
        &self,
        fresh_only: bool,
        exchange: &mut Exchange,
    ) -> Result<Checkout, Failure> {
        let pool = &self.inner.pool;
        let mut pooled = if fresh_only { None } else { pool.take() };
        while let Some(mut sender) = pooled {
            if sender.ready().await.is_ok() {
                pool.reused.fetch_add(1, Ordering::Relaxed);
                return Ok(Checkout {
                    sender,
                    reused: true,
                });
            }
            pool.note_discarded(1);
            pooled = pool.take();
        }
        let started = Instant::now();
        let io = self
            .inner
            .connector
            .connect(&self.inner.target)
            .await
            .map_err(|error| Failure::new(OutcomeKind::Transport, error.to_string()))?;
        let (sender, connection) = hyper::client::conn::http1::Builder::new()
            .handshake(TokioIo::new(io))
            .await
            .map_err(|error| failure_from_hyper(&error, false))?;
        tokio::spawn(async move {
            // The connection's errors reach the request or body that was using it.
            let _ = connection.await;
        });
        exchange.connect_time = Some(started.elapsed());
        pool.opened.fetch_add(1, Ordering::Relaxed);
        Ok(Checkout {
            sender,
            reused: false,
        })
    }

    fn record_head<B>(&self, response: &Response<B>, exchange: &mut Exchange) {
        exchange.response_at = Some(Instant::now());
        exchange.status = Some(response.status().as_u16());
        exchange.headers.clear();
        for name in KEPT_HEADERS {
            if let Some(value) = response.headers().get(name) {
                let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
                exchange.headers.push((name.to_string(), value));
            }
        }
    }
}

/// Classifies a hyper error: unparsable responses are [`OutcomeKind::Protocol`], everything
/// else [`OutcomeKind::Transport`], with a message saying what happened.
pub fn failure_from_hyper(error: &hyper::Error, reused: bool) -> Failure {
    let on = if reused {
        " (on a reused keep-alive connection)"
    } else {
        ""
    };
    if error.is_parse() || error.is_parse_status() || error.is_parse_too_large() {
        return Failure::new(
            OutcomeKind::Protocol,
            format!("invalid HTTP response: {}", chain(error)),
        );
    }
    let what = match io_kind(error) {
        Some(io::ErrorKind::ConnectionReset) => "connection reset by the server".to_string(),
        Some(io::ErrorKind::BrokenPipe) => {
            "connection closed by the server while sending".to_string()
        }
        _ if error.is_incomplete_message() => {
            "connection closed before a complete response".to_string()
        }
        _ if error.is_timeout() => format!("timed out: {}", chain(error)),
        _ => chain(error),
    };
    Failure::new(OutcomeKind::Transport, format!("{what}{on}"))
}

fn io_kind(error: &hyper::Error) -> Option<io::ErrorKind> {
    let mut source = error.source();
    while let Some(current) = source {
        if let Some(io_error) = current.downcast_ref::<io::Error>() {
            return Some(io_error.kind());
        }
        source = current.source();
    }
    None
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
