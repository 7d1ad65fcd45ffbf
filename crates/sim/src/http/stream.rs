//! Delivering an answer as engine events arrive: streamed (server-sent events written by a
//! producer task into the response body) or whole (one JSON body once every token is in), with
//! the mid-answer faults applied once about half of the tokens have been generated.

use std::future::pending;
use std::time::Duration;

use hyper::Response;
use hyper::StatusCode;

use goodput_protocol::ApiErrorBody;

use super::answer::{
    Answer, GARBAGE_EVENT, INVALID_JSON_EVENT, KEEP_ALIVE_EVENT, MALFORMED_EVENT, to_json,
};
use super::body::{ClientGone, ConnectionAbort, FrameSink, SimBody};
use super::faults::{Fault, PendingFault};
use super::routes::{error_response, json_response};
use crate::driver::{RequestEvents, RequestUpdate};

/// Frames queued for a slow client before the producer waits.
const STREAM_BUFFER_FRAMES: usize = 64;

/// An accepted request on its way to the client.
#[derive(Debug)]
pub(crate) struct Exchange {
    /// The answer being built.
    pub(crate) answer: Answer,
    /// The engine's updates for the request's prompts.
    pub(crate) events: RequestEvents,
    /// A fault still to strike.
    pub(crate) fault: Option<PendingFault>,
    /// How long a stall lasts in real time (`None`: until the client leaves).
    pub(crate) stall: Option<Duration>,
    /// Length of the line of the `oversized_line` fault, bytes.
    pub(crate) oversized_line_bytes: u64,
    /// Real-time interval of the keep-alives of the `endless_response` fault.
    pub(crate) keep_alive: Duration,
}

impl Exchange {
    /// The pending fault, if the answer has reached it (it strikes only once).
    fn fault_due(&mut self) -> Option<Fault> {
        let generated = self.answer.generated();
        self.fault
            .take_if(|pending| generated >= pending.after_tokens)
            .map(|pending| pending.fault)
    }

    /// Waits out a stall: the configured time, or until the client leaves.
    async fn stall(&self, client_gone: impl Future<Output = ()>) {
        match self.stall {
            Some(duration) => {
                tokio::select! {
                    () = tokio::time::sleep(duration) => {}
                    () = client_gone => {}
                }
            }
            None => client_gone.await,
        }
    }
}

/// Whether a stream goes on after a fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Stop,
}

/// Starts streaming the answer; returns the response body it is written to.
pub(crate) fn start_stream(exchange: Exchange) -> SimBody {
    let (body, sink) = SimBody::channel(STREAM_BUFFER_FRAMES);
    tokio::spawn(async move {
        // `Err` only means the client went away; dropping the exchange cancels the request.
        let _ = stream_answer(exchange, &sink).await;
    });
    body
}

async fn stream_answer(mut exchange: Exchange, sink: &FrameSink) -> Result<(), ClientGone> {
    let mut role_sent = false;
    loop {
        let next = tokio::select! {
            next = exchange.events.recv() => next,
            () = sink.closed() => return Err(ClientGone),
        };
        let Some((index, update)) = next else { break };
        match update {
            RequestUpdate::Aborted { reason } => {
                exchange.events.cancel();
                sink.send(exchange.answer.error_event(&reason)).await?;
                return send_done(&exchange.answer, sink).await;
            }
            RequestUpdate::Admitted { cached_tokens } => {
                exchange.answer.add_cached(cached_tokens);
            }
            RequestUpdate::Tokens { count, finished } => {
                if exchange.answer.is_chat() && !role_sent {
                    sink.send(exchange.answer.role_event()).await?;
                    role_sent = true;
                }
                let text = exchange.answer.add_tokens(index, count, finished);
                sink.send(exchange.answer.delta_event(index, text, finished))
                    .await?;
                if let Some(fault) = exchange.fault_due()
                    && inject_stream_fault(fault, &mut exchange, sink).await? == Flow::Stop
                {
                    return Ok(());
                }
            }
        }
    }
    if let Some(usage) = exchange.answer.usage_event() {
        sink.send(usage).await?;
    }
    send_done(&exchange.answer, sink).await
}

/// The stream's closing event, if its dialect has one.
async fn send_done(answer: &Answer, sink: &FrameSink) -> Result<(), ClientGone> {
    match answer.done_event() {
        Some(done) => sink.send(done).await,
        None => Ok(()),
    }
}

async fn inject_stream_fault(
    fault: Fault,
    exchange: &mut Exchange,
    sink: &FrameSink,
) -> Result<Flow, ClientGone> {
    match fault {
        Fault::MalformedSse => {
            sink.send(MALFORMED_EVENT).await?;
            Ok(Flow::Continue)
        }
        Fault::InvalidJsonChunk => {
            sink.send(INVALID_JSON_EVENT).await?;
            Ok(Flow::Continue)
        }
        Fault::SseGarbage => {
            sink.send(GARBAGE_EVENT).await?;
            Ok(Flow::Continue)
        }
        Fault::OversizedLine => {
            send_oversized_line(exchange.oversized_line_bytes, sink).await?;
            Ok(Flow::Continue)
        }
        Fault::EndlessResponse => {
            exchange.events.cancel();
            loop {
                tokio::time::sleep(exchange.keep_alive).await;
                sink.send(KEEP_ALIVE_EVENT).await?;
            }
        }
        Fault::ErrorMidStream => {
            exchange.events.cancel();
            let message = "injected fault: the server failed mid-stream";
            sink.send(exchange.answer.error_event(message)).await?;
            send_done(&exchange.answer, sink).await?;
            Ok(Flow::Stop)
        }
        Fault::ResetMidStream => {
            exchange.events.cancel();
            sink.abort().await;
            Ok(Flow::Stop)
        }
        Fault::StallMidStream => {
            // Free the engine slot; the connection stays open and silent.
            exchange.events.cancel();
            exchange.stall(sink.closed()).await;
            sink.abort().await;
            Ok(Flow::Stop)
        }
        Fault::Http500 | Fault::Http429 | Fault::Http400 | Fault::StallBeforeResponse => {
            Ok(Flow::Continue)
        }
    }
}

/// One `data` line of `bytes` bytes (a JSON string that never closes in time), sent in
/// 64 KiB frames so the simulator never holds it whole.
async fn send_oversized_line(bytes: u64, sink: &FrameSink) -> Result<(), ClientGone> {
    const FRAME: usize = 64 << 10;
    let filler = bytes::Bytes::from(vec![b'x'; FRAME]);
    sink.send(&b"data: {\"pad\":\""[..]).await?;
    let mut left = bytes;
    while left > 0 {
        let take = usize::try_from(left).unwrap_or(FRAME).min(FRAME);
        sink.send(filler.slice(..take)).await?;
        left -= take as u64;
    }
    sink.send(&b"\"}\n\n"[..]).await
}

/// A non-streamed answer that never ends: its first half, then a space every `keep_alive`.
fn endless_body(mut exchange: Exchange) -> Response<SimBody> {
    exchange.events.cancel();
    let (body, sink) = SimBody::channel(STREAM_BUFFER_FRAMES);
    let keep_alive = exchange.keep_alive;
    let mut start = exchange.answer.final_body();
    start.truncate(start.len() / 2);
    tokio::spawn(async move {
        if sink.send(start).await.is_err() {
            return;
        }
        loop {
            tokio::time::sleep(keep_alive).await;
            if sink.send(&b" "[..]).await.is_err() {
                return;
            }
        }
    });
    let mut response = Response::new(body);
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/json"),
    );
    response
}

/// Waits for the whole answer and returns it as one JSON response (or applies a fault).
pub(crate) async fn collect_answer(
    mut exchange: Exchange,
) -> Result<Response<SimBody>, ConnectionAbort> {
    let mut malformed = false;
    while let Some((index, update)) = exchange.events.recv().await {
        let (count, finished) = match update {
            RequestUpdate::Tokens { count, finished } => (count, finished),
            RequestUpdate::Admitted { cached_tokens } => {
                exchange.answer.add_cached(cached_tokens);
                continue;
            }
            RequestUpdate::Aborted { reason } => {
                return Ok(error_response(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "server_error",
                    &reason,
                    None,
                ));
            }
        };
        exchange.answer.add_tokens(index, count, finished);
        match exchange.fault_due() {
            Some(Fault::ResetMidStream) => return Err(ConnectionAbort),
            Some(Fault::StallMidStream) => {
                exchange.events.cancel();
                exchange.stall(pending()).await;
                return Err(ConnectionAbort);
            }
            Some(Fault::ErrorMidStream) => {
                // A 200 whose body is an error object.
                let message = "injected fault: the server failed while generating";
                let error = ApiErrorBody::new("server_error", message, None, 500);
                return Ok(json_response(StatusCode::OK, to_json(&error)));
            }
            Some(Fault::EndlessResponse) => return Ok(endless_body(exchange)),
            Some(
                Fault::MalformedSse
                | Fault::InvalidJsonChunk
                | Fault::SseGarbage
                | Fault::OversizedLine,
            ) => malformed = true,
            Some(Fault::Http500 | Fault::Http429 | Fault::Http400 | Fault::StallBeforeResponse)
            | None => {}
        }
    }
    let mut body = exchange.answer.final_body();
    if malformed {
        body.truncate(body.len() / 2);
    }
    Ok(json_response(StatusCode::OK, body))
}
