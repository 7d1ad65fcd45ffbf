//! TCP with kernel receive timestamps (Linux `SO_TIMESTAMPNS`): every read also learns when
//! its bytes reached this host, so a chunk's time is when the server's bytes arrived, not when
//! a busy client got round to reading them. At a thousand streams on a few cores the two differ
//! by milliseconds at the tail — the client's own imprint on TTFT and ITL — and the difference
//! itself ([`Io::received_at`] against the read's own clock) is the client's receive lag.
//!
//! The kernel stamps the last segment a read consumed (so a read that drains a backlog gives
//! every byte of it that segment's time: never earlier than the truth) — and keeps only that:
//! a segment arriving behind unread bytes is merged into them, stamp and all, so even a peek
//! cannot tell when the backlog began. While [`Io::watch_arrivals`] is on, a watcher thread
//! ([`super::arrivals`]) peeks at each arrival as it happens, and a read learns its first bytes'
//! arrival from the oldest stamp it saw after the previous read. Stamps are wall-clock;
//! each is turned into the monotonic clock by how long ago it was at the moment of the read,
//! so a clock step between reads cannot skew it. Where the option cannot be set the connection
//! is plain TCP and chunk times are taken when read, as on other systems.

use std::io;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nix::sys::socket::{
    ControlMessageOwned, MsgFlags, recvmsg, setsockopt, sockopt::ReceiveTimestampns,
};
use nix::sys::time::TimeSpec;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::arrivals::Watch;
use super::connect::Io;

/// A stamp further in the past than this is not believed (a wall clock stepped back).
const MAX_LAG: Duration = Duration::from_secs(60);

/// A TCP stream whose reads carry the kernel's receive time.
#[derive(Debug)]
pub(super) struct StampedTcp {
    stream: TcpStream,
    /// Room for one `SCM_TIMESTAMPNS` control message (heap memory: suitably aligned).
    control: Vec<u8>,
    /// When the bytes of the last read arrived.
    received: Option<Instant>,
    /// The kernel's stamp of the last read.
    last_stamp: Option<TimeSpec>,
    /// The watcher's view of this socket, while arrivals are watched.
    watch: Option<Watch>,
    /// Stamps the watcher saw that no read has covered yet.
    seen: Vec<TimeSpec>,
    /// When the first bytes of the last read arrived, as the watcher saw.
    first_received: Option<Instant>,
}

impl StampedTcp {
    /// Turns receive timestamps on; gives the stream back if the socket refuses.
    pub(super) fn new(stream: TcpStream) -> Result<Self, TcpStream> {
        if setsockopt(&stream, ReceiveTimestampns, &true).is_err() {
            return Err(stream);
        }
        Ok(StampedTcp {
            stream,
            control: nix::cmsg_space!(TimeSpec),
            received: None,
            last_stamp: None,
            watch: None,
            seen: Vec::new(),
            first_received: None,
        })
    }

    /// Notes a read stamped `stamp`: its arrival, and the first arrival the watcher saw
    /// after the previous read's and no later than this one's.
    fn note(&mut self, stamp: Option<TimeSpec>) {
        let clocks = clocks();
        let at = |stamp: TimeSpec| monotonic(stamp, clocks?);
        self.received = stamp.and_then(at);
        self.first_received = None;
        if let Some(watch) = &self.watch {
            self.seen.extend(watch.take());
        }
        if let Some(stamp) = stamp {
            let previous = self.last_stamp;
            let first = self
                .seen
                .iter()
                .filter(|seen| previous.is_none_or(|p| **seen > p) && **seen <= stamp)
                .min();
            self.first_received = first.copied().and_then(at);
            self.seen.retain(|seen| *seen > stamp);
            self.last_stamp = Some(stamp);
        }
    }

    /// One non-blocking `recvmsg` into `buf`: the bytes read and the kernel's stamp.
    fn recv(&mut self, buf: &mut [u8]) -> io::Result<(usize, Option<TimeSpec>)> {
        let fd = self.stream.as_raw_fd();
        let control = &mut self.control;
        self.stream.try_io(Interest::READABLE, || {
            let mut iov = [io::IoSliceMut::new(buf)];
            let message = recvmsg::<()>(fd, &mut iov, Some(control), MsgFlags::empty())
                .map_err(io::Error::from)?;
            let stamp = message.cmsgs().ok().and_then(|mut cmsgs| {
                cmsgs.find_map(|cmsg| match cmsg {
                    ControlMessageOwned::ScmTimestampns(stamp) => Some(stamp),
                    _ => None,
                })
            });
            Ok((message.bytes, stamp))
        })
    }
}

/// The two clocks read together: monotonic and wall-clock (since the epoch).
fn clocks() -> Option<(Instant, Duration)> {
    Some((
        Instant::now(),
        SystemTime::now().duration_since(UNIX_EPOCH).ok()?,
    ))
}

/// The monotonic instant of a wall-clock kernel stamp, by its age at `(now, wall)`.
fn monotonic(stamp: TimeSpec, (now, wall): (Instant, Duration)) -> Option<Instant> {
    let at = Duration::new(
        u64::try_from(stamp.tv_sec()).ok()?,
        u32::try_from(stamp.tv_nsec()).ok()?,
    );
    let age = wall.saturating_sub(at);
    (age <= MAX_LAG).then(|| now.checked_sub(age)).flatten()
}

impl AsyncRead for StampedTcp {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            ready!(this.stream.poll_read_ready(cx))?;
            match this.recv(buf.initialize_unfilled()) {
                Ok((read, stamp)) => {
                    buf.advance(read);
                    this.note(stamp);
                    return Poll::Ready(Ok(()));
                }
                Err(error) if error.kind() == io::ErrorKind::WouldBlock => {}
                Err(error) => return Poll::Ready(Err(error)),
            }
        }
    }
}

impl AsyncWrite for StampedTcp {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// The watch ends while the socket is still open (fields drop after this, the stream first).
impl Drop for StampedTcp {
    fn drop(&mut self) {
        if let Some(watch) = self.watch.take() {
            watch.stop(&self.stream);
        }
    }
}

impl Io for StampedTcp {
    fn received_at(&self) -> Option<Instant> {
        self.received
    }

    fn watch_arrivals(&mut self, on: bool) {
        match (on, self.watch.take()) {
            (true, None) => self.watch = Watch::start(&self.stream),
            (true, Some(watch)) => self.watch = Some(watch),
            (false, Some(watch)) => {
                watch.stop(&self.stream);
                self.seen.clear();
            }
            (false, None) => {}
        }
    }

    fn first_received_at(&self) -> Option<Instant> {
        self.first_received
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// Bytes that sat unread for a while carry the time they arrived, not the time read.
    #[tokio::test]
    async fn a_late_read_carries_the_arrival_time() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (written, mut was_written) = tokio::sync::mpsc::unbounded_channel();
        // Answers `w` with `w` and `h` with `hello` (saying when it wrote it), until closed.
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut command = [0u8; 1];
            while socket.read(&mut command).await.unwrap_or(0) == 1 {
                let hello = command[0] == b'h';
                socket
                    .write_all(if hello { b"hello" } else { b"w" })
                    .await
                    .unwrap();
                if hello {
                    written.send(Instant::now()).unwrap();
                }
            }
        });
        let mut client = StampedTcp::new(TcpStream::connect(addr).await.unwrap()).unwrap();
        let mut buf = [0u8; 16];
        // The kernel turns stamping on a moment after the first socket asks (deferred work):
        // bytes that arrive before carry none. Wait until they do.
        for _ in 0..200 {
            client.write_all(b"w").await.unwrap();
            assert_eq!(client.read(&mut buf).await.unwrap(), 1);
            if client.received_at().is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        client.write_all(b"h").await.unwrap();
        let sent = was_written.recv().await.unwrap();
        tokio::time::sleep(Duration::from_millis(200)).await;
        let read = client.read(&mut buf).await.unwrap();
        let read_at = Instant::now();
        assert_eq!(&buf[..read], b"hello");
        let received = client.received_at().unwrap();
        drop(client);
        server.await.unwrap();
        // The bytes arrived before the server said it had written them (give or take the
        // moment between reading the two clocks) and at least 200 ms before they were read.
        assert!(
            received <= sent + Duration::from_millis(50),
            "{received:?} {sent:?}"
        );
        assert!(read_at.duration_since(received) >= Duration::from_millis(150));
    }

    #[test]
    fn stamps_from_the_future_or_long_ago_are_not_believed() {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
        let ago = |d: Duration| {
            let at = wall - d;
            TimeSpec::new(at.as_secs() as i64, i64::from(at.subsec_nanos()))
        };
        let now = || clocks().unwrap();
        let recent = monotonic(ago(Duration::from_millis(5)), now()).unwrap();
        let age = Instant::now().duration_since(recent);
        assert!(age >= Duration::from_millis(5) && age < Duration::from_secs(5));
        assert!(monotonic(ago(Duration::from_secs(600)), now()).is_none());
        let future = wall + Duration::from_secs(1);
        let future = TimeSpec::new(future.as_secs() as i64, 0);
        let at = monotonic(future, now()).unwrap();
        assert!(
            at <= Instant::now(),
            "a stamp ahead of the clock is now at the latest"
        );
    }
}
