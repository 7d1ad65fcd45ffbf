//! A streamed `/v1/completions` generation read chunk by chunk inside the simulator (the same
//! engine, cost and timing as over HTTP): what gRPC's `ModelStreamInfer` (`grpc.rs`) and the
//! realtime WebSocket sessions (`realtime.rs`) answer with.

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::StatusCode;
use serde_json::Value;
use tokio::sync::mpsc;

use super::ServerState;
use super::request::Dialect;

/// One streamed chunk: its text and whether it ended the answer; or the error that ended it.
pub(super) type Piece = Result<(String, bool), String>;

/// Generates the completion `body` (a streamed `/v1/completions` request), sending each chunk
/// as it is generated; returns when the answer ended, failed, or the receiver went away.
pub(super) async fn stream(
    state: &ServerState,
    body: Bytes,
    sender: &mpsc::UnboundedSender<Piece>,
) {
    let fail = |message: String| {
        let _ = sender.send(Err(message));
    };
    let generated = super::routes::generate_body(state, body, Dialect::Completions, None).await;
    let Ok(response) = generated else {
        return fail("the simulator cut the connection (an injected fault)".into());
    };
    if response.status() != StatusCode::OK {
        let status = response.status();
        let bytes = response.into_body().collect().await.map(|c| c.to_bytes());
        let value = bytes.ok().and_then(|b| serde_json::from_slice(&b).ok());
        let message = value
            .as_ref()
            .map_or_else(|| format!("HTTP {status}"), error_message);
        return fail(message);
    }
    let mut body = response.into_body();
    let mut pending = Vec::new();
    while let Some(frame) = body.frame().await {
        let Ok(frame) = frame else {
            return fail("the simulator's stream broke off".into());
        };
        let Some(data) = frame.data_ref() else {
            continue;
        };
        pending.extend_from_slice(data);
        while let Some(end) = pending.windows(2).position(|pair| pair == b"\n\n") {
            let event: Vec<u8> = pending.drain(..end + 2).collect();
            if let Some(piece) = piece(&event)
                && sender.send(piece).is_err()
            {
                return;
            }
        }
    }
}

/// The message of an error body (`{"error": "…"}` or `{"error": {"message": "…"}}`).
pub(super) fn error_message(body: &Value) -> String {
    match body.get("error") {
        Some(Value::String(text)) => text.clone(),
        Some(error) => error
            .get("message")
            .and_then(Value::as_str)
            .map_or_else(|| error.to_string(), str::to_string),
        None => body.to_string(),
    }
}

/// The piece of one server-sent event: `None` for events without a choice (usage, `[DONE]`).
fn piece(event: &[u8]) -> Option<Piece> {
    let text = std::str::from_utf8(event).ok()?;
    let data = text.lines().find_map(|line| line.strip_prefix("data: "))?;
    let value: Value = serde_json::from_str(data).ok()?;
    if value.get("error").is_some() {
        return Some(Err(error_message(&value)));
    }
    let choice = value.get("choices")?.as_array()?.first()?;
    let finished = choice
        .get("finish_reason")
        .is_some_and(|reason| !reason.is_null());
    let text = choice.get("text").and_then(Value::as_str).unwrap_or("");
    Some(Ok((text.to_string(), finished)))
}
