//! A minimal KServe v2 gRPC server for the tests, written here from `grpc_service.proto`
//! (its own message structs, not goodput's): `ModelInfer` answers after a fixed delay with an
//! output of the rows sent; `ModelStreamInfer` answers each request with `responses`
//! responses `gap` apart (the first after `first`), the last marked `triton_final_response`.
//! A model named `missing` is refused with NOT_FOUND; a model named `broken` gets an
//! `error_message` in the stream. Every call is counted.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::Stream;
use tonic::codegen::Service;
use tonic::server::{Grpc, NamedService};
use tonic::{Request, Response, Status, Streaming};
use tonic_prost::ProstCodec;

#[derive(Clone, PartialEq, prost::Message)]
pub struct Param {
    #[prost(bool, tag = "1")]
    pub bool_param: bool,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Contents {
    #[prost(int64, repeated, tag = "3")]
    pub int64_contents: Vec<i64>,
    #[prost(float, repeated, tag = "6")]
    pub fp32_contents: Vec<f32>,
    #[prost(bytes = "vec", repeated, tag = "8")]
    pub bytes_contents: Vec<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct Tensor {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub datatype: String,
    #[prost(int64, repeated, tag = "3")]
    pub shape: Vec<i64>,
    #[prost(map = "string, message", tag = "4")]
    pub parameters: HashMap<String, Param>,
    #[prost(message, optional, tag = "5")]
    pub contents: Option<Contents>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct InferRequest {
    #[prost(string, tag = "1")]
    pub model_name: String,
    #[prost(string, tag = "3")]
    pub id: String,
    #[prost(message, repeated, tag = "5")]
    pub inputs: Vec<Tensor>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct InferResponse {
    #[prost(string, tag = "1")]
    pub model_name: String,
    #[prost(string, tag = "3")]
    pub id: String,
    #[prost(map = "string, message", tag = "4")]
    pub parameters: HashMap<String, Param>,
    #[prost(message, repeated, tag = "5")]
    pub outputs: Vec<Tensor>,
}

#[derive(Clone, PartialEq, prost::Message)]
pub struct StreamResponse {
    #[prost(string, tag = "1")]
    pub error_message: String,
    #[prost(message, optional, tag = "2")]
    pub infer_response: Option<InferResponse>,
}

/// The server's timing and what it saw.
#[derive(Debug, Default)]
pub struct Script {
    /// ModelInfer's delay.
    pub delay: Duration,
    /// ModelStreamInfer: the first response's delay, the gap between responses, their number.
    pub first: Duration,
    pub gap: Duration,
    pub responses: u32,
    /// Calls received: ModelInfer, ModelStreamInfer requests, rows received in all.
    pub unary: AtomicU64,
    pub streamed: AtomicU64,
    pub rows: AtomicU64,
}

#[derive(Clone)]
struct Inference(Arc<Script>);

impl NamedService for Inference {
    const NAME: &'static str = "inference.GRPCInferenceService";
}

type BoxBody = tonic::body::Body;
type BoxFuture<T> = Pin<Box<dyn std::future::Future<Output = T> + Send>>;

impl Service<http::Request<BoxBody>> for Inference {
    type Response = http::Response<BoxBody>;
    type Error = Infallible;
    type Future = BoxFuture<Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<BoxBody>) -> Self::Future {
        let script = Arc::clone(&self.0);
        Box::pin(async move {
            let path = request.uri().path().to_string();
            Ok(match path.rsplit('/').next().unwrap_or("") {
                "ModelInfer" => {
                    let mut grpc = Grpc::new(ProstCodec::<InferResponse, InferRequest>::default());
                    grpc.unary(Unary(script), request).await
                }
                "ModelStreamInfer" => {
                    let mut grpc = Grpc::new(ProstCodec::<StreamResponse, InferRequest>::default());
                    grpc.streaming(Streamed(script), request).await
                }
                _ => Status::unimplemented(path).into_http(),
            })
        })
    }
}

fn rows(request: &InferRequest) -> i64 {
    request.inputs[0].shape[0]
}

fn output(rows: i64, text: &str) -> Tensor {
    Tensor {
        name: "text_output".into(),
        datatype: "BYTES".into(),
        shape: vec![rows, 1],
        parameters: HashMap::new(),
        contents: Some(Contents {
            bytes_contents: vec![text.as_bytes().to_vec(); rows as usize],
            ..Contents::default()
        }),
    }
}

struct Unary(Arc<Script>);

impl Service<Request<InferRequest>> for Unary {
    type Response = Response<InferResponse>;
    type Error = Status;
    type Future = BoxFuture<Result<Self::Response, Status>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<InferRequest>) -> Self::Future {
        let script = Arc::clone(&self.0);
        Box::pin(async move {
            let request = request.into_inner();
            script.unary.fetch_add(1, Ordering::SeqCst);
            if request.model_name == "missing" {
                return Err(Status::not_found("model 'missing' is not found"));
            }
            let rows = rows(&request);
            script.rows.fetch_add(rows as u64, Ordering::SeqCst);
            tokio::time::sleep(script.delay).await;
            Ok(Response::new(InferResponse {
                model_name: request.model_name,
                id: request.id,
                outputs: vec![output(rows, "x")],
                ..InferResponse::default()
            }))
        })
    }
}

struct Streamed(Arc<Script>);

type Responses = Pin<Box<dyn Stream<Item = Result<StreamResponse, Status>> + Send>>;

impl Service<Request<Streaming<InferRequest>>> for Streamed {
    type Response = Response<Responses>;
    type Error = Status;
    type Future = BoxFuture<Result<Self::Response, Status>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Streaming<InferRequest>>) -> Self::Future {
        let script = Arc::clone(&self.0);
        Box::pin(async move {
            let mut requests = request.into_inner();
            let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
            tokio::spawn(async move {
                while let Ok(Some(request)) = requests.message().await {
                    script.streamed.fetch_add(1, Ordering::SeqCst);
                    script
                        .rows
                        .fetch_add(rows(&request) as u64, Ordering::SeqCst);
                    let script = Arc::clone(&script);
                    let sender = sender.clone();
                    tokio::spawn(answer(script, request, sender));
                }
            });
            let stream = futures_util::stream::unfold(receiver, |mut receiver| async move {
                receiver.recv().await.map(|item| (item, receiver))
            });
            Ok(Response::new(Box::pin(stream) as Responses))
        })
    }
}

/// One request's responses, at exact offsets from its arrival.
async fn answer(
    script: Arc<Script>,
    request: InferRequest,
    sender: tokio::sync::mpsc::UnboundedSender<Result<StreamResponse, Status>>,
) {
    let start = tokio::time::Instant::now();
    if request.model_name == "broken" {
        let _ = sender.send(Ok(StreamResponse {
            error_message: "the engine ran out of KV blocks".into(),
            infer_response: None,
        }));
        return;
    }
    for k in 0..script.responses {
        tokio::time::sleep_until(start + script.first + script.gap * k).await;
        let last = k + 1 == script.responses;
        let response = InferResponse {
            model_name: request.model_name.clone(),
            id: request.id.clone(),
            parameters: HashMap::from([(
                "triton_final_response".into(),
                Param { bool_param: last },
            )]),
            outputs: vec![output(1, &format!("t{k} "))],
        };
        let message = StreamResponse {
            error_message: String::new(),
            infer_response: Some(response),
        };
        if sender.send(Ok(message)).is_err() {
            return;
        }
    }
}

/// Serves `script` on a loopback port (its own thread and runtime); the port.
pub fn start(script: Arc<Script>) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let incoming = futures_util::stream::unfold(listener, |listener| async move {
                let accepted = listener.accept().await.map(|(stream, _)| stream);
                Some((accepted, listener))
            });
            tonic::transport::Server::builder()
                .add_service(Inference(script))
                .serve_with_incoming(incoming)
                .await
                .unwrap();
        });
    });
    port
}
