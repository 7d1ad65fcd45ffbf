//! KServe v2 over gRPC (`inference.GRPCInferenceService`, HTTP/2 with prior knowledge, on the
//! same port as HTTP/1.1: a connection opening with the HTTP/2 preface is served here).
//! `ModelInfer` is the HTTP route's inference (`infer.rs`): the request's tensors as the
//! JSON body `POST /v2/models/{model}/infer` takes, the same cost (a prefill per row, one
//! token) and the same refusals, as gRPC statuses. `ModelStreamInfer` is decoupled
//! generation, as Triton's TensorRT-LLM and vLLM backends stream: the request's first `BYTES`
//! input is a prompt (its `max_tokens` input or parameter the answer's length, else the
//! completions default), generated exactly as a streamed `/v1/completions` request, and
//! every streamed chunk is one response with a `text_output`, the last marked
//! `triton_final_response`. Also `ServerLive`, `ServerReady` and `ModelMetadata`. Any other
//! path is the HTTP API's (`routes.rs`), so HTTP/2 clients (h2c) are served too.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use goodput_protocol::v2_grpc::{
    FINAL_RESPONSE, InferParameter, InferTensor, InferTensorContents, ModelInferRequest,
    ModelInferResponse, ModelMetadataRequest, ModelMetadataResponse, ModelStreamInferResponse,
    ParameterChoice, ServerLiveRequest, ServerLiveResponse, ServerReadyRequest,
    ServerReadyResponse, TensorMetadata,
};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::server::conn::http2;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tonic::codec::Codec;
use tonic::codegen::tokio_stream::wrappers::UnboundedReceiverStream;
use tonic::server::Grpc;
use tonic::{Status, Streaming};
use tonic_prost::ProstCodec;

use super::ServerState;
use super::body::{ConnectionAbort, SimBody};
use super::completion_stream;
use super::encode::Route;

type GrpcBody = tonic::body::Body;
type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Serves one HTTP/2 connection: the v2 gRPC service, and every other path as the HTTP API
/// (`routes.rs`) for clients speaking HTTP/2.
pub(crate) async fn serve_h2<I>(state: Arc<ServerState>, io: I)
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |request| handle(Arc::clone(&state), request));
    let connection =
        http2::Builder::new(TokioExecutor::new()).serve_connection(TokioIo::new(io), service);
    // An error here means the client went away.
    let _ = connection.await;
}

async fn handle(
    state: Arc<ServerState>,
    request: Request<Incoming>,
) -> Result<Response<GrpcBody>, ConnectionAbort> {
    let path = request.uri().path().to_string();
    let Some(method) = path.strip_prefix("/inference.GRPCInferenceService/") else {
        // Not gRPC: the HTTP API over HTTP/2 (a client with h2c prior knowledge).
        let response = super::routes::handle(state, request).await?;
        return Ok(response.map(GrpcBody::new));
    };
    Ok(match method {
        "ServerLive" => {
            let answer = |_: ServerLiveRequest| async { Ok(ServerLiveResponse { live: true }) };
            unary(answer, request).await
        }
        "ServerReady" => {
            let answer = |_: ServerReadyRequest| async { Ok(ServerReadyResponse { ready: true }) };
            unary(answer, request).await
        }
        "ModelMetadata" => {
            let answer = move |asked: ModelMetadataRequest| {
                let answer = metadata(&state, &asked.name);
                async move { answer }
            };
            unary(answer, request).await
        }
        "ModelInfer" => {
            let answer = move |asked: ModelInferRequest| {
                let state = Arc::clone(&state);
                async move { infer(&state, asked).await }
            };
            unary(answer, request).await
        }
        "ModelStreamInfer" => {
            let codec = ProstCodec::<ModelStreamInferResponse, ModelInferRequest>::default();
            Grpc::new(codec).streaming(Streamed(state), request).await
        }
        _ => Status::unimplemented(format!("no method {path}")).into_http(),
    })
}

/// A unary method answered by `answer`.
async fn unary<F, Fut, M1, M2>(answer: F, request: Request<Incoming>) -> Response<GrpcBody>
where
    F: FnMut(M1) -> Fut + Send + 'static,
    Fut: Future<Output = Result<M2, Status>> + Send + 'static,
    M1: prost::Message + Default + Send + Sync + 'static,
    M2: prost::Message + Send + Sync + 'static,
    ProstCodec<M2, M1>: Codec<Encode = M2, Decode = M1>,
{
    Grpc::new(ProstCodec::<M2, M1>::default())
        .unary(Unary(answer), request)
        .await
}

struct Unary<F>(F);

impl<F, Fut, M1, M2> tonic::codegen::Service<tonic::Request<M1>> for Unary<F>
where
    F: FnMut(M1) -> Fut,
    Fut: Future<Output = Result<M2, Status>> + Send + 'static,
{
    type Response = tonic::Response<M2>;
    type Error = Status;
    type Future = BoxFuture<Result<tonic::Response<M2>, Status>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: tonic::Request<M1>) -> Self::Future {
        let answer = (self.0)(request.into_inner());
        Box::pin(async move { answer.await.map(tonic::Response::new) })
    }
}

fn metadata(state: &ServerState, name: &str) -> Result<ModelMetadataResponse, Status> {
    check_model(state, name)?;
    let tensor = |name: &str, datatype: &str, shape: Vec<i64>| TensorMetadata {
        name: name.into(),
        datatype: datatype.into(),
        shape,
    };
    Ok(ModelMetadataResponse {
        name: state.model_name.clone(),
        versions: vec!["1".into()],
        platform: "goodput-sim".into(),
        inputs: vec![tensor("input", "FP32", vec![-1, -1])],
        outputs: vec![tensor("output", "FP32", vec![-1, 16])],
    })
}

fn check_model(state: &ServerState, name: &str) -> Result<(), Status> {
    if name == state.model_name {
        return Ok(());
    }
    Err(Status::not_found(format!(
        "Model with name {name} does not exist."
    )))
}

/// `ModelInfer`: the HTTP route's answer to the same tensors.
async fn infer(
    state: &ServerState,
    request: ModelInferRequest,
) -> Result<ModelInferResponse, Status> {
    check_model(state, &request.model_name)?;
    let body = json_body(&request).to_string();
    let response = super::encode::answer(state, Route::V2, body.as_bytes()).await;
    let (status, value) = collected(response).await;
    if status != StatusCode::OK {
        return Err(http_status(status, &value));
    }
    let outputs = value
        .get("outputs")
        .and_then(Value::as_array)
        .map(|outputs| outputs.iter().map(output_tensor).collect())
        .unwrap_or_default();
    Ok(ModelInferResponse {
        model_name: request.model_name,
        id: request.id,
        outputs,
        ..ModelInferResponse::default()
    })
}

/// A response's status and JSON body.
async fn collected(response: Response<SimBody>) -> (StatusCode, Value) {
    let status = response.status();
    let bytes = match response.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => Bytes::new(),
    };
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

/// The gRPC status of an HTTP refusal, with its message.
fn http_status(status: StatusCode, body: &Value) -> Status {
    let message = completion_stream::error_message(body);
    let code = match status.as_u16() {
        400 | 413 => tonic::Code::InvalidArgument,
        404 => tonic::Code::NotFound,
        429 => tonic::Code::ResourceExhausted,
        503 => tonic::Code::Unavailable,
        _ => tonic::Code::Internal,
    };
    Status::new(code, message)
}

/// The JSON body of `/v2/models/{model}/infer` for the same tensors (raw contents become
/// their element count of zeros — the cost model reads only their shape — or, for `BYTES`,
/// their strings).
fn json_body(request: &ModelInferRequest) -> Value {
    let inputs: Vec<Value> = request
        .inputs
        .iter()
        .enumerate()
        .map(|(index, input)| {
            let raw = request.raw_input_contents.get(index);
            json!({
                "name": input.name,
                "shape": input.shape,
                "datatype": input.datatype,
                "data": elements(input, raw.map(Vec::as_slice)),
            })
        })
        .collect();
    json!({ "inputs": inputs })
}

fn elements(input: &InferTensor, raw: Option<&[u8]>) -> Vec<Value> {
    if let Some(raw) = raw {
        if input.datatype == "BYTES" {
            return strings(raw).into_iter().map(Value::String).collect();
        }
        let count: i64 = input.shape.iter().product();
        return vec![json!(0); usize::try_from(count).unwrap_or(0)];
    }
    let Some(c) = &input.contents else {
        return Vec::new();
    };
    let mut out: Vec<Value> = Vec::new();
    out.extend(c.bool_contents.iter().map(|v| json!(v)));
    out.extend(c.int_contents.iter().map(|v| json!(v)));
    out.extend(c.int64_contents.iter().map(|v| json!(v)));
    out.extend(c.uint_contents.iter().map(|v| json!(v)));
    out.extend(c.uint64_contents.iter().map(|v| json!(v)));
    out.extend(c.fp32_contents.iter().map(|v| json!(v)));
    out.extend(c.fp64_contents.iter().map(|v| json!(v)));
    out.extend(
        c.bytes_contents
            .iter()
            .map(|v| Value::String(String::from_utf8_lossy(v).into_owned())),
    );
    out
}

/// The strings of a raw `BYTES` tensor (each prefixed by its 4-byte little-endian length).
fn strings(mut raw: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    while let Some((length, rest)) = raw.split_first_chunk::<4>() {
        let length = (u32::from_le_bytes(*length) as usize).min(rest.len());
        let (element, rest) = rest.split_at(length);
        out.push(String::from_utf8_lossy(element).into_owned());
        raw = rest;
    }
    out
}

fn output_tensor(output: &Value) -> InferTensor {
    let data = output.get("data").and_then(Value::as_array);
    InferTensor {
        name: output["name"].as_str().unwrap_or("output").to_string(),
        datatype: output["datatype"].as_str().unwrap_or("FP32").to_string(),
        shape: output["shape"]
            .as_array()
            .map(|dims| dims.iter().filter_map(Value::as_i64).collect())
            .unwrap_or_default(),
        parameters: HashMap::new(),
        contents: Some(InferTensorContents {
            fp32_contents: data
                .map(|d| {
                    d.iter()
                        .filter_map(Value::as_f64)
                        .map(|v| v as f32)
                        .collect()
                })
                .unwrap_or_default(),
            ..InferTensorContents::default()
        }),
    }
}

/// `ModelStreamInfer`: every request of the call generated as a streamed completion.
struct Streamed(Arc<ServerState>);

type Sent = Result<ModelStreamInferResponse, Status>;
type Responses = UnboundedReceiverStream<Sent>;

impl tonic::codegen::Service<tonic::Request<Streaming<ModelInferRequest>>> for Streamed {
    type Response = tonic::Response<Responses>;
    type Error = Status;
    type Future = BoxFuture<Result<tonic::Response<Responses>, Status>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Status>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: tonic::Request<Streaming<ModelInferRequest>>) -> Self::Future {
        let state = Arc::clone(&self.0);
        let mut requests = request.into_inner();
        let (sender, receiver) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok(Some(request)) = requests.message().await {
                tokio::spawn(generate(Arc::clone(&state), request, sender.clone()));
            }
        });
        Box::pin(async move { Ok(tonic::Response::new(UnboundedReceiverStream::new(receiver))) })
    }
}

/// One request of a stream: its prompt generated as a streamed completion, each chunk a
/// response.
async fn generate(
    state: Arc<ServerState>,
    request: ModelInferRequest,
    sender: mpsc::UnboundedSender<Sent>,
) {
    let fail = |message: String| {
        let _ = sender.send(Ok(ModelStreamInferResponse {
            error_message: message,
            infer_response: None,
        }));
    };
    if let Err(status) = check_model(&state, &request.model_name) {
        return fail(status.message().to_string());
    }
    let body = completion_body(&state, &request);
    let (pieces, mut received) = mpsc::unbounded_channel();
    let generator = Arc::clone(&state);
    tokio::spawn(async move { completion_stream::stream(&generator, body, &pieces).await });
    while let Some(piece) = received.recv().await {
        let response = match piece {
            Ok((text, finished)) => text_response(&request, &text, finished),
            Err(message) => return fail(message),
        };
        if sender.send(Ok(response)).is_err() {
            return;
        }
    }
}

/// A streamed response carrying `text` as its `text_output`.
fn text_response(
    request: &ModelInferRequest,
    text: &str,
    finished: bool,
) -> ModelStreamInferResponse {
    let output = InferTensor {
        name: "text_output".into(),
        datatype: "BYTES".into(),
        shape: vec![1, 1],
        parameters: HashMap::new(),
        contents: Some(InferTensorContents {
            bytes_contents: vec![text.as_bytes().to_vec()],
            ..InferTensorContents::default()
        }),
    };
    let parameters = HashMap::from([(FINAL_RESPONSE.to_string(), InferParameter::bool(finished))]);
    ModelStreamInferResponse {
        error_message: String::new(),
        infer_response: Some(ModelInferResponse {
            model_name: request.model_name.clone(),
            id: request.id.clone(),
            parameters,
            outputs: vec![output],
            ..ModelInferResponse::default()
        }),
    }
}

/// The streamed completion of a request: its first `BYTES` input's strings as the prompt,
/// `max_tokens` from an input or parameter of that name.
fn completion_body(state: &ServerState, request: &ModelInferRequest) -> Bytes {
    let mut prompt = String::new();
    let mut max_tokens = None;
    for (index, input) in request.inputs.iter().enumerate() {
        let raw = request.raw_input_contents.get(index).map(Vec::as_slice);
        let values = elements(input, raw);
        if input.name == "max_tokens" {
            max_tokens = values.first().and_then(Value::as_u64);
        } else if input.datatype == "BYTES" && prompt.is_empty() {
            prompt = values
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(" ");
        }
    }
    if let Some(InferParameter {
        parameter_choice: Some(choice),
    }) = request.parameters.get("max_tokens")
    {
        max_tokens = match choice {
            ParameterChoice::Int64Param(n) => u64::try_from(*n).ok(),
            ParameterChoice::Uint64Param(n) => Some(*n),
            _ => max_tokens,
        };
    }
    let mut body = json!({"model": state.model_name, "prompt": prompt, "stream": true});
    if let Some(max_tokens) = max_tokens {
        body["max_tokens"] = json!(max_tokens);
        body["ignore_eos"] = json!(true);
    }
    Bytes::from(body.to_string())
}
