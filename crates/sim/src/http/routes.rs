//! Routing and responses: maps method and path to a handler, reads request bodies (64 MiB
//! limit), runs a generation request from parsing to delivery, and builds every response —
//! JSON, OpenAI error objects, server-sent events, Prometheus text.

use std::sync::Arc;

use bytes::Bytes;
use goodput_protocol::ApiErrorBody;
use goodput_protocol::models::{ModelCard, ModelList};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::header::{
    ALLOW, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, HeaderName, HeaderValue, RETRY_AFTER,
    SERVER,
};
use hyper::{Method, Request, Response, StatusCode};
use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;

use super::ServerState;
use super::answer::{Answer, to_json};
use super::body::{ConnectionAbort, SimBody};
use super::channels::AnswerChannels;
use super::encode::Route;
use super::faults::{Fault, PendingFault};
use super::request::{Dialect, InvalidRequest, Plan, PromptContext, parse_chat, parse_completion};
use super::stream::{Exchange, collect_answer, start_stream};
use crate::driver::{SimClock, SubmitError};
use crate::engine::Rejection;
use crate::text::derive_seed;

/// Largest request body accepted.
pub(crate) const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;
/// The `server` header of every response.
const SERVER_NAME: &str = concat!("goodput-sim/", env!("CARGO_PKG_VERSION"));
/// The request-id header (echoed when the client sends one).
const X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");
/// The replica of a fleet that took the request (`goodput sim --replicas N`, disaggregated
/// pools): its index, the prefill replicas first — for the client's `--replica-header`.
pub const REPLICA_HEADER: HeaderName = HeaderName::from_static("x-sim-replica");
/// Bodies up to this size are parsed and tokenized inline; larger ones on the blocking pool.
const INLINE_PARSE_BYTES: usize = 32 * 1024;
/// Purpose tag of the per-request generator (faults, then end-of-sequence draws).
pub(super) const REQUEST_RNG: u64 = 0x0fa0_17ed;

/// The paths the server knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Endpoint {
    ChatCompletions,
    Completions,
    Messages,
    Models,
    Health,
    Metrics,
    Tokenize,
    Embeddings,
    Rerank,
}

impl Endpoint {
    fn from_path(path: &str) -> Option<Endpoint> {
        match path {
            "/v1/chat/completions" => Some(Endpoint::ChatCompletions),
            "/v1/completions" => Some(Endpoint::Completions),
            "/v1/messages" => Some(Endpoint::Messages),
            "/v1/models" => Some(Endpoint::Models),
            "/health" => Some(Endpoint::Health),
            "/metrics" => Some(Endpoint::Metrics),
            "/tokenize" => Some(Endpoint::Tokenize),
            "/v1/embeddings" => Some(Endpoint::Embeddings),
            "/v1/rerank" | "/rerank" => Some(Endpoint::Rerank),
            _ => None,
        }
    }

    fn method(self) -> Method {
        match self {
            Endpoint::ChatCompletions
            | Endpoint::Completions
            | Endpoint::Messages
            | Endpoint::Tokenize
            | Endpoint::Embeddings
            | Endpoint::Rerank => Method::POST,
            Endpoint::Models | Endpoint::Health | Endpoint::Metrics => Method::GET,
        }
    }

    /// The `Allow` header of the endpoint.
    fn allow(self) -> HeaderValue {
        match self {
            Endpoint::ChatCompletions
            | Endpoint::Completions
            | Endpoint::Messages
            | Endpoint::Tokenize
            | Endpoint::Embeddings
            | Endpoint::Rerank => HeaderValue::from_static("POST"),
            Endpoint::Models | Endpoint::Health | Endpoint::Metrics => {
                HeaderValue::from_static("GET")
            }
        }
    }
}

/// The service: every response carries the `server` header; `Err` closes the connection.
pub(crate) async fn handle(
    state: Arc<ServerState>,
    request: Request<Incoming>,
) -> Result<Response<SimBody>, ConnectionAbort> {
    if request.uri().path() == "/v1/realtime" {
        return Ok(super::realtime::route(state, request));
    }
    if request.uri().path() == "/v1/images/generations" {
        let mut response = match read_body_of(request, Method::POST).await {
            Ok(body) => super::images::answer(state, &body).await,
            Err(response) => response,
        };
        response
            .headers_mut()
            .insert(SERVER, HeaderValue::from_static(SERVER_NAME));
        return Ok(response);
    }
    let mut response = match super::audio::AudioRoute::of(request.uri().path()) {
        Some(audio) => super::audio::route(state, request, audio).await,
        None => route(&state, request).await?,
    };
    response
        .headers_mut()
        .insert(SERVER, HeaderValue::from_static(SERVER_NAME));
    Ok(response)
}

async fn route(
    state: &ServerState,
    request: Request<Incoming>,
) -> Result<Response<SimBody>, ConnectionAbort> {
    if request.uri().path().starts_with("/v2/") {
        return Ok(super::infer::route(state, request).await);
    }
    let Some(endpoint) = Endpoint::from_path(request.uri().path()) else {
        let message = format!("no route for {} {}", request.method(), request.uri().path());
        return Ok(error_response(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            &message,
            None,
        ));
    };
    if request.method() != endpoint.method() {
        let message = format!(
            "{} {} is not allowed; use {}",
            request.method(),
            request.uri().path(),
            endpoint.method()
        );
        let mut response = error_response(
            StatusCode::METHOD_NOT_ALLOWED,
            "invalid_request_error",
            &message,
            None,
        );
        response.headers_mut().insert(ALLOW, endpoint.allow());
        return Ok(response);
    }
    match endpoint {
        Endpoint::ChatCompletions => generate(state, request, Dialect::Chat).await,
        Endpoint::Completions => generate(state, request, Dialect::Completions).await,
        Endpoint::Messages => generate(state, request, Dialect::Messages).await,
        Endpoint::Models => Ok(models(state)),
        Endpoint::Health => Ok(Response::new(SimBody::empty())),
        Endpoint::Metrics => Ok(metrics(state)),
        Endpoint::Tokenize => Ok(tokenize(state, request).await),
        Endpoint::Embeddings => Ok(encode(state, request, Route::Embeddings).await),
        Endpoint::Rerank => Ok(encode(state, request, Route::Rerank).await),
    }
}

/// `POST /v1/embeddings` and `POST /v1/rerank` (see `encode.rs`).
async fn encode(
    state: &ServerState,
    request: Request<Incoming>,
    route: Route,
) -> Response<SimBody> {
    match read_body(request).await {
        Ok(body) => super::encode::answer(state, route, &body).await,
        Err(response) => response,
    }
}

/// A chat or text completion, from body to response.
async fn generate(
    state: &ServerState,
    request: Request<Incoming>,
    dialect: Dialect,
) -> Result<Response<SimBody>, ConnectionAbort> {
    let client_request_id = request.headers().get(X_REQUEST_ID).cloned();
    let body = match read_body(request).await {
        Ok(body) => body,
        Err(response) => return Ok(response),
    };
    generate_body(state, body, dialect, client_request_id).await
}

/// A chat or text completion from its body (`client_request_id`: the request's
/// `x-request-id`, echoed).
pub(super) async fn generate_body(
    state: &ServerState,
    body: Bytes,
    dialect: Dialect,
    client_request_id: Option<HeaderValue>,
) -> Result<Response<SimBody>, ConnectionAbort> {
    let plan = match parse(body, dialect, state.prompt_context).await {
        Ok(plan) => plan,
        Err(invalid) => {
            state.driver.record_rejection("invalid_request");
            let status = StatusCode::BAD_REQUEST;
            return Ok(error_response(
                status,
                "invalid_request_error",
                &invalid.message,
                invalid.param,
            ));
        }
    };
    let number = state.next_request_number();
    let header = state.answer_header(dialect, number);
    let request_id = client_request_id.or_else(|| HeaderValue::from_str(&header.id).ok());
    let channels =
        AnswerChannels::for_request(&state.config.agent, &plan, state.config.seed, number);
    let answer = Answer::new(header, &plan, channels);
    let mut response = respond(state, &plan, answer, number).await?;
    if let Some(request_id) = request_id {
        response.headers_mut().insert(X_REQUEST_ID, request_id);
    }
    Ok(response)
}

/// Parses and tokenizes a request body; large bodies are tokenized on the blocking pool so a
/// long prompt does not hold up the other connections (or a client sharing the runtime).
async fn parse(
    body: Bytes,
    dialect: Dialect,
    context: PromptContext,
) -> Result<Plan, InvalidRequest> {
    let small = body.len() <= INLINE_PARSE_BYTES;
    let work = move || match dialect {
        Dialect::Chat => parse_chat(&body, &context),
        Dialect::Completions => parse_completion(&body, &context),
        Dialect::Messages => super::messages::parse(&body, &context),
    };
    if small {
        return work();
    }
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|error| {
            Err(InvalidRequest::new(
                format!("the request could not be processed: {error}"),
                None,
            ))
        })
}

/// Draws the request's fault, submits it to the engine and delivers the answer.
async fn respond(
    state: &ServerState,
    plan: &Plan,
    answer: Answer,
    number: u64,
) -> Result<Response<SimBody>, ConnectionAbort> {
    let config = &state.config;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(derive_seed(config.seed, number, REQUEST_RNG));
    let fault = Fault::draw(&config.faults, &mut rng);
    if let Some(refusal) = fault.and_then(|fault| injected_refusal(state, fault)) {
        return Ok(refusal);
    }
    if fault == Some(Fault::StallBeforeResponse) {
        return stall_before_response(state).await;
    }
    let requests = plan.engine_requests(&mut rng, config.natural_output_tokens_mean);
    let expected_tokens: u64 = requests.iter().map(|r| u64::from(r.output_tokens())).sum();
    let events = match state.driver.submit(requests).await {
        Ok(events) => events,
        Err(error) => return Ok(submit_error_response(&error, state.driver.clock())),
    };
    let replica = events.replica().map(HeaderValue::from);
    let exchange = Exchange {
        answer,
        events,
        fault: fault.map(|fault| PendingFault::halfway(fault, expected_tokens)),
        stall: stall_duration(state),
        oversized_line_bytes: config.faults.oversized_line_bytes,
        keep_alive: state
            .driver
            .clock()
            .to_real(std::time::Duration::from_millis(
                config.faults.keep_alive_ms,
            )),
    };
    let mut response = if plan.stream {
        sse_response(start_stream(exchange))
    } else {
        collect_answer(exchange).await?
    };
    if let Some(replica) = replica {
        response.headers_mut().insert(REPLICA_HEADER, replica);
    }
    Ok(response)
}

/// How long an injected stall lasts in real time (`None`: forever).
fn stall_duration(state: &ServerState) -> Option<std::time::Duration> {
    state.config.faults.stall_ms.map(|ms| {
        state
            .driver
            .clock()
            .to_real(std::time::Duration::from_millis(ms))
    })
}

/// Sends nothing for the stall (forever when unbounded), then cuts the connection.
async fn stall_before_response(state: &ServerState) -> Result<Response<SimBody>, ConnectionAbort> {
    state
        .driver
        .record_rejection(Fault::StallBeforeResponse.rejection_reason());
    match stall_duration(state) {
        Some(duration) => tokio::time::sleep(duration).await,
        None => std::future::pending::<()>().await,
    }
    Err(ConnectionAbort)
}

/// The response of an injected HTTP 500, 429 or 400 (other faults strike mid-answer).
pub(super) fn injected_refusal(state: &ServerState, fault: Fault) -> Option<Response<SimBody>> {
    let response = match fault {
        Fault::Http500 => {
            let message = "injected fault: internal server error";
            error_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                message,
                None,
            )
        }
        Fault::Http429 => {
            let message = "injected fault: too many requests";
            let mut response = error_response(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                message,
                None,
            );
            let seconds = HeaderValue::from(state.config.faults.retry_after_secs);
            response.headers_mut().insert(RETRY_AFTER, seconds);
            response
        }
        Fault::Http400 => error_response(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "injected fault: bad request",
            None,
        ),
        _ => return None,
    };
    state.driver.record_rejection(fault.rejection_reason());
    Some(response)
}

/// 429 for a full queue (with `Retry-After` in whole real seconds, at least 1), 400 for a
/// request the engine cannot serve, 503 when the engine is gone.
pub(super) fn submit_error_response(error: &SubmitError, clock: SimClock) -> Response<SimBody> {
    let message = error.to_string();
    match error {
        SubmitError::Rejected(Rejection::QueueFull { retry_after, .. }) => {
            let mut response = error_response(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                &message,
                None,
            );
            let seconds = clock.to_real(*retry_after).as_secs_f64().ceil().max(1.0) as u64;
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(seconds));
            response
        }
        SubmitError::Rejected(Rejection::TooLong(_) | Rejection::Invalid(_)) => error_response(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            &message,
            None,
        ),
        SubmitError::Stopped => error_response(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            &message,
            None,
        ),
    }
}

/// [`read_body`] of a request that must be a `method` (else a 405 naming it).
async fn read_body_of(
    request: Request<Incoming>,
    method: Method,
) -> Result<Bytes, Response<SimBody>> {
    if request.method() != method {
        let message = format!(
            "{} {} is not allowed; use {method}",
            request.method(),
            request.uri().path()
        );
        let status = StatusCode::METHOD_NOT_ALLOWED;
        let mut response = error_response(status, "invalid_request_error", &message, None);
        if let Ok(allow) = HeaderValue::from_str(method.as_str()) {
            response.headers_mut().insert(ALLOW, allow);
        }
        return Err(response);
    }
    read_body(request).await
}

/// The whole request body, or the error response to send instead (413 beyond the limit).
pub(super) async fn read_body(request: Request<Incoming>) -> Result<Bytes, Response<SimBody>> {
    let too_large = || {
        let message = format!("the request body exceeds {MAX_BODY_BYTES} bytes");
        error_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            &message,
            None,
        )
    };
    let declared = request
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|length| length > MAX_BODY_BYTES as u64) {
        return Err(too_large());
    }
    match Limited::new(request.into_body(), MAX_BODY_BYTES)
        .collect()
        .await
    {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.downcast_ref::<LengthLimitError>().is_some() => Err(too_large()),
        Err(error) => {
            let message = format!("cannot read the request body: {error}");
            Err(error_response(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                &message,
                None,
            ))
        }
    }
}

/// `POST /tokenize` (see `tokenize.rs`).
async fn tokenize(state: &ServerState, request: Request<Incoming>) -> Response<SimBody> {
    let body = match read_body(request).await {
        Ok(body) => body,
        Err(response) => return response,
    };
    match super::tokenize::tokenize(&body, &state.prompt_context) {
        Ok(answer) => json_response(StatusCode::OK, to_json(&answer)),
        Err(message) => error_response(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            &message,
            None,
        ),
    }
}

fn models(state: &ServerState) -> Response<SimBody> {
    let card = ModelCard {
        id: state.model_name.clone(),
        object: "model".to_string(),
        created: state.started_unix,
        owned_by: "goodput-sim".to_string(),
        max_model_len: Some(u64::from(state.prompt_context.max_model_len)),
    };
    let list = ModelList {
        object: "list".to_string(),
        data: vec![card],
    };
    json_response(StatusCode::OK, to_json(&list))
}

fn metrics(state: &ServerState) -> Response<SimBody> {
    let mut response = Response::new(SimBody::full(state.driver.render_metrics()));
    let content_type = HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8");
    response.headers_mut().insert(CONTENT_TYPE, content_type);
    response
}

/// A JSON response.
pub(crate) fn json_response(status: StatusCode, body: Vec<u8>) -> Response<SimBody> {
    let mut response = Response::new(SimBody::full(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// An OpenAI error object with the status as its code.
pub(crate) fn error_response(
    status: StatusCode,
    kind: &str,
    message: &str,
    param: Option<&str>,
) -> Response<SimBody> {
    json_response(
        status,
        to_json(&ApiErrorBody::new(kind, message, param, status.as_u16())),
    )
}

/// A server-sent event stream.
fn sse_response(body: SimBody) -> Response<SimBody> {
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}
