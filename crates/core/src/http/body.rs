//! [`ResponseBody`]: a response body read by the request's own task straight from its
//! connection (content-length, chunked or until close), handing the connection back to the
//! pool only once the body was read to the end (a connection whose response was abandoned
//! midway is closed instead, since HTTP/1.1 cannot reuse it).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use memchr::memchr;
use tokio::time::Instant;

use super::conn::{Conn, Framing, HttpError};
use super::pool::Pool;

/// Longest chunk-size or trailer line accepted.
const MAX_LINE: usize = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// `content-length` bytes still to come.
    Length(u64),
    /// A chunk-size line is next.
    ChunkSize,
    /// Bytes of the current chunk still to come.
    ChunkData(u64),
    /// The CRLF closing a chunk's data.
    ChunkEnd,
    /// Trailer lines up to an empty one.
    Trailers,
    /// Everything until the server closes.
    UntilClose,
    /// The body ended.
    Done,
    /// The connection failed; nothing more can be read.
    Failed,
}

/// A response body from [`super::HttpClient`]. Read it to the end and its connection is
/// reused; drop it early and the connection is closed.
pub struct ResponseBody {
    conn: Option<Conn>,
    state: State,
    keep_alive: bool,
    pool: Arc<Pool>,
    /// When the bytes read last reached this host.
    received: Option<Instant>,
    /// When the first bytes of the piece last returned arrived, if it began a read that
    /// knew.
    first_received: Option<Instant>,
    /// Nothing of the last read was returned yet.
    fresh_read: bool,
    /// See [`ResponseBody::read_late`].
    read_late: Option<Duration>,
    /// An HTTP/2 stream's body (`h2.rs`) instead of the connection's bytes.
    h2: Option<hyper::body::Incoming>,
}

impl std::fmt::Debug for ResponseBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseBody")
            .field("state", &self.state)
            .field("pooled", &(self.keep_alive && self.conn.is_some()))
            .finish()
    }
}

impl ResponseBody {
    pub(super) fn new(conn: Conn, framing: Framing, keep_alive: bool, pool: Arc<Pool>) -> Self {
        let state = match framing {
            Framing::Empty | Framing::Length(0) => State::Done,
            Framing::Length(n) => State::Length(n),
            Framing::Chunked => State::ChunkSize,
            Framing::Close => State::UntilClose,
        };
        let mut body = ResponseBody {
            received: conn.received,
            // What followed the head in its read did not begin that read: no first arrival.
            first_received: None,
            fresh_read: false,
            read_late: conn.read_late,
            conn: Some(conn),
            state,
            keep_alive,
            pool,
            h2: None,
        };
        if state == State::Done {
            body.release();
        }
        body
    }

    /// The body of an HTTP/2 stream: its data frames as they are read.
    pub(super) fn from_h2(body: hyper::body::Incoming, pool: Arc<Pool>) -> Self {
        ResponseBody {
            conn: None,
            state: State::UntilClose,
            keep_alive: false,
            pool,
            received: None,
            first_received: None,
            fresh_read: false,
            read_late: None,
            h2: Some(body),
        }
    }

    /// The next data frame of an HTTP/2 stream, timed when it is read.
    async fn h2_data(&mut self) -> Option<Result<Bytes, HttpError>> {
        use http_body_util::BodyExt;
        let body = self.h2.as_mut()?;
        loop {
            match body.frame().await {
                None => {
                    self.state = State::Done;
                    self.h2 = None;
                    return None;
                }
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) if data.is_empty() => {}
                    Ok(data) => {
                        self.received = Some(Instant::now());
                        return Some(Ok(data));
                    }
                    // Trailers are skipped.
                    Err(_) => {}
                },
                Some(Err(error)) => {
                    self.h2 = None;
                    let error = std::io::Error::other(super::chain(&error));
                    return self.fail(HttpError::Io(error));
                }
            }
        }
    }

    /// When the bytes [`ResponseBody::data`] returned last reached this host: the kernel's
    /// receive time where the connection has it (Linux TCP), else when they were read; now if
    /// nothing was read yet. A chunk's time, whatever the client was busy with meanwhile.
    pub fn received_at(&self) -> Instant {
        self.received.unwrap_or_else(Instant::now)
    }

    /// When the piece [`ResponseBody::data`] last returned arrived: its last bytes
    /// ([`ResponseBody::received_at`]) and, if it began a read while arrivals were watched
    /// ([`ResponseBody::watch_arrivals`]; Linux TCP), its first.
    pub fn arrivals(&self) -> Arrivals {
        Arrivals {
            first: self.first_received,
            last: self.received_at(),
        }
    }

    /// Whether arrivals stay watched (on from the request's write; a streaming reader turns
    /// it off once it has its first token: each arrival costs the watcher a wake-up).
    pub fn watch_arrivals(&mut self, on: bool) {
        if let Some(conn) = self.conn.as_mut() {
            conn.watch_arrivals(on);
        }
    }

    /// The longest the bytes of this response waited in the socket, arrived but unread while
    /// the client was busy elsewhere (kernel receive timestamps; `None` without them).
    pub fn read_late(&self) -> Option<Duration> {
        self.read_late
    }

    /// Whether the body was read to its end.
    pub fn is_end_stream(&self) -> bool {
        self.state == State::Done
    }

    fn release(&mut self) {
        if let Some(conn) = self.conn.take()
            && self.keep_alive
            && conn.buf.is_empty()
        {
            self.pool.put(conn);
        }
    }

    fn fail(&mut self, error: HttpError) -> Option<Result<Bytes, HttpError>> {
        self.state = State::Failed;
        self.conn = None;
        Some(Err(error))
    }

    /// The next piece of the body as it arrives; `None` at the end (trailers are skipped).
    /// Cancel-safe: bytes read before a cancellation stay buffered for the next call.
    pub async fn data(&mut self) -> Option<Result<Bytes, HttpError>> {
        if matches!(self.state, State::Done | State::Failed) {
            return None;
        }
        if self.h2.is_some() {
            return self.h2_data().await;
        }
        loop {
            // Taken before decoding: a piece that ends the body hands the connection back.
            let first = self.conn.as_ref().and_then(|conn| conn.first_received);
            match self.decode() {
                Ok(Step::Data(bytes)) => {
                    let fresh = std::mem::take(&mut self.fresh_read);
                    self.first_received = first.filter(|_| fresh);
                    return Some(Ok(bytes));
                }
                Ok(Step::Again) => continue,
                Ok(Step::End) => {
                    self.state = State::Done;
                    self.release();
                    return None;
                }
                Ok(Step::Read) => {}
                Err(error) => return self.fail(error),
            }
            let conn = self.conn.as_mut()?;
            match conn.fill().await {
                Ok(0) if self.state == State::UntilClose => {
                    self.state = State::Done;
                    self.conn = None;
                    return None;
                }
                Ok(0) => return self.fail(HttpError::Incomplete),
                Ok(_) => {
                    (self.received, self.read_late) = (conn.received, conn.read_late);
                    self.fresh_read = true;
                }
                Err(error) => return self.fail(HttpError::Io(error)),
            }
        }
    }

    /// One decoding step over what is buffered.
    fn decode(&mut self) -> Result<Step, HttpError> {
        // Only a finished or failed body has given its connection up.
        let Some(conn) = self.conn.as_mut() else {
            return Ok(Step::End);
        };
        let buf = &mut conn.buf;
        match self.state {
            State::Done | State::Failed => Ok(Step::End),
            State::Length(remaining) | State::ChunkData(remaining) => {
                if buf.is_empty() {
                    return Ok(Step::Read);
                }
                let take = remaining.min(buf.len() as u64);
                let data = buf.split_to(take as usize).freeze();
                let left = remaining - take;
                self.state = match (self.state, left) {
                    (State::Length(_), 0) => State::Done,
                    (State::Length(_), n) => State::Length(n),
                    (_, 0) => State::ChunkEnd,
                    (_, n) => State::ChunkData(n),
                };
                if self.state == State::Done {
                    self.release();
                }
                Ok(Step::Data(data))
            }
            State::UntilClose if buf.is_empty() => Ok(Step::Read),
            State::UntilClose => Ok(Step::Data(buf.split().freeze())),
            State::ChunkSize => {
                let Some(line) = take_line(buf)? else {
                    return Ok(Step::Read);
                };
                let size = chunk_size(&line)?;
                self.state = if size == 0 {
                    State::Trailers
                } else {
                    State::ChunkData(size)
                };
                Ok(Step::Again)
            }
            State::ChunkEnd => match take_line(buf)? {
                None => Ok(Step::Read),
                Some(line) if line.is_empty() => {
                    self.state = State::ChunkSize;
                    Ok(Step::Again)
                }
                Some(_) => Err(HttpError::Parse("chunk data longer than its size".into())),
            },
            State::Trailers => match take_line(buf)? {
                None => Ok(Step::Read),
                Some(line) if line.is_empty() => Ok(Step::End),
                Some(_) => Ok(Step::Again),
            },
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
        self.state == State::Done
    }

    /// Finishes the body so the connection can be reused, for bodies whose content no longer
    /// matters (e.g. whatever follows an SSE `[DONE]`): waits up to `inline` here (the end
    /// normally follows at once), then keeps draining in a background task for up to
    /// `background`; gives up (closing the connection) past `max_bytes`.
    pub async fn finish(mut self, max_bytes: usize, inline: Duration, background: Duration) {
        if self.conn.is_none() || !self.keep_alive {
            return;
        }
        if tokio::time::timeout(inline, self.drain(max_bytes))
            .await
            .is_err()
        {
            tokio::spawn(async move {
                let _ = tokio::time::timeout(background, self.drain(max_bytes)).await;
            });
        }
    }
}

/// When a piece of a body arrived. A read that drained a backlog spans two arrivals: the first
/// event the piece completes came with its first bytes (a server writes an event at once), the
/// rest by its last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrivals {
    /// When the piece's first bytes arrived, if known.
    pub first: Option<Instant>,
    /// When its last bytes arrived.
    pub last: Instant,
}

impl Arrivals {
    /// Bytes known to have arrived at `last` only.
    pub fn at(last: Instant) -> Self {
        Arrivals { first: None, last }
    }

    /// When the `index`-th event completed by the piece (0 = the first) arrived.
    pub fn event(&self, index: usize) -> Instant {
        self.first.filter(|_| index == 0).unwrap_or(self.last)
    }
}

/// What one decoding step found.
enum Step {
    Data(Bytes),
    /// State advanced; decode again.
    Again,
    /// More bytes are needed.
    Read,
    End,
}

/// A CRLF-terminated line at the start of `buf` (without its CRLF), removed from `buf`.
fn take_line(buf: &mut bytes::BytesMut) -> Result<Option<Bytes>, HttpError> {
    match memchr(b'\n', buf) {
        Some(end) => {
            let mut line = buf.split_to(end + 1).freeze();
            line.truncate(end.saturating_sub(usize::from(end > 0 && line[end - 1] == b'\r')));
            Ok(Some(line))
        }
        None if buf.len() > MAX_LINE => Err(HttpError::Parse("chunk line too long".into())),
        None => Ok(None),
    }
}

/// The size in a chunk-size line (`1a;ext=1`).
fn chunk_size(line: &[u8]) -> Result<u64, HttpError> {
    let digits = line.split(|&b| b == b';').next().unwrap_or(&[]);
    let text = std::str::from_utf8(digits).unwrap_or("").trim();
    if text.is_empty() || text.len() > 15 {
        return Err(HttpError::Parse(format!(
            "invalid chunk size `{}`",
            String::from_utf8_lossy(line)
        )));
    }
    u64::from_str_radix(text, 16).map_err(|_| {
        HttpError::Parse(format!(
            "invalid chunk size `{}`",
            String::from_utf8_lossy(line)
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_sizes_parse_with_extensions_and_refuse_garbage() {
        assert_eq!(chunk_size(b"1a").ok(), Some(26));
        assert_eq!(chunk_size(b"FF;name=value").ok(), Some(255));
        assert_eq!(chunk_size(b"0").ok(), Some(0));
        for bad in [&b""[..], b"zz", b"-1", b"1234567890abcdef0"] {
            assert!(chunk_size(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn lines_end_at_crlf_or_lf() {
        let mut buf = bytes::BytesMut::from(&b"5\r\nabc\nrest"[..]);
        assert_eq!(
            take_line(&mut buf).ok().flatten().as_deref(),
            Some(&b"5"[..])
        );
        assert_eq!(
            take_line(&mut buf).ok().flatten().as_deref(),
            Some(&b"abc"[..])
        );
        assert!(matches!(take_line(&mut buf), Ok(None)));
        assert_eq!(&buf[..], b"rest");
    }
}
