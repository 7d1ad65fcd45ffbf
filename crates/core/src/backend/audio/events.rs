//! The server-sent events of an audio stream (a streamed transcript, speech as `sse`): the
//! body read frame by frame into events, each handed to its API's reader with the time its
//! bytes arrived, and the JSON of one event read alike for both.

use serde_json::Value;
use tokio::time::Instant;

use super::{protocol, server_error};
use crate::backend::Activity;
use crate::backend::sse::{SseDecoder, SseEvent};
use crate::http::{HttpError, ResponseBody};
use crate::record::{Exchange, Failure};

/// Whether an event ended the stream.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Flow {
    More,
    Done,
}

/// How the events stopped coming.
pub(super) enum Ended {
    /// An event said the stream is done.
    Done,
    /// The body ended (its last events read).
    BodyEnd,
    /// The connection broke mid-body: the caller says how far it got.
    Cut(HttpError),
}

/// Reads `body`'s events into `on_event` (the event, when its bytes arrived, the exchange)
/// until one returns [`Flow::Done`] or the body ends or breaks; a frame that is no event
/// stream (a line over `max_line_bytes`) or an event `on_event` fails ends it with that
/// failure. Every frame bumps `activity` and notes how late it was read.
pub(super) async fn each_event(
    body: &mut ResponseBody,
    max_line_bytes: usize,
    exchange: &mut Exchange,
    activity: &Activity,
    mut on_event: impl FnMut(&SseEvent, Instant, &mut Exchange) -> Result<Flow, Failure>,
) -> Result<Ended, Failure> {
    let mut decoder = SseDecoder::new(max_line_bytes);
    let mut events = Vec::new();
    loop {
        let frame = body.data().await;
        let now = body.received_at();
        exchange.read_late = body.read_late();
        match frame {
            Some(Ok(bytes)) => {
                activity.bump();
                decoder
                    .feed(&bytes, &mut events)
                    .map_err(|error| protocol(error.to_string()))?;
                for sse in events.drain(..) {
                    if on_event(&sse, now, exchange)? == Flow::Done {
                        return Ok(Ended::Done);
                    }
                }
            }
            Some(Err(error)) => return Ok(Ended::Cut(error)),
            None => {
                decoder
                    .finish(&mut events)
                    .map_err(|error| protocol(error.to_string()))?;
                for sse in events.drain(..) {
                    on_event(&sse, now, exchange)?;
                }
                return Ok(Ended::BodyEnd);
            }
        }
    }
}

/// The JSON of one event (`what`: whose, for the message): `None` at `[DONE]`; the first
/// event's time noted on `exchange`; an `error` event or an `error` field fails with the
/// server's words, data that is not JSON as a protocol failure.
pub(super) fn event_json(
    sse: &SseEvent,
    now: Instant,
    exchange: &mut Exchange,
    what: &str,
) -> Result<Option<Value>, Failure> {
    let data = sse.data.trim();
    if data == "[DONE]" {
        return Ok(None);
    }
    if exchange.first_event_at.is_none() {
        exchange.first_event_at = Some(now);
    }
    let value: Value = serde_json::from_str(data)
        .map_err(|error| protocol(format!("invalid JSON in a {what} event: {error}")))?;
    if sse.is_error() || value.get("error").is_some_and(|e| !e.is_null()) {
        return Err(server_error(&value));
    }
    Ok(Some(value))
}
