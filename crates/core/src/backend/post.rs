//! The JSON exchange the backends share: the request headers (JSON, bearer key, the user's
//! own); and, for the non-OpenAI ones (`--api http`, `--api v2`), a POST whose non-2xx answer
//! becomes an `http` failure with the server's message, and a whole body read within a limit.

use bytes::Bytes;
use http::header::{AUTHORIZATION, CONTENT_TYPE, HeaderName, HeaderValue};
use http::{HeaderMap, Method, Request, Uri};
use http_body_util::Full;
use serde_json::Value;

use super::openai::reply;
use super::{Activity, RequestSpec};
use crate::http::sigv4::SigV4;
use crate::http::{HttpClient, ResponseBody, WatchArrivals, closed_mid_body};
use crate::record::{Exchange, Failure, OutcomeKind};

/// Whether a header carries a credential (never shown, never echoed).
pub(crate) fn is_secret(name: &HeaderName) -> bool {
    crate::record::SECRET_HEADERS.contains(&name.as_str())
}

/// `content-type: application/json`, `authorization: Bearer KEY` when a key is given, then the
/// user's `extra` headers (credentials among them marked sensitive); `None` when the key cannot
/// be a header value.
pub(crate) fn json_headers(
    api_key: Option<&str>,
    extra: &[(HeaderName, HeaderValue)],
) -> Option<HeaderMap> {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(key) = api_key.filter(|key| !key.is_empty()) {
        let mut value = HeaderValue::from_str(&format!("Bearer {key}")).ok()?;
        value.set_sensitive(true);
        headers.insert(AUTHORIZATION, value);
    }
    for (name, value) in extra {
        let mut value = value.clone();
        if is_secret(name) {
            value.set_sensitive(true);
        }
        headers.insert(name.clone(), value);
    }
    Some(headers)
}

/// Adds `spec`'s correlation id header, if it has one (an id that cannot be a header value is
/// an `invalid` request, never sent without it).
pub(crate) fn insert_request_id(
    headers: &mut HeaderMap,
    spec: &RequestSpec,
) -> Result<(), Failure> {
    let Some(id) = &spec.tags.request_id else {
        return Ok(());
    };
    let value = HeaderValue::from_str(&id.value).map_err(|_| {
        Failure::new(
            OutcomeKind::Invalid,
            format!("request id {:?} cannot be a header value", id.value),
        )
    })?;
    headers.insert(id.header.clone(), value);
    Ok(())
}

/// Notes the server's own id (the response header named as the request id's) and the replica
/// that served it (the header a fleet names), when present.
pub(crate) fn note_server_id(headers: &HeaderMap, spec: &RequestSpec, exchange: &mut Exchange) {
    if let Some(value) = spec
        .tags
        .replica_header
        .as_ref()
        .and_then(|name| headers.get(name))
    {
        exchange.served_by = Some(String::from_utf8_lossy(value.as_bytes()).into_owned());
    }
    let Some(id) = &spec.tags.request_id else {
        return;
    };
    if let Some(value) = headers.get(&id.header) {
        exchange.server_request_id = Some(String::from_utf8_lossy(value.as_bytes()).into_owned());
    }
}

/// POSTs `body` to `uri`, signed by `signer` if given (`streamed`: the reply streams, so its
/// first arrivals are watched: see [`WatchArrivals`]); the 2xx response's body, or `None` once the failure (unsendable
/// body, transport, non-2xx with the server's message) is recorded in `exchange`.
pub(crate) async fn post_json(
    client: &HttpClient,
    (uri, headers, spec): (&Uri, &HeaderMap, &RequestSpec),
    body: &Value,
    streamed: bool,
    signer: Option<&SigV4>,
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
    post_bytes(
        client,
        (uri, headers, spec),
        bytes,
        streamed,
        signer,
        exchange,
        activity,
    )
    .await
}

/// [`post_json`] of a body already encoded (a multipart form, say: `headers` carry its
/// content type).
pub(crate) async fn post_bytes(
    client: &HttpClient,
    (uri, headers, spec): (&Uri, &HeaderMap, &RequestSpec),
    bytes: Vec<u8>,
    streamed: bool,
    signer: Option<&SigV4>,
    exchange: &mut Exchange,
    activity: &Activity,
) -> Option<ResponseBody> {
    let mut headers = headers.clone();
    if let Err(failure) = insert_request_id(&mut headers, spec) {
        exchange.fail(failure);
        return None;
    }
    if let Some(signer) = signer {
        let now = std::time::SystemTime::now();
        let target = (&Method::POST, client.target().authority(), uri);
        if let Err(error) = signer.sign(target, &mut headers, &bytes, now) {
            exchange.fail(Failure::new(OutcomeKind::Invalid, error.to_string()));
            return None;
        }
    }
    let mut request = Request::new(Full::new(Bytes::from(bytes)));
    *request.method_mut() = Method::POST;
    *request.uri_mut() = uri.clone();
    *request.headers_mut() = headers;
    if streamed {
        request.extensions_mut().insert(WatchArrivals);
    }
    let response = match client.send(request, exchange).await {
        Ok(response) => response,
        Err(failure) => {
            exchange.fail(failure);
            return None;
        }
    };
    activity.bump();
    let (parts, body) = response.into_parts();
    note_server_id(&parts.headers, spec, exchange);
    if parts.status.is_success() {
        return Some(body);
    }
    if let Err(failure) = reply::read_error(parts.status, &parts.headers, body, activity).await {
        exchange.fail(failure);
    }
    None
}

/// The whole body, at most `limit` bytes: longer is a `protocol` failure, a connection lost
/// midway a failure saying how much had arrived. Notes in `exchange` how long its bytes waited
/// unread (`read_late`); when they arrived is `body.received_at()`.
pub(crate) async fn read_whole(
    body: &mut ResponseBody,
    limit: usize,
    activity: &Activity,
    exchange: &mut Exchange,
) -> Result<Vec<u8>, Failure> {
    let read = reply::read_limited(body, limit, activity).await;
    exchange.read_late = body.read_late();
    match read {
        Ok((bytes, true)) => Ok(bytes),
        Ok((_, false)) => Err(Failure::new(
            OutcomeKind::Protocol,
            format!("response body exceeds {limit} bytes (see max_body_bytes)"),
        )),
        Err((bytes, error)) => Err(closed_mid_body(
            &error,
            &format!("after {} body bytes", bytes.len()),
        )),
    }
}
