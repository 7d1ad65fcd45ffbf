//! The idle-connection pool and [`ResponseBody`], the body wrapper that hands its connection
//! back to the pool only once the body was read to the end (a connection whose response was
//! abandoned midway is closed instead, since HTTP/1.1 cannot reuse it).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::http1::SendRequest;
use tokio::time::Instant;

pub(super) type Sender = SendRequest<Full<Bytes>>;

struct IdleConn {
    sender: Sender,
    since: Instant,
}

/// Counters of a client's connection use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PoolStats {
    /// Connections opened.
    pub opened: u64,
    /// Requests carried by a pooled (kept-alive) connection.
    pub reused: u64,
    /// Idle connections found closed (or expired) and discarded.
    pub discarded: u64,
    /// Connections idle in the pool now.
    pub idle: usize,
}

/// Bounded LIFO pool of idle connections to one target.
pub(super) struct Pool {
    idle: Mutex<VecDeque<IdleConn>>,
    max_idle: usize,
    idle_timeout: Duration,
    reuse_after: Duration,
    pub(super) opened: AtomicU64,
    pub(super) reused: AtomicU64,
    discarded: AtomicU64,
}

impl Pool {
    pub(super) fn new(max_idle: usize, idle_timeout: Duration, reuse_after: Duration) -> Self {
        Pool {
            idle: Mutex::new(VecDeque::new()),
            max_idle,
            idle_timeout,
            reuse_after,
            opened: AtomicU64::new(0),
            reused: AtomicU64::new(0),
            discarded: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<IdleConn>> {
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The most recently used idle connection that is still open, not expired, and idle for at
    /// least `reuse_after` (younger ones stay pooled for later). Readiness is awaited by the
    /// caller (outside the lock).
    pub(super) fn take(&self) -> Option<Sender> {
        let now = Instant::now();
        let mut dropped = Vec::new();
        let found = {
            let mut idle = self.lock();
            let mut found = None;
            for index in (0..idle.len()).rev() {
                let (closed, idle_for) = {
                    let conn = &idle[index];
                    (conn.sender.is_closed(), now.duration_since(conn.since))
                };
                if closed || idle_for > self.idle_timeout {
                    dropped.extend(idle.remove(index));
                } else if idle_for >= self.reuse_after {
                    found = idle.remove(index).map(|conn| conn.sender);
                    break;
                }
            }
            found
        };
        self.note_discarded(dropped.len());
        found
    }

    /// Returns a connection whose response was read to the end.
    pub(super) fn put(&self, sender: Sender) {
        if sender.is_closed() {
            self.note_discarded(1);
            return;
        }
        let now = Instant::now();
        let mut dropped = Vec::new();
        {
            let mut idle = self.lock();
            while idle
                .front()
                .is_some_and(|conn| now.duration_since(conn.since) > self.idle_timeout)
            {
                dropped.extend(idle.pop_front());
            }
            if idle.len() < self.max_idle {
                idle.push_back(IdleConn { sender, since: now });
            }
        }
        self.note_discarded(dropped.len());
    }

    pub(super) fn note_discarded(&self, count: usize) {
        if count > 0 {
            self.discarded.fetch_add(count as u64, Ordering::Relaxed);
        }
    }

    pub(super) fn stats(&self) -> PoolStats {
        PoolStats {
            opened: self.opened.load(Ordering::Relaxed),
            reused: self.reused.load(Ordering::Relaxed),
            discarded: self.discarded.load(Ordering::Relaxed),
            idle: self.lock().len(),
        }
    }
}

/// Gives a connection back to its pool when the body ends.
struct Release {
    pool: Arc<Pool>,
    sender: Sender,
}

/// A response body from [`super::HttpClient`]. Read it to the end and its connection is
/// reused; drop it early and the connection is closed.
pub struct ResponseBody {
    inner: Incoming,
    release: Option<Release>,
}

impl std::fmt::Debug for ResponseBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseBody")
            .field("pooled", &self.release.is_some())
            .finish()
    }
}

impl ResponseBody {
    pub(super) fn new(inner: Incoming, pool: Arc<Pool>, sender: Sender) -> Self {
        let mut body = ResponseBody {
            inner,
            release: Some(Release { pool, sender }),
        };
        if body.inner.is_end_stream() {
            body.release();
        }
        body
    }

    fn release(&mut self) {
        if let Some(Release { pool, sender }) = self.release.take() {
            pool.put(sender);
        }
    }

    /// The next data frame; `None` at the end of the body (trailers are skipped).
    pub async fn data(&mut self) -> Option<Result<Bytes, hyper::Error>> {
        loop {
            let frame = std::future::poll_fn(|cx| Pin::new(&mut *self).poll_frame(cx)).await?;
            match frame {
                Ok(frame) => {
                    if let Ok(data) = frame.into_data() {
                        return Some(Ok(data));
                    }
                }
                Err(error) => return Some(Err(error)),
            }
        }
    }

    /// Reads and discards the rest of the body, up to `max_bytes`; `true` when it ended (and
    /// the connection went back to the pool). Cancel-safe.
    pub async fn drain(&mut self, max_bytes: usize) -> bool {
        let mut seen = 0usize;
        while let Some(frame) = self.data().await {
            match frame {
                Ok(data) => seen += data.len(),
                Err(_) => return false,
            }
            if seen > max_bytes {
                return false;
            }
        }
        true
    }

    /// Finishes the body so the connection can be reused, for bodies whose content no longer
    /// matters (e.g. whatever follows an SSE `[DONE]`): waits up to `inline` here (the end
    /// normally follows at once), then keeps draining in a background task for up to
    /// `background`; gives up (closing the connection) past `max_bytes`.
    pub async fn finish(mut self, max_bytes: usize, inline: Duration, background: Duration) {
        if self.release.is_none() {
            return;
        }
        match tokio::time::timeout(inline, self.drain(max_bytes)).await {
            Ok(_) => {}
            Err(_) => {
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(background, self.drain(max_bytes)).await;
                });
            }
        }
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(None) => self.release(),
            Poll::Ready(Some(Ok(_))) if self.inner.is_end_stream() => self.release(),
            Poll::Ready(Some(Err(_))) => self.release = None,
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
