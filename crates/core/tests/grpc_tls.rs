//! KServe v2 over gRPC to an `https://` target: a tonic server written here behind TLS (a
//! self-signed certificate for 127.0.0.1, `fixtures/tls/`, trusted through
//! `TcpConnector::with_tls_config`) that accepts only ALPN `h2`, as gRPC servers do.
//! `ModelInfer` answers after 30 ms with the rows sent. Every request completes over one TLS
//! connection (the channel multiplexes), the server's count equals what was sent, and an
//! HTTP/1.1 connection of the same client still offers `http/1.1` (refused by this server).
#![cfg(feature = "tls")]
#![allow(clippy::unwrap_used)]

mod support;

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use goodput_core::backend::v2::TensorSource;
use goodput_core::backend::v2::grpc::proto::{InferTensor, ModelInferRequest, ModelInferResponse};
use goodput_core::backend::v2::grpc::{GrpcBackend, GrpcConfig, GrpcMethod};
use goodput_core::config::{LoadSpec, RunConfig, Warmup};
use goodput_core::http::{HttpClient, HttpConfig, Target, TcpConnector, TcpOptions};
use goodput_core::record::RequestRecord;
use goodput_core::runner::Runner;
use goodput_core::tokens::Tiktoken;
use goodput_core::workload::SyntheticWorkload;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::json;
use support::Collect;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_util::sync::CancellationToken;
use tonic::codegen::Service;
use tonic::server::{Grpc, NamedService};
use tonic::transport::server::Connected;
use tonic::{Request, Response, Status};
use tonic_prost::ProstCodec;

const CERT: &[u8] = include_bytes!("fixtures/tls/cert.pem");
const KEY: &[u8] = include_bytes!("fixtures/tls/key.pem");
const DELAY: Duration = Duration::from_millis(30);

/// What the server saw: TLS connections accepted, `ModelInfer` calls, rows.
#[derive(Default)]
struct Seen {
    connections: AtomicU64,
    calls: AtomicU64,
    rows: AtomicU64,
}

/// A TLS stream tonic can serve.
struct Tls(tokio_rustls::server::TlsStream<tokio::net::TcpStream>);

impl Connected for Tls {
    type ConnectInfo = ();
    fn connect_info(&self) {}
}

impl AsyncRead for Tls {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Tls {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

#[derive(Clone)]
struct Inference(Arc<Seen>);

impl NamedService for Inference {
    const NAME: &'static str = "inference.GRPCInferenceService";
}

type BoxFuture<T> = Pin<Box<dyn std::future::Future<Output = T> + Send>>;

impl Service<http::Request<tonic::body::Body>> for Inference {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let seen = Arc::clone(&self.0);
        Box::pin(async move {
            let path = request.uri().path().to_string();
            Ok(if path.ends_with("/ModelInfer") {
                let mut grpc =
                    Grpc::new(ProstCodec::<ModelInferResponse, ModelInferRequest>::default());
                grpc.unary(Unary(seen), request).await
            } else {
                Status::unimplemented(path).into_http()
            })
        })
    }
}

struct Unary(Arc<Seen>);

impl Service<Request<ModelInferRequest>> for Unary {
    type Response = Response<ModelInferResponse>;
    type Error = Status;
    type Future = BoxFuture<Result<Self::Response, Status>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<ModelInferRequest>) -> Self::Future {
        let seen = Arc::clone(&self.0);
        Box::pin(async move {
            let request = request.into_inner();
            let rows = request.inputs.first().map_or(0, |input| input.shape[0]);
            seen.calls.fetch_add(1, Ordering::SeqCst);
            seen.rows.fetch_add(rows as u64, Ordering::SeqCst);
            tokio::time::sleep(DELAY).await;
            let output = InferTensor {
                name: "out".into(),
                datatype: "FP32".into(),
                shape: vec![rows, 1],
                ..InferTensor::default()
            };
            Ok(Response::new(ModelInferResponse {
                model_name: request.model_name,
                id: request.id,
                outputs: vec![output],
                ..ModelInferResponse::default()
            }))
        })
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Serves gRPC over TLS (ALPN `h2` only) on a loopback port; the port.
async fn start(seen: Arc<Seen>) -> u16 {
    let certs = vec![CertificateDer::from_pem_slice(CERT).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(KEY).unwrap();
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    config.alpn_protocols = vec![b"h2".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let counted = Arc::clone(&seen);
    let incoming = futures_util::stream::unfold(listener, move |listener| {
        let (acceptor, counted) = (acceptor.clone(), Arc::clone(&counted));
        async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else {
                    continue;
                };
                // A refused handshake (no common ALPN) is the client's failure, not the end.
                if let Ok(tls) = acceptor.accept(tcp).await {
                    counted.connections.fetch_add(1, Ordering::SeqCst);
                    return Some((Ok::<_, std::io::Error>(Tls(tls)), listener));
                }
            }
        }
    });
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(Inference(seen))
            .serve_with_incoming(incoming),
    );
    port
}

/// A client of `url` trusting the test's certificate.
fn client(url: &str) -> HttpClient {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(CERT).unwrap())
        .unwrap();
    let mut config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let connector = TcpConnector::with_tls_config(TcpOptions::default(), Arc::new(config));
    HttpClient::new(
        Target::parse(url).unwrap(),
        Arc::new(connector),
        HttpConfig::default(),
    )
}

/// Eight requests at a concurrency of four through `backend`; the records.
async fn run(backend: Arc<GrpcBackend>) -> Vec<RequestRecord> {
    let run_config = RunConfig {
        load: LoadSpec::Closed { concurrency: 4 },
        max_requests: Some(8),
        warmup: Warmup::None,
        ..RunConfig::default()
    };
    let workload = Arc::new(SyntheticWorkload {
        input_tokens: 4,
        output_tokens: Some(1),
        seed: 1,
    });
    let counter = Arc::new(Tiktoken::cl100k());
    let runner = Runner::new(run_config, backend, workload, counter, false);
    let mut collect = Collect::default();
    runner
        .run(&mut [&mut collect], CancellationToken::new())
        .await;
    collect.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_to_an_https_target_offers_h2_and_multiplexes_one_connection() {
    let seen = Arc::new(Seen::default());
    let port = start(Arc::clone(&seen)).await;
    let url = format!("https://127.0.0.1:{port}");
    let client = client(&url);
    let body = json!({"inputs": [{"name": "x", "shape": [2, 1], "datatype": "FP32",
        "data": [1.0, 2.0]}]});
    let config = GrpcConfig {
        origin: format!("http://127.0.0.1:{port}"),
        model: "m".into(),
        source: TensorSource::File(vec![(body, 2)]),
        method: GrpcMethod::Unary,
        headers: Vec::new(),
        api_key: None,
        max_body_bytes: 1 << 20,
    };
    let backend = Arc::new(GrpcBackend::new(config, client.clone()).unwrap());
    let records = run(backend).await;
    assert_eq!(records.len(), 8);
    for record in &records {
        assert_eq!(record.failure, None, "{record:?}");
        assert_eq!(record.items, 2, "{record:?}");
        let e2e = record.e2e_from_send().unwrap();
        // 30 ms on the server; generous above for a loaded host.
        assert!(e2e >= DELAY && e2e < Duration::from_secs(5), "e2e {e2e:?}");
    }
    assert_eq!(seen.calls.load(Ordering::SeqCst), 8);
    assert_eq!(seen.rows.load(Ordering::SeqCst), 16);
    assert_eq!(
        seen.connections.load(Ordering::SeqCst),
        1,
        "one HTTP/2 connection"
    );
    // The same client's HTTP/1.1 connections still offer only `http/1.1`: this h2-only
    // server refuses them in the handshake.
    let error = client.connect_raw().await.err().unwrap();
    assert!(
        error
            .to_string()
            .contains("TLS handshake with `127.0.0.1` failed"),
        "{error}"
    );
}
