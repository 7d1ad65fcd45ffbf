//! Streamed replies of `--api http` (`--stream-format sse|chunked`): each SSE event (or each
//! piece of a chunked body) is an output chunk stamped when it arrived, so the time to the
//! first one is the TTFT and the gaps between them the inter-chunk times. Nothing in a chunk is
//! tokenized by goodput: tokens come only from a `--tokens-path` over each SSE event's JSON;
//! items from the items path over the final event (SSE) or the whole body (chunked).

use serde_json::Value;
use tokio::time::Instant;

use super::ItemsPath;
use crate::backend::Activity;
use crate::backend::sse::{SseDecoder, SseEvent};
use crate::http::{Arrivals, ResponseBody};
use crate::record::{Exchange, Failure, OutcomeKind};

/// How a templated reply streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StreamFormat {
    /// One whole body.
    #[default]
    None,
    /// Server-sent events: each event is a chunk.
    Sse,
    /// Each piece of the body, as it is read, is a chunk.
    Chunked,
}

/// What a streamed reply leaves to count items in: the final event's data (SSE) or the whole
/// body (chunked).
pub(super) async fn read(
    body: &mut ResponseBody,
    format: StreamFormat,
    tokens: Option<&ItemsPath>,
    limit: usize,
    activity: &Activity,
    exchange: &mut Exchange,
) -> Result<Vec<u8>, Failure> {
    let mut reader = Reader {
        decoder: SseDecoder::new(limit),
        events: Vec::new(),
        sse: format == StreamFormat::Sse,
        tokens,
        cumulative: 0,
        counted: false,
        kept: Vec::new(),
        limit,
    };
    while let Some(piece) = body.data().await {
        activity.bump();
        exchange.read_late = body.read_late();
        match piece {
            Ok(bytes) => {
                reader.feed(&bytes, body.arrivals(), exchange)?;
                if !exchange.chunks.is_empty() {
                    body.watch_arrivals(false);
                }
            }
            Err(error) => {
                let progress = format!("after {} stream chunks", exchange.chunks.len());
                return Err(crate::http::closed_mid_body(&error, &progress));
            }
        }
    }
    reader.finish(body.received_at(), exchange)
}

struct Reader<'a> {
    decoder: SseDecoder,
    events: Vec<SseEvent>,
    sse: bool,
    tokens: Option<&'a ItemsPath>,
    /// Tokens counted by the tokens path so far.
    cumulative: u64,
    /// Whether the tokens path found something in any event.
    counted: bool,
    /// The final event's data (SSE) or the body so far (chunked).
    kept: Vec<u8>,
    limit: usize,
}

impl Reader<'_> {
    /// Takes a piece that arrived at `arrivals`: with SSE each event it completes at its own
    /// arrival ([`Arrivals::event`]); a piece of a chunked stream is one output chunk, timed by
    /// its last byte.
    fn feed(
        &mut self,
        bytes: &[u8],
        arrivals: Arrivals,
        exchange: &mut Exchange,
    ) -> Result<(), Failure> {
        let now = arrivals.last;
        if !self.sse {
            if self.kept.len() + bytes.len() > self.limit {
                let message = format!("response body exceeds {} bytes", self.limit);
                return Err(Failure::new(OutcomeKind::Protocol, message));
            }
            self.kept.extend_from_slice(bytes);
            exchange.first_event_at.get_or_insert(now);
            exchange.push_output(now, "", Some(0));
            return Ok(());
        }
        let decoded = self.decoder.feed(bytes, &mut self.events);
        self.handle(arrivals, exchange)?;
        decoded.map_err(|error| Failure::new(OutcomeKind::Protocol, format!("bad stream: {error}")))
    }

    fn handle(&mut self, arrivals: Arrivals, exchange: &mut Exchange) -> Result<(), Failure> {
        for (index, event) in std::mem::take(&mut self.events).into_iter().enumerate() {
            let now = arrivals.event(index);
            exchange.first_event_at.get_or_insert(now);
            if event.is_error() {
                let message = format!("server error in stream: {}", event.data);
                return Err(Failure::new(OutcomeKind::StreamError, message));
            }
            let data = event.data.trim_ascii();
            if data.is_empty() || data == "[DONE]" {
                continue;
            }
            if let Some(path) = self.tokens {
                let found = serde_json::from_str::<Value>(data)
                    .ok()
                    .and_then(|value| path.tokens(&value));
                self.counted |= found.is_some();
                self.cumulative += found.unwrap_or(0);
            }
            exchange.push_output(now, "", Some(self.cumulative));
            self.kept.clear();
            self.kept.extend_from_slice(data.as_bytes());
        }
        Ok(())
    }

    fn finish(mut self, now: Instant, exchange: &mut Exchange) -> Result<Vec<u8>, Failure> {
        if self.sse {
            let decoded = self.decoder.finish(&mut self.events);
            self.handle(Arrivals::at(now), exchange)?;
            decoded.map_err(|error| {
                Failure::new(OutcomeKind::Protocol, format!("bad stream: {error}"))
            })?;
        }
        if exchange.chunks.is_empty() {
            let what = if self.sse { "event" } else { "byte" };
            let message = format!("the stream ended without a single {what}");
            return Err(Failure::new(OutcomeKind::Protocol, message));
        }
        if let Some(path) = self.tokens.filter(|_| !self.counted) {
            let message = format!(
                "the tokens path `{path}` found nothing in any of the {} events",
                exchange.chunks.len()
            );
            return Err(Failure::new(OutcomeKind::Protocol, message));
        }
        Ok(self.kept)
    }
}
