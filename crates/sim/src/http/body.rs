//! Response bodies: a whole buffer (with its exact length) or a stream of frames fed through a
//! channel by a producer task, which can also abort the body mid-way (the client then sees an
//! incomplete chunked response).

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::sync::mpsc;

/// Why a streamed body ended early.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BodyError {
    /// Fault injection asked for the connection to be cut.
    #[error("response aborted by fault injection")]
    Aborted,
}

/// The service's error: makes hyper close the connection without (more of) a response.
#[derive(Debug, thiserror::Error)]
#[error("connection closed by fault injection")]
pub(crate) struct ConnectionAbort;

/// The client has gone away (the body was dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClientGone;

/// Every response body the server sends.
#[derive(Debug)]
pub(crate) struct SimBody(BodyKind);

#[derive(Debug)]
enum BodyKind {
    Full(Option<Bytes>),
    Stream(mpsc::Receiver<Result<Bytes, BodyError>>),
}

impl SimBody {
    /// A body of exactly `bytes`.
    pub(crate) fn full(bytes: impl Into<Bytes>) -> Self {
        let bytes: Bytes = bytes.into();
        SimBody(BodyKind::Full((!bytes.is_empty()).then_some(bytes)))
    }

    /// An empty body.
    pub(crate) fn empty() -> Self {
        SimBody(BodyKind::Full(None))
    }

    /// A streamed body and the sink that feeds it; at most `capacity` frames wait unsent.
    pub(crate) fn channel(capacity: usize) -> (SimBody, FrameSink) {
        let (sender, receiver) = mpsc::channel(capacity.max(1));
        (SimBody(BodyKind::Stream(receiver)), FrameSink { sender })
    }
}

impl Body for SimBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match &mut self.get_mut().0 {
            BodyKind::Full(bytes) => Poll::Ready(bytes.take().map(|bytes| Ok(Frame::data(bytes)))),
            BodyKind::Stream(receiver) => receiver
                .poll_recv(cx)
                .map(|item| item.map(|result| result.map(Frame::data))),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.0, BodyKind::Full(None))
    }

    fn size_hint(&self) -> SizeHint {
        match &self.0 {
            BodyKind::Full(bytes) => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64))
            }
            BodyKind::Stream(_) => SizeHint::default(),
        }
    }
}

/// Feeds a streamed [`SimBody`].
#[derive(Debug)]
pub(crate) struct FrameSink {
    sender: mpsc::Sender<Result<Bytes, BodyError>>,
}

impl FrameSink {
    /// Queues `bytes` for the client (waits while the client is slow).
    pub(crate) async fn send(&self, bytes: impl Into<Bytes>) -> Result<(), ClientGone> {
        self.sender
            .send(Ok(bytes.into()))
            .await
            .map_err(|_| ClientGone)
    }

    /// Ends the body with an error: hyper cuts the connection.
    pub(crate) async fn abort(&self) {
        let _ = self.sender.send(Err(BodyError::Aborted)).await;
    }

    /// Resolves once the client has gone away (hyper dropped the body).
    pub(crate) async fn closed(&self) {
        self.sender.closed().await;
    }
}
