//! Which protocol a connection speaks, from its first bytes: HTTP/2 (gRPC) opens with the
//! connection preface `PRI * HTTP/2.0…`, anything else is HTTP/1.1. The bytes read to tell are
//! replayed to the server that serves it ([`Prefixed`]), so any transport works — a TCP socket
//! or the in-memory pipes of virtual time — and a first read shorter than the test is waited
//! out rather than taken for HTTP/1.1.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

/// The bytes that tell HTTP/2 from HTTP/1.1 (no HTTP/1.1 method starts with them).
const PREFACE: &[u8] = b"PRI";

/// A transport whose first bytes, already read, are read again first.
#[derive(Debug)]
pub(super) struct Prefixed<I> {
    prefix: Vec<u8>,
    read: usize,
    inner: I,
}

/// Reads the first bytes of `io` (as many as [`PREFACE`], fewer only if it ends first):
/// whether it opens an HTTP/2 connection, and `io` with those bytes replayed.
pub(super) async fn sniff<I: AsyncRead + Unpin>(mut io: I) -> io::Result<(bool, Prefixed<I>)> {
    let mut head = [0u8; PREFACE.len()];
    let mut got = 0;
    while got < head.len() {
        let n = io.read(&mut head[got..]).await?;
        if n == 0 {
            break;
        }
        got += n;
    }
    let prefix = head[..got].to_vec();
    let h2 = prefix == PREFACE;
    Ok((
        h2,
        Prefixed {
            prefix,
            read: 0,
            inner: io,
        },
    ))
}

impl<I: AsyncRead + Unpin> AsyncRead for Prefixed<I> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if this.read < this.prefix.len() {
            let rest = &this.prefix[this.read..];
            let n = rest.len().min(buf.remaining());
            buf.put_slice(&rest[..n]);
            this.read += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Prefixed<I> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[tokio::test]
    async fn the_preface_is_told_from_http1_even_split_and_every_byte_is_replayed() {
        for (sent, h2) in [
            (&b"PRI * HTTP/2.0\r\n"[..], true),
            (&b"POST /v1 HTTP/1.1\r\n"[..], false),
            (&b"PR"[..], false),
        ] {
            let (mut near, far) = tokio::io::duplex(64);
            // Written in two pieces: the first read may see one byte only.
            near.write_all(&sent[..1]).await.unwrap();
            let writer = tokio::spawn(async move {
                tokio::task::yield_now().await;
                near.write_all(&sent[1..]).await.unwrap();
                near.shutdown().await.unwrap();
            });
            let (told, mut io) = sniff(far).await.unwrap();
            assert_eq!(told, h2, "{sent:?}");
            let mut all = Vec::new();
            io.read_to_end(&mut all).await.unwrap();
            assert_eq!(all, sent);
            writer.await.unwrap();
        }
    }
}
