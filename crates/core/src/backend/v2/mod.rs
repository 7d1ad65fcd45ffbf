//! [`V2Backend`]: the KServe v2 / Open Inference Protocol (`--api v2`; Triton, KServe, Seldon
//! MLServer): `POST {root}/v2/models/{model}/infer` with `{"inputs": [{"name", "shape",
//! "datatype", "data"}]}`, tensors generated to a shape or read from a workload file (see
//! [`tensor`]). The items of a request are the batch rows the server returned — the first
//! dimension of its first output — which must equal the rows sent: a mismatch, or an answer
//! without outputs, fails the request as `protocol` with the server's words; a refusal (a
//! 400 `{"error": …}` for a shape the model rejects) is an `http_4xx` failure with its message.
//! Numeric tensors and file requests are not text: their records carry no input tokens
//! ([`Backend::text_input`]); generated `BYTES` tensors keep their prompts' token counts.

pub mod grpc;
pub mod tensor;

use std::fmt;

use http::header::{HeaderName, HeaderValue};
use http::uri::PathAndQuery;
use http::{HeaderMap, Uri};
use serde_json::Value;
use tokio::time::Instant;

pub use self::tensor::{
    DataType, NO_INPUT_TOKENS, TensorError, TensorSource, TensorSpec, parse_shape,
};
use super::openai::reply::error_text;
use super::post;
use super::{Activity, Backend, BoxFuture, RequestSpec};
use crate::http::HttpClient;
use crate::record::{Exchange, Failure, OutcomeKind};

/// A configuration that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum V2Error {
    /// The model name cannot be part of a URL path.
    #[error("the model name {0:?} cannot be sent in /v2/models/{{model}}/infer")]
    Model(String),
    /// The API key cannot be a header.
    #[error("the API key contains characters not allowed in an HTTP header")]
    InvalidApiKey,
}

/// How to talk to a v2 server.
#[derive(Clone)]
pub struct V2Config {
    /// The model (`/v2/models/{model}/infer`).
    pub model: String,
    /// Where each request's tensors come from.
    pub source: TensorSource,
    /// Extra request headers.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// API key, sent as a bearer token.
    pub api_key: Option<String>,
    /// Longest reply body accepted.
    pub max_body_bytes: usize,
}

impl fmt::Debug for V2Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("V2Config")
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .finish_non_exhaustive()
    }
}

/// The path of the infer endpoint below a target whose path is `root` (a trailing `/v1`, as
/// the embedded simulator's URL has, is dropped: v2 lives beside it).
pub fn infer_path(root: &str, model: &str) -> String {
    let root = root.trim_end_matches('/');
    let root = root.strip_suffix("/v1").unwrap_or(root);
    format!("{root}/v2/models/{model}/infer")
}

/// The KServe v2 backend.
#[derive(Debug)]
pub struct V2Backend {
    config: V2Config,
    client: HttpClient,
    uri: Uri,
    headers: HeaderMap,
}

impl V2Backend {
    /// A backend POSTing to `{target}/v2/models/{model}/infer`.
    pub fn new(config: V2Config, client: HttpClient) -> Result<Self, V2Error> {
        let valid = !config.model.is_empty()
            && config
                .model
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.~".contains(c));
        if !valid {
            return Err(V2Error::Model(config.model));
        }
        let exact = client.target().exact();
        let mut path = infer_path(exact.path(), &config.model);
        if let Some(query) = exact.query() {
            path = format!("{path}?{query}");
        }
        let uri = PathAndQuery::try_from(path)
            .map(Uri::from)
            .map_err(|_| V2Error::Model(config.model.clone()))?;
        let headers = post::json_headers(config.api_key.as_deref(), &config.headers)
            .ok_or(V2Error::InvalidApiKey)?;
        Ok(V2Backend {
            config,
            client,
            uri,
            headers,
        })
    }

    async fn run(&self, spec: &RequestSpec, exchange: &mut Exchange, activity: &Activity) {
        let (body, rows) = self.config.source.body(spec);
        let Some(mut body) = post::post_json(
            &self.client,
            (&self.uri, &self.headers, spec),
            &body,
            false,
            None,
            exchange,
            activity,
        )
        .await
        else {
            return;
        };
        let limit = self.config.max_body_bytes;
        let bytes = match post::read_whole(&mut body, limit, activity, exchange).await {
            Ok(bytes) => bytes,
            Err(failure) => return exchange.fail(failure),
        };
        if let Err(failure) = record(&bytes, body.received_at(), rows, exchange) {
            exchange.fail(failure);
        }
    }
}

fn protocol(message: impl Into<String>) -> Failure {
    Failure::new(OutcomeKind::Protocol, message)
}

/// Records a whole v2 answer that arrived at `now` for a request of `sent` rows: the items
/// are the rows of its first output, which must be `sent`.
pub fn record(
    bytes: &[u8],
    now: Instant,
    sent: u64,
    exchange: &mut Exchange,
) -> Result<(), Failure> {
    let value: Value = serde_json::from_slice(bytes)
        .map_err(|error| protocol(format!("invalid JSON response body: {error}")))?;
    if value.get("error").is_some_and(|error| !error.is_null()) {
        return Err(Failure::new(
            OutcomeKind::StreamError,
            format!("server error: {}", error_text(&value)),
        ));
    }
    let start = || {
        String::from_utf8_lossy(bytes)
            .chars()
            .take(120)
            .collect::<String>()
    };
    let Some(first) = value
        .get("outputs")
        .and_then(Value::as_array)
        .and_then(|outputs| outputs.first())
    else {
        return Err(protocol(format!(
            "the response has no `outputs` (body starts: {:?})",
            start()
        )));
    };
    let rows = first
        .get("shape")
        .and_then(Value::as_array)
        .and_then(|shape| shape.first())
        .and_then(Value::as_u64)
        .ok_or_else(|| {
            protocol(format!(
                "the first output has no shape (body starts: {:?})",
                start()
            ))
        })?;
    if rows != sent {
        return Err(protocol(format!(
            "the server returned {rows} rows for {sent} sent (output shape {})",
            first
                .get("shape")
                .map_or_else(String::new, Value::to_string)
        )));
    }
    exchange.choices = u32::try_from(rows).unwrap_or(u32::MAX);
    exchange.untokenized = true;
    exchange.push_output(now, "", Some(0));
    Ok(())
}

impl Backend for V2Backend {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn recorded(body: &str, sent: u64) -> Result<Exchange, Failure> {
        let mut exchange = Exchange::default();
        record(body.as_bytes(), Instant::now(), sent, &mut exchange)?;
        Ok(exchange)
    }

    #[test]
    fn rows_of_the_first_output_are_the_items() {
        let body = r#"{"model_name":"m","outputs":[{"name":"p","shape":[4,2],"datatype":"FP32","data":[0,0,0,0,0,0,0,0]}]}"#;
        assert_eq!(recorded(body, 4).unwrap().choices, 4);
        let short = recorded(body, 8).unwrap_err();
        assert_eq!(short.kind, OutcomeKind::Protocol);
        assert!(short.message.contains("4 rows for 8 sent"), "{short:?}");
        let error = recorded(r#"{"error":"bad shape"}"#, 1).unwrap_err();
        assert!(error.message.contains("bad shape"), "{error:?}");
        let none = recorded(r#"{"outputs":[]}"#, 1).unwrap_err();
        assert!(none.message.contains("no `outputs`"), "{none:?}");
    }

    #[test]
    fn infer_paths() {
        assert_eq!(infer_path("/", "m"), "/v2/models/m/infer");
        assert_eq!(infer_path("/v1", "m"), "/v2/models/m/infer");
        assert_eq!(infer_path("/kserve/", "m"), "/kserve/v2/models/m/infer");
    }
}
