//! [`Dial`]: the gRPC channel's connections opened through the run's [`HttpClient`]
//! connector, so gRPC rides whatever transport the run's HTTP does — TCP live, the
//! simulator's in-memory pipes in virtual time.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper_util::rt::TokioIo;
use tonic::codegen::Service;

use crate::http::{BoxIo, ConnectError, HttpClient};

/// A tower connector for `Endpoint::connect_with_connector_lazy`: every connection is a new
/// raw connection of `HttpClient` (the URI is the endpoint's own; the client knows its target),
/// TLS offering ALPN `h2` for an `https://` target.
#[derive(Debug, Clone)]
pub(super) struct Dial(pub(super) HttpClient);

impl Service<http::Uri> for Dial {
    type Response = TokioIo<BoxIo>;
    type Error = ConnectError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, ConnectError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: http::Uri) -> Self::Future {
        let client = self.0.clone();
        Box::pin(async move { client.connect_raw_h2().await.map(TokioIo::new) })
    }
}
