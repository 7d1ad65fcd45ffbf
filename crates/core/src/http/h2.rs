//! HTTP/2 for HTTP targets ([`super::HttpConfig::http2`]): one connection per client that
//! multiplexes every concurrent request as a stream, through hyper's HTTP/2 client — over TLS
//! with ALPN `h2` for `https://`, h2c with prior knowledge over plain TCP (and over the
//! simulator's in-memory pipes). The timestamps are HTTP/1.1's: `sent_at` just before the
//! request is handed to the connection, `response_at` when its head arrives, each data frame
//! when hyper yields it to the request's reader. A closed connection is replaced at the next
//! request.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use http::{Request, Response, Uri};
use http_body_util::Full;
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::sync::OnceCell;
use tokio::time::Instant;

use super::connect::Alpn;
use super::{Inner, ResponseBody};
use crate::record::{Exchange, Failure, KEPT_HEADERS, OutcomeKind};

type Sender = SendRequest<Full<Bytes>>;

/// The client's one HTTP/2 connection, opened at the first request: by whichever request
/// comes first while the others wait on the cell (no lock is held across the connect), and
/// replaced by a fresh cell once hyper says it closed.
#[derive(Debug, Default)]
pub(super) struct H2 {
    current: std::sync::Mutex<Arc<OnceCell<Sender>>>,
}

fn transport(message: String) -> Failure {
    Failure::new(OutcomeKind::Transport, message)
}

/// Opens the connection and starts its task.
async fn open(inner: &Inner) -> Result<Sender, Failure> {
    let io = inner
        .connector
        .connect_for(&inner.target, Alpn::Http2)
        .await
        .map_err(|error| transport(error.to_string()))?;
    let (opened, connection) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(io))
            .await
            .map_err(|error| transport(format!("HTTP/2 handshake: {error}")))?;
    // The connection's own task: it reads and writes the frames of every stream.
    tokio::spawn(async move {
        let _ = connection.await;
    });
    inner.pool.opened.fetch_add(1, Ordering::Relaxed);
    Ok(opened)
}

impl H2 {
    /// The current connection's cell.
    fn cell(&self) -> Arc<OnceCell<Sender>> {
        match self.current.lock() {
            Ok(current) => current.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Replaces `closed` by a fresh cell, unless another request did already.
    fn replace(&self, closed: &Arc<OnceCell<Sender>>) {
        let mut current = match self.current.lock() {
            Ok(current) => current,
            Err(poisoned) => poisoned.into_inner(),
        };
        if Arc::ptr_eq(&current, closed) {
            *current = Arc::new(OnceCell::new());
        }
    }

    /// The connection's sender, opening (or re-opening, once) the connection when needed.
    async fn sender(&self, inner: &Inner, exchange: &mut Exchange) -> Result<Sender, Failure> {
        for _ in 0..2 {
            let cell = self.cell();
            let opened_here = AtomicBool::new(false);
            let started = Instant::now();
            let sender = cell
                .get_or_try_init(|| async {
                    opened_here.store(true, Ordering::Relaxed);
                    open(inner).await
                })
                .await?
                .clone();
            let fresh = opened_here.load(Ordering::Relaxed);
            if sender.is_closed() {
                self.replace(&cell);
                if fresh {
                    break;
                }
                continue;
            }
            exchange.reused_connection = !fresh;
            if fresh {
                exchange.connect_time = Some(started.elapsed());
            }
            return Ok(sender);
        }
        Err(transport(
            "HTTP/2 connection closed as soon as it opened".into(),
        ))
    }

    /// Sends `request` as a stream of the connection; its head and body as HTTP/1.1's.
    pub(super) async fn send(
        &self,
        inner: &Inner,
        mut request: Request<Full<Bytes>>,
        exchange: &mut Exchange,
    ) -> Result<Response<ResponseBody>, Failure> {
        let path = request
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        let scheme = if inner.target.is_https() {
            "https"
        } else {
            "http"
        };
        let uri = format!("{scheme}://{}{path}", inner.target.authority());
        *request.uri_mut() = Uri::try_from(uri)
            .map_err(|error| Failure::new(OutcomeKind::Invalid, format!("request URI: {error}")))?;
        *request.version_mut() = http::Version::HTTP_2;
        request.headers_mut().remove(http::header::HOST);
        let mut sender = self.sender(inner, exchange).await?;
        sender
            .ready()
            .await
            .map_err(|error| transport(format!("HTTP/2 connection: {error}")))?;
        exchange.sent_at = Some(Instant::now());
        let response = sender
            .send_request(request)
            .await
            .map_err(|error| transport(super::chain(&error)))?;
        exchange.response_at = Some(Instant::now());
        exchange.status = Some(response.status().as_u16());
        exchange.headers.clear();
        for name in KEPT_HEADERS {
            if let Some(value) = response.headers().get(name) {
                let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
                exchange.headers.push((name.to_string(), value));
            }
        }
        let (parts, body) = response.into_parts();
        let body = ResponseBody::from_h2(body, inner.pool.clone());
        Ok(Response::from_parts(parts, body))
    }
}
