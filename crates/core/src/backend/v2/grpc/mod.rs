//! [`GrpcBackend`]: KServe v2 / Triton over gRPC (`--api v2 --grpc unary|stream`):
//! `inference.GRPCInferenceService/ModelInfer` (one response, items = its batch rows, as over
//! HTTP) or `ModelStreamInfer` (decoupled streaming, as Triton's TensorRT-LLM and vLLM
//! backends stream tokens: every response with outputs is one output token, timed as it
//! arrives; the stream ends at a response marked `triton_final_response` or when the server
//! closes it). The tensors are the same as `--api v2`'s ([`super::TensorSource`]), converted
//! by [`convert`]. A gRPC status is a failure with the server's message, of the kind of the
//! HTTP status the gRPC spec maps it to ([`http_status`]); an `error_message` in the stream
//! is a `stream_error`. A streamed request carries its output length (`--output-tokens`) as
//! the request parameter `max_tokens`.

pub mod convert;
mod dial;

pub use goodput_protocol::v2_grpc as proto;

use std::fmt;
use std::time::Duration;

use http::uri::PathAndQuery;
use http::{HeaderMap, HeaderValue};
use tokio::time::Instant;
use tonic::client::Grpc;
use tonic::metadata::MetadataMap;
use tonic::transport::{Channel, Endpoint};
use tonic::{Code, Status, Streaming};
use tonic_prost::ProstCodec;

use self::proto::{InferTensor, ModelInferRequest, ModelInferResponse, ModelStreamInferResponse};
use super::{TensorSource, V2Error};
use crate::backend::{Activity, Backend, BoxFuture, RequestSpec};
use crate::http::HttpClient;
use crate::record::{Exchange, Failure, OutcomeKind};

/// Which method requests call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrpcMethod {
    /// `ModelInfer`: one response per request.
    Unary,
    /// `ModelStreamInfer`: decoupled, several responses per request, each a token.
    Stream,
}

/// How to talk to a v2 gRPC server.
#[derive(Clone)]
pub struct GrpcConfig {
    /// `http://host:port` of the server's gRPC port.
    pub origin: String,
    /// The model.
    pub model: String,
    /// Where each request's tensors come from.
    pub source: TensorSource,
    /// The method.
    pub method: GrpcMethod,
    /// Extra request metadata (headers).
    pub headers: Vec<(http::HeaderName, HeaderValue)>,
    /// API key, sent as `authorization: Bearer`.
    pub api_key: Option<String>,
    /// Longest response message accepted.
    pub max_body_bytes: usize,
}

impl fmt::Debug for GrpcConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GrpcConfig")
            .field("origin", &self.origin)
            .field("model", &self.model)
            .field("method", &self.method)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .finish_non_exhaustive()
    }
}

/// The KServe v2 gRPC backend: one HTTP/2 connection (a lazily connected channel), a stream
/// per request.
#[derive(Debug)]
pub struct GrpcBackend {
    config: GrpcConfig,
    channel: Channel,
    metadata: HeaderMap,
}

impl GrpcBackend {
    /// A backend of `config` whose connection `client`'s connector opens (TCP live, in-memory
    /// pipes in virtual time); connects at the first request (call inside a Tokio runtime).
    pub fn new(config: GrpcConfig, client: HttpClient) -> Result<Self, V2Error> {
        let endpoint = Endpoint::from_shared(config.origin.clone())
            .map_err(|_| V2Error::Model(config.origin.clone()))?
            .connect_timeout(Duration::from_secs(10));
        let mut metadata = HeaderMap::new();
        for (name, value) in &config.headers {
            metadata.append(name.clone(), value.clone());
        }
        if let Some(key) = &config.api_key {
            let value = HeaderValue::try_from(format!("Bearer {key}"))
                .map_err(|_| V2Error::InvalidApiKey)?;
            metadata.insert(http::header::AUTHORIZATION, value);
        }
        Ok(GrpcBackend {
            channel: endpoint.connect_with_connector_lazy(dial::Dial(client)),
            config,
            metadata,
        })
    }

    fn request(&self, spec: &RequestSpec) -> Result<(ModelInferRequest, u64), Failure> {
        let (body, rows) = self.config.source.body(spec);
        let id = spec.tags.request_id.as_ref().map_or_else(
            || spec.index.to_string(),
            |request_id| request_id.value.clone(),
        );
        let mut request = convert::infer_request(&body, &self.config.model, id)
            .map_err(|error| Failure::new(OutcomeKind::Invalid, error))?;
        // A streamed (generating) request asks for its output length as a `max_tokens`
        // parameter.
        if let (GrpcMethod::Stream, Some(tokens)) = (self.config.method, spec.max_output_tokens) {
            let choice =
                proto::ParameterChoice::Int64Param(i64::try_from(tokens).unwrap_or(i64::MAX));
            let parameter = proto::InferParameter {
                parameter_choice: Some(choice),
            };
            request.parameters.insert("max_tokens".into(), parameter);
        }
        Ok((request, rows))
    }

    async fn run(&self, spec: &RequestSpec, exchange: &mut Exchange, activity: &Activity) {
        let (message, rows) = match self.request(spec) {
            Ok(built) => built,
            Err(failure) => return exchange.fail(failure),
        };
        let mut metadata = self.metadata.clone();
        if let Some(id) = &spec.tags.request_id
            && let Ok(value) = HeaderValue::try_from(id.value.as_str())
        {
            metadata.insert(id.header.clone(), value);
        }
        let mut request = tonic::Request::new(message);
        *request.metadata_mut() = MetadataMap::from_headers(metadata);
        let mut grpc =
            Grpc::new(self.channel.clone()).max_decoding_message_size(self.config.max_body_bytes);
        if let Err(error) = grpc.ready().await {
            return exchange.fail(Failure::new(
                OutcomeKind::Transport,
                format!("gRPC connection: {error}"),
            ));
        }
        exchange.sent_at = Some(Instant::now());
        let outcome = match self.config.method {
            GrpcMethod::Unary => {
                let path = PathAndQuery::from_static("/inference.GRPCInferenceService/ModelInfer");
                let codec = ProstCodec::<ModelInferRequest, ModelInferResponse>::default();
                match grpc.server_streaming(request, path, codec).await {
                    Ok(response) => unary(response.into_inner(), rows, exchange, activity).await,
                    Err(status) => Err(status_failure(&status, exchange)),
                }
            }
            GrpcMethod::Stream => {
                let path =
                    PathAndQuery::from_static("/inference.GRPCInferenceService/ModelStreamInfer");
                let codec = ProstCodec::<ModelInferRequest, ModelStreamInferResponse>::default();
                let request = request.map(tokio_stream_once);
                match grpc.streaming(request, path, codec).await {
                    Ok(response) => stream(response.into_inner(), rows, exchange, activity).await,
                    Err(status) => Err(status_failure(&status, exchange)),
                }
            }
        };
        if let Err(failure) = outcome {
            exchange.fail(failure);
        }
    }
}

/// A stream of one message (the request), which then half-closes.
fn tokio_stream_once<T: Send + 'static>(
    message: T,
) -> impl futures_util::Stream<Item = T> + Send + 'static {
    futures_util::stream::iter(std::iter::once(message))
}

/// The response headers arrived: the request was answered.
fn answered(exchange: &mut Exchange, activity: &Activity) {
    activity.bump();
    exchange.response_at.get_or_insert_with(Instant::now);
    exchange.status = Some(200);
}

async fn unary(
    mut body: Streaming<ModelInferResponse>,
    sent: u64,
    exchange: &mut Exchange,
    activity: &Activity,
) -> Result<(), Failure> {
    answered(exchange, activity);
    let response = body
        .message()
        .await
        .map_err(|status| status_failure(&status, exchange))?
        .ok_or_else(|| protocol("the server closed the call without a response"))?;
    let now = Instant::now();
    activity.bump();
    let received = first_rows(&response.outputs)?;
    if received != sent {
        return Err(protocol(format!(
            "the server returned {received} rows for {sent} sent (output shape {:?})",
            response.outputs.first().map(|o| &o.shape)
        )));
    }
    exchange.choices = u32::try_from(received).unwrap_or(u32::MAX);
    exchange.untokenized = true;
    exchange.push_output(now, "", Some(0));
    // The call's status (its trailers) must say OK.
    while body
        .message()
        .await
        .map_err(|status| status_failure(&status, exchange))?
        .is_some()
    {}
    Ok(())
}

async fn stream(
    mut body: Streaming<ModelStreamInferResponse>,
    sent: u64,
    exchange: &mut Exchange,
    activity: &Activity,
) -> Result<(), Failure> {
    answered(exchange, activity);
    exchange.untokenized = true;
    exchange.choices = u32::try_from(sent).unwrap_or(u32::MAX);
    let mut tokens = 0u64;
    loop {
        let message = body
            .message()
            .await
            .map_err(|status| status_failure(&status, exchange))?;
        let now = Instant::now();
        let Some(message) = message else {
            break;
        };
        activity.bump();
        if !message.error_message.is_empty() {
            return Err(Failure::new(
                OutcomeKind::StreamError,
                format!("server error: {}", message.error_message),
            ));
        }
        let Some(response) = message.infer_response else {
            return Err(protocol(
                "a stream response with neither error nor response",
            ));
        };
        if !response.outputs.is_empty() {
            tokens += 1;
            let text = text_output(&response);
            exchange.push_output(now, &text, Some(tokens));
        }
        if response.is_final() {
            break;
        }
    }
    if tokens == 0 {
        return Err(protocol(
            "the stream ended without a response carrying outputs",
        ));
    }
    exchange.finish_reason = Some("final".into());
    Ok(())
}

/// The text of a streamed response: its first `BYTES` output's elements (TensorRT-LLM's and
/// vLLM's `text_output`), else nothing.
fn text_output(response: &ModelInferResponse) -> String {
    let Some((index, output)) = response
        .outputs
        .iter()
        .enumerate()
        .find(|(_, output)| output.datatype == "BYTES")
    else {
        return String::new();
    };
    if let Some(contents) = &output.contents
        && !contents.bytes_contents.is_empty()
    {
        return contents
            .bytes_contents
            .iter()
            .map(|b| String::from_utf8_lossy(b))
            .collect();
    }
    // Raw: 4-byte little-endian lengths, each followed by its bytes.
    let mut text = String::new();
    let mut raw = response
        .raw_output_contents
        .get(index)
        .map_or(&[][..], Vec::as_slice);
    while let Some((length, rest)) = raw.split_first_chunk::<4>() {
        let length = u32::from_le_bytes(*length) as usize;
        let (element, rest) = rest.split_at(length.min(rest.len()));
        text.push_str(&String::from_utf8_lossy(element));
        raw = rest;
    }
    text
}

fn first_rows(outputs: &[InferTensor]) -> Result<u64, Failure> {
    let first = outputs
        .first()
        .ok_or_else(|| protocol("the response has no outputs"))?;
    first
        .shape
        .first()
        .and_then(|&rows| u64::try_from(rows).ok())
        .ok_or_else(|| protocol(format!("the first output {:?} has no shape", first.name)))
}

fn protocol(message: impl Into<String>) -> Failure {
    Failure::new(OutcomeKind::Protocol, message)
}

/// The HTTP status the gRPC spec maps a gRPC code to (`doc/http-grpc-status-mapping.md`,
/// read the other way), so a status error falls in the `http_4xx`/`http_5xx` breakdowns.
pub fn http_status(code: Code) -> u16 {
    match code {
        Code::Ok => 200,
        Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => 400,
        Code::Unauthenticated => 401,
        Code::PermissionDenied => 403,
        Code::NotFound => 404,
        Code::AlreadyExists | Code::Aborted => 409,
        Code::ResourceExhausted => 429,
        Code::Cancelled => 499,
        Code::Unimplemented => 501,
        Code::Unavailable => 503,
        Code::DeadlineExceeded => 504,
        Code::Unknown | Code::Internal | Code::DataLoss => 500,
    }
}

/// A gRPC status as a failure: a connection that could not be made or was lost is
/// `transport`; any other status the server sent is `http` with its mapped status and the
/// server's message.
fn status_failure(status: &Status, exchange: &mut Exchange) -> Failure {
    let source = std::error::Error::source(status).map(ToString::to_string);
    let transport = status.code() == Code::Unavailable && exchange.response_at.is_none();
    let message = format!("gRPC status {:?}: {}", status.code(), status.message());
    if transport || source.is_some() && exchange.response_at.is_none() {
        let detail = source.map_or(message.clone(), |s| format!("{message} ({s})"));
        return Failure::new(OutcomeKind::Transport, detail);
    }
    exchange.status = Some(http_status(status.code()));
    Failure::new(OutcomeKind::Http, message)
}

impl Backend for GrpcBackend {
    fn send<'a>(
        &'a self,
        request: &'a RequestSpec,
        exchange: &'a mut Exchange,
        activity: &'a Activity,
    ) -> BoxFuture<'a, ()> {
        Box::pin(self.run(request, exchange, activity))
    }

    fn text_input(&self) -> bool {
        self.config.source.carries_text()
    }
}
