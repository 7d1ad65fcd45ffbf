//! The plain JSON exchange the non-OpenAI backends share (`--api http`, `--api v2`): POST a
//! JSON body, turn a non-2xx answer into an `http` failure with the server's message, and read
//! a whole body within a size limit.

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Uri};
use http_body_util::Full;
use serde_json::Value;

use super::Activity;
use super::openai::reply;
use crate::http::{HttpClient, ResponseBody, failure_from_http};
use crate::record::{Exchange, Failure, OutcomeKind};

/// POSTs `body` to `uri`; the 2xx response's body, or `None` once the failure (unsendable
/// body, transport, non-2xx with the server's message) is recorded in `exchange`.
pub(crate) async fn post_json(
    client: &HttpClient,
    uri: &Uri,
    headers: &HeaderMap,
    body: &Value,
    exchange: &mut Exchange,
    activity: &Activity,
) -> Option<ResponseBody> {
    let bytes = match serde_json::to_vec(body) {
        Ok(bytes) => bytes,
        Err(error) => {
            exchange.fail(Failure::new(OutcomeKind::Invalid, error.to_string()));
            return None;
        }
    };
    let mut request = Request::new(Full::new(Bytes::from(bytes)));
    *request.method_mut() = Method::POST;
    *request.uri_mut() = uri.clone();
    *request.headers_mut() = headers.clone();
    let response = match client.send(request, exchange).await {
        Ok(response) => response,
        Err(failure) => {
            exchange.fail(failure);
            return None;
        }
    };
    activity.bump();
    let (parts, body) = response.into_parts();
    if parts.status.is_success() {
        return Some(body);
    }
    if let Err(failure) = reply::read_error(parts.status, &parts.headers, body, activity).await {
        exchange.fail(failure);
    }
    None
}

/// The whole body, at most `limit` bytes: longer is a `protocol` failure, a connection lost
/// midway a failure saying how much had arrived.
pub(crate) async fn read_whole(
    body: &mut ResponseBody,
    limit: usize,
    activity: &Activity,
) -> Result<Vec<u8>, Failure> {
    match reply::read_limited(body, limit, activity).await {
        Ok((bytes, true)) => Ok(bytes),
        Ok((_, false)) => Err(Failure::new(
            OutcomeKind::Protocol,
            format!("response body exceeds {limit} bytes"),
        )),
        Err((bytes, error)) => {
            let cause = failure_from_http(&error, false);
            let message = format!(
                "connection closed after {} body bytes: {}",
                bytes.len(),
                cause.message
            );
            Err(Failure::new(cause.kind, message))
        }
    }
}
