//! One HTTP/1.1 connection, owned by the request using it: the request is written and the
//! response read by the request's own task (no connection task, no channel between them), into
//! one small read buffer that grows only for large responses. A stream waiting for its next
//! chunk holds a socket, this buffer and its decoder state, nothing else.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::BytesMut;
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Version};
use thiserror::Error;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf};
use tokio::time::Instant;

use super::connect::BoxIo;

/// First read size. A read that fills what was free doubles the next one (up to
/// [`MAX_READ`]: large bodies take few reads); one that takes less than a quarter halves it
/// again, and an empty buffer grown past twice the read size is let go, so a stream that
/// caught up after a backlog goes back to holding a few hundred bytes between chunks.
const FIRST_READ: usize = 512;
const MAX_READ: usize = 16 * 1024;
/// Largest response head accepted.
const MAX_HEAD: usize = 64 * 1024;
const MAX_HEADERS: usize = 96;

/// Why a response could not be read.
#[derive(Debug, Error)]
pub enum HttpError {
    /// The socket failed.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The bytes are not a valid HTTP/1.x response.
    #[error("invalid HTTP response: {0}")]
    Parse(String),
    /// The connection ended before the response did.
    #[error("connection closed before a complete response")]
    Incomplete,
}

/// How the response body is delimited (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Framing {
    /// No body (HEAD, 1xx, 204, 304).
    Empty,
    /// `content-length`.
    Length(u64),
    /// `transfer-encoding: chunked`.
    Chunked,
    /// Until the server closes the connection.
    Close,
}

/// A parsed response head.
pub(super) struct Head {
    pub status: StatusCode,
    pub version: Version,
    pub headers: HeaderMap,
    pub framing: Framing,
    /// The connection may carry another request after this response.
    pub keep_alive: bool,
}

/// A connection: the byte stream and what was read from it but not yet consumed.
pub(super) struct Conn {
    io: BoxIo,
    pub(super) buf: BytesMut,
    next_read: usize,
    /// When the bytes of the last read reached this host (see [`Conn::fill`]).
    pub(super) received: Option<Instant>,
    /// The longest a read's bytes waited between arriving (kernel stamp) and being read, since
    /// the current request was written; `None` without kernel stamps.
    pub(super) read_late: Option<Duration>,
    /// Whether the transport was last told to watch arrivals (see [`Conn::watch_arrivals`]).
    watching: bool,
    /// When the first bytes of the last read arrived, where the transport knows.
    pub(super) first_received: Option<Instant>,
}

impl Conn {
    pub(super) fn new(io: BoxIo) -> Self {
        Conn {
            io,
            buf: BytesMut::new(),
            next_read: FIRST_READ,
            received: None,
            read_late: None,
            watching: false,
            first_received: None,
        }
    }

    /// Open and quiet: nothing unread, no end of stream and no error waiting. Never blocks.
    pub(super) fn is_idle_and_open(&mut self) -> bool {
        if !self.buf.is_empty() {
            return false;
        }
        let mut probe = [0u8; 1];
        let mut read = ReadBuf::new(&mut probe);
        let mut cx = Context::from_waker(Waker::noop());
        matches!(
            Pin::new(&mut self.io).poll_read(&mut cx, &mut read),
            Poll::Pending
        )
    }

    /// Writes `bytes` whole. On failure, says whether any byte was accepted: a request of
    /// which nothing was written provably never reached the server.
    pub(super) async fn write_all(&mut self, bytes: &[u8]) -> Result<(), (io::Error, bool)> {
        let mut written = 0;
        while written < bytes.len() {
            match self.io.write(&bytes[written..]).await {
                Ok(0) => return Err((io::ErrorKind::WriteZero.into(), written > 0)),
                Ok(n) => written += n,
                Err(error) => return Err((error, written > 0)),
            }
        }
        self.io.flush().await.map_err(|error| (error, true))
    }

    /// Has the transport watch arrivals, or stop (from a streamed request's write until its
    /// reader has a first token: see `Io::watch_arrivals`).
    pub(super) fn watch_arrivals(&mut self, on: bool) {
        if self.watching != on {
            self.io.watch_arrivals(on);
            self.watching = on;
        }
    }

    /// Reads more bytes into the buffer; `Ok(0)` at the end of the stream. Notes when they
    /// arrived: the transport's receive time if it has one, else now; and, while arrivals are
    /// watched, when the read's first bytes arrived.
    pub(super) async fn fill(&mut self) -> io::Result<usize> {
        if self.buf.is_empty() && self.buf.capacity() > 2 * self.next_read {
            self.buf = BytesMut::new();
        }
        let free = self.buf.capacity() - self.buf.len();
        if free < self.next_read / 2 {
            self.buf.reserve(self.next_read);
        }
        let free = self.buf.capacity() - self.buf.len();
        let read = self.io.read_buf(&mut self.buf).await?;
        if read > 0 {
            let now = Instant::now();
            self.first_received = self.io.first_received_at();
            self.received = Some(match self.io.received_at() {
                Some(arrived) => {
                    let first = self.first_received.unwrap_or(arrived).min(arrived);
                    let late = now.saturating_duration_since(first);
                    self.read_late = Some(self.read_late.map_or(late, |worst| worst.max(late)));
                    arrived
                }
                None => now,
            });
        }
        if read == free {
            self.next_read = (self.next_read * 2).min(MAX_READ);
        } else if read < self.next_read / 4 {
            self.next_read = (self.next_read / 2).max(FIRST_READ);
        }
        Ok(read)
    }

    /// Reads a response head, skipping interim (1xx) responses. `head_request`: the request
    /// was a HEAD, whose response has no body whatever its headers say.
    pub(super) async fn read_head(&mut self, head_request: bool) -> Result<Head, HttpError> {
        loop {
            if let Some((used, head)) = parse_head(&self.buf, head_request)? {
                let _ = self.buf.split_to(used);
                if head.status.is_informational() && head.status != StatusCode::SWITCHING_PROTOCOLS
                {
                    continue;
                }
                return Ok(head);
            }
            if self.buf.len() > MAX_HEAD {
                return Err(HttpError::Parse(format!(
                    "response head larger than {} KiB",
                    MAX_HEAD / 1024
                )));
            }
            if self.fill().await? == 0 {
                return Err(HttpError::Incomplete);
            }
        }
    }
}

/// A complete head at the start of `bytes` (and how many bytes it took), or `None` if more
/// bytes are needed.
fn parse_head(bytes: &[u8], head_request: bool) -> Result<Option<(usize, Head)>, HttpError> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut slots);
    let used = match response.parse(bytes) {
        Ok(httparse::Status::Complete(used)) => used,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(error) => return Err(HttpError::Parse(error.to_string())),
    };
    let code = response.code.unwrap_or(0);
    let status =
        StatusCode::from_u16(code).map_err(|_| HttpError::Parse(format!("status code {code}")))?;
    let version = match response.version {
        Some(0) => Version::HTTP_10,
        _ => Version::HTTP_11,
    };
    let mut headers = HeaderMap::with_capacity(response.headers.len());
    for header in response.headers.iter() {
        let name = HeaderName::from_bytes(header.name.as_bytes())
            .map_err(|_| HttpError::Parse(format!("header name `{}`", header.name)))?;
        let value = HeaderValue::from_bytes(header.value)
            .map_err(|_| HttpError::Parse(format!("value of header `{}`", header.name)))?;
        headers.append(name, value);
    }
    let framing = framing(status, &headers, head_request)?;
    let keep_alive = keep_alive(version, &headers) && framing != Framing::Close;
    Ok(Some((
        used,
        Head {
            status,
            version,
            headers,
            framing,
            keep_alive,
        },
    )))
}

fn framing(status: StatusCode, headers: &HeaderMap, head: bool) -> Result<Framing, HttpError> {
    let no_body = head
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED;
    if no_body {
        return Ok(Framing::Empty);
    }
    let encodings = headers.get_all(http::header::TRANSFER_ENCODING);
    if encodings.iter().next().is_some() {
        let last = encodings
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .map(str::trim)
            .next_back()
            .unwrap_or("");
        return Ok(if last.eq_ignore_ascii_case("chunked") {
            Framing::Chunked
        } else {
            Framing::Close
        });
    }
    let mut lengths = headers.get_all(http::header::CONTENT_LENGTH).iter();
    let Some(first) = lengths.next() else {
        return Ok(Framing::Close);
    };
    let parse = |value: &HeaderValue| -> Option<u64> { value.to_str().ok()?.trim().parse().ok() };
    let length = parse(first)
        .filter(|length| lengths.all(|other| parse(other) == Some(*length)))
        .ok_or_else(|| HttpError::Parse("invalid content-length".to_string()))?;
    Ok(Framing::Length(length))
}

fn keep_alive(version: Version, headers: &HeaderMap) -> bool {
    let says = |token: &str| {
        headers
            .get_all(http::header::CONNECTION)
            .iter()
            .filter_map(|value| value.to_str().ok())
            .flat_map(|value| value.split(','))
            .any(|value| value.trim().eq_ignore_ascii_case(token))
    };
    if version == Version::HTTP_10 {
        says("keep-alive")
    } else {
        !says("close")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head(text: &str) -> Head {
        match parse_head(text.as_bytes(), false) {
            Ok(Some((used, head))) => {
                assert_eq!(used, text.len());
                head
            }
            _ => panic!("not a complete head: {text}"),
        }
    }

    #[test]
    fn framing_follows_rfc_9112() {
        let h = head("HTTP/1.1 200 OK\r\ncontent-length: 12\r\n\r\n");
        assert_eq!((h.framing, h.keep_alive), (Framing::Length(12), true));
        let h = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n");
        assert_eq!(h.framing, Framing::Chunked);
        let h = head("HTTP/1.1 200 OK\r\ncontent-length: 3\r\nconnection: close\r\n\r\n");
        assert!(!h.keep_alive);
        let h = head("HTTP/1.1 200 OK\r\n\r\n");
        assert_eq!((h.framing, h.keep_alive), (Framing::Close, false));
        let h = head("HTTP/1.1 204 No Content\r\ncontent-length: 5\r\n\r\n");
        assert_eq!((h.framing, h.keep_alive), (Framing::Empty, true));
        let h = head("HTTP/1.0 200 OK\r\ncontent-length: 1\r\n\r\n");
        assert!(!h.keep_alive);
        let h = head("HTTP/1.0 200 OK\r\ncontent-length: 1\r\nConnection: Keep-Alive\r\n\r\n");
        assert!(h.keep_alive);
    }

    #[test]
    fn bad_heads_are_parse_errors_and_partial_ones_wait() {
        let partial = parse_head(b"HTTP/1.1 200 OK\r\ncontent-le", false);
        assert!(matches!(partial, Ok(None)));
        for bad in [
            "HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n",
            "HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n",
            "SSH-2.0-OpenSSH\r\n\r\n",
        ] {
            let parsed = parse_head(bad.as_bytes(), false);
            assert!(matches!(parsed, Err(HttpError::Parse(_))), "{bad}");
        }
    }
}
