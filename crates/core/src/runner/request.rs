//! One request's life inside the runner: wait for a concurrency permit, send it through the
//! backend under the request timeout and the run's cancellation, then turn the [`Exchange`]
//! into a [`RequestRecord`] (token counts from `usage` first, per-chunk token attribution).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::backend::{Activity, Backend, RequestIds, RequestInput, RequestSpec};
use crate::record::{
    ChunkArrival, Exchange, Failure, OutcomeKind, Phase, RequestRecord, TokenSource,
};
use crate::tokens::{TokenCounter, apportion};

use super::channels;

/// When a request is due: its offset from the run start in the target's time — the
/// schedule's own value (an arrival, a worker freed, a turn's think time over), which decides
/// admission and warm-up and becomes the record's `scheduled_us` — and the instant of this
/// machine's clock it maps to (`start + offset / time_scale`), which only the waiting reads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Due {
    /// Target time since the run start.
    pub(crate) offset: Duration,
    /// The real instant at which it is due.
    pub(crate) at: Instant,
}

/// What the runner knows about a request before it is sent.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ticket {
    pub(crate) index: u64,
    pub(crate) phase: Phase,
    pub(crate) scheduled: Due,
}

/// Shared by every request of a run.
#[derive(Debug, Clone)]
pub(crate) struct RequestContext {
    pub(crate) start: Instant,
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) counter: Arc<dyn TokenCounter>,
    pub(crate) activity: Arc<Activity>,
    pub(crate) request_timeout: Duration,
    /// The request timeout on the runtime's clock (the same unless timeouts are in target
    /// time on a scaled clock), `timeout_grace` included.
    pub(crate) real_request_timeout: Duration,
    /// How late a timeout fires on purpose so that a request ending at its deadline has ended
    /// (one timer tick on a paused clock, else zero): a timed-out request ends at its deadline.
    pub(crate) timeout_grace: Duration,
    pub(crate) streamed: bool,
    /// Set by the no-progress watchdog before it stops the run.
    pub(crate) abandoned: Arc<AtomicBool>,
    pub(crate) no_progress_timeout: Duration,
    /// Target-time seconds per real second (`RunConfig::time_scale`).
    pub(crate) time_scale: f64,
    /// Step index stamped on every record.
    pub(crate) step: u32,
    /// The correlation ids sent (`None`: no request id header).
    pub(crate) request_ids: Option<Arc<RequestIds>>,
}

impl RequestContext {
    /// Microseconds of target time since the run start at real instant `at`.
    pub(crate) fn target_micros(&self, at: Instant) -> u64 {
        let real = at.saturating_duration_since(self.start);
        goodput_protocol::time_scale::to_target_micros(real, self.time_scale)
    }

    /// A request due `offset` of target time after the run start (a schedule's arrival).
    pub(crate) fn due_at(&self, offset: Duration) -> Due {
        Due {
            offset,
            at: self.real_after(self.start, offset),
        }
    }

    /// A request due at real instant `at` (a closed-loop worker freed, a turn after its think
    /// time, measured on this machine's clock).
    pub(crate) fn due_now(&self, at: Instant) -> Due {
        Due {
            offset: Duration::from_micros(self.target_micros(at)),
            at,
        }
    }

    /// The real instant `after` of target time past `at` (a think time in the target's time).
    pub(crate) fn real_after(&self, at: Instant, after: Duration) -> Instant {
        at + goodput_protocol::time_scale::to_clock(after, self.time_scale)
    }

    /// The failure of a request stopped by the run's cancellation.
    fn stopped(&self, while_what: &str) -> Failure {
        if self.abandoned.load(Ordering::Relaxed) {
            Failure::new(
                OutcomeKind::Timeout,
                format!(
                    "run abandoned {while_what}: nothing received for {:?}",
                    self.no_progress_timeout
                ),
            )
        } else {
            Failure::new(OutcomeKind::Cancelled, format!("run stopped {while_what}"))
        }
    }
}

/// Runs one request to its end and returns its record; never panics, never hangs past the
/// request timeout or the cancellation.
pub(crate) async fn execute(
    ctx: &RequestContext,
    ticket: Ticket,
    spec: RequestSpec,
    limit: Option<Arc<Semaphore>>,
    cancel: &CancellationToken,
) -> RequestRecord {
    execute_keeping_reply(ctx, ticket, spec, limit, cancel, false)
        .await
        .0
}

/// [`execute`], also returning the reply text when `keep_reply` (a multi-turn history carries
/// the server's actual replies; the record does not keep text).
pub(crate) async fn execute_keeping_reply(
    ctx: &RequestContext,
    ticket: Ticket,
    spec: RequestSpec,
    limit: Option<Arc<Semaphore>>,
    cancel: &CancellationToken,
    keep_reply: bool,
) -> (RequestRecord, String) {
    let mut spec = spec;
    if let Some(ids) = &ctx.request_ids {
        spec.tags.request_id = Some(ids.id(ctx.step, ticket.index));
    }
    let mut exchange = Exchange::default();
    let capped = limit.is_some();
    let _permit = match limit {
        None => None,
        Some(semaphore) => tokio::select! {
            biased;
            () = cancel.cancelled() => {
                exchange.fail(ctx.stopped("while the request was queued"));
                let now = Instant::now();
                return (finalize(ctx, (ticket, now, now), &spec, exchange), String::new());
            }
            permit = semaphore.acquire_owned() => permit.ok(),
        },
    };
    // Without a cap there is no client queue: the wait before sending is dispatch lag only.
    let dequeued = if capped {
        Instant::now()
    } else {
        ticket.scheduled.at
    };
    let timed_out = send_bounded(ctx, &spec, &mut exchange, cancel).await;
    ctx.activity.bump();
    let reply = if keep_reply {
        exchange.text.clone()
    } else {
        String::new()
    };
    let now = Instant::now();
    let end = if timed_out {
        now.checked_sub(ctx.timeout_grace).unwrap_or(now)
    } else {
        now
    };
    (
        finalize(ctx, (ticket, dequeued, end), &spec, exchange),
        reply,
    )
}

/// Sends `spec` under the request timeout and the run's cancellation, recording a failure in
/// `exchange`; whether it timed out.
async fn send_bounded(
    ctx: &RequestContext,
    spec: &RequestSpec,
    exchange: &mut Exchange,
    cancel: &CancellationToken,
) -> bool {
    let send = ctx.backend.send(spec, exchange, &ctx.activity);
    let outcome = tokio::select! {
        biased;
        () = cancel.cancelled() => Err((ctx.stopped("while the request was in flight"), false)),
        finished = tokio::time::timeout(ctx.real_request_timeout, send) => finished.map_err(|_| {
            let failure = Failure::new(
                OutcomeKind::Timeout,
                format!("no complete answer within the request timeout ({:?})", ctx.request_timeout),
            );
            (failure, true)
        }),
    };
    match outcome {
        Ok(()) => false,
        Err((failure, timed_out)) => {
            exchange.fail(failure);
            timed_out
        }
    }
}

/// What a record derives from its exchange: token counts, chunk times, channels.
struct Derived {
    output: OutputCount,
    times: ChunkTimes,
    input: (Option<u64>, TokenSource, Option<u64>),
    channels: channels::Channels,
    cached_input_tokens: Option<u64>,
    read_late_us: Option<u64>,
    /// `max_tokens` asked for, when the backend asks for one and the output is text.
    requested_output_tokens: Option<u64>,
}

impl Derived {
    fn of(ctx: &RequestContext, exchange: &Exchange, spec: &RequestSpec) -> Derived {
        let output = OutputCount::of(exchange, ctx.counter.as_ref());
        let chunk_tokens = chunk_token_counts(exchange, output.tokens, ctx.counter.as_ref());
        let details = exchange.usage.and_then(|usage| usage.prompt_tokens_details);
        let read_late = exchange.read_late.map(|late| late.as_micros());
        Derived {
            times: ChunkTimes::of(ctx, exchange, &chunk_tokens),
            input: input_tokens(ctx, exchange, spec),
            channels: channels::split(exchange, &chunk_tokens, ctx.counter.as_ref()),
            cached_input_tokens: details.map(|details| details.cached_tokens),
            read_late_us: read_late.map(|us| u64::try_from(us).unwrap_or(u64::MAX)),
            requested_output_tokens: spec
                .max_output_tokens
                .filter(|_| !exchange.untokenized && ctx.backend.asks_output_length()),
            output,
        }
    }
}

/// Turns a finished exchange into the journal record of `ticket` (`dequeued` when it left the
/// client queue, `end` when it ended).
pub(crate) fn finalize(
    ctx: &RequestContext,
    (ticket, dequeued, end): (Ticket, Instant, Instant),
    spec: &RequestSpec,
    exchange: Exchange,
) -> RequestRecord {
    let d = Derived::of(ctx, &exchange, spec);
    RequestRecord {
        index: ticket.index,
        phase: ticket.phase,
        scheduled_us: u64::try_from(ticket.scheduled.offset.as_micros()).unwrap_or(u64::MAX),
        dequeued_us: ctx.target_micros(dequeued),
        sent_us: exchange.sent_at.map(|at| ctx.target_micros(at)),
        response_us: exchange.response_at.map(|at| ctx.target_micros(at)),
        first_token_us: d.times.first_token_us,
        last_token_us: d.times.chunks.last().map(|c| c[0]),
        end_us: ctx.target_micros(end),
        streamed: ctx.streamed,
        input_tokens: d.input.0,
        input_tokens_source: d.input.1,
        expected_input_tokens: d.input.2,
        output_tokens: d.output.tokens,
        output_tokens_source: d.output.source,
        requested_output_tokens: d.requested_output_tokens,
        tokenizer_output_tokens: d.output.tokenizer,
        chunks: d.times.chunks,
        items: exchange.choices.max(spec.items()),
        status: exchange.status,
        failure: exchange.failure,
        finish_reason: exchange.finish_reason,
        retries: exchange.retries,
        headers: exchange.headers,
        server_timings: exchange.server_timings,
        turn: spec.turn,
        step: ctx.step,
        session: None,
        reasoning_tokens: d.channels.reasoning_tokens,
        reasoning_tokens_source: d.channels.reasoning_source,
        first_answer_us: d.times.first_answer_us,
        tool_calls: u32::try_from(exchange.tool_calls.len()).unwrap_or(u32::MAX),
        first_tool_call_us: d.times.first_tool_call_us,
        tool_call_tokens: d.channels.tool_call_tokens,
        ended_in_tool_call: d.channels.ended_in_tool_call,
        cached_input_tokens: d.cached_input_tokens,
        expected_prefix_tokens: None,
        tool_result_turn: false,
        read_late_us: d.read_late_us,
        images: Vec::new(),
        generation: spec.tags.generation,
        request_id: spec.tags.request_id.as_ref().map(|id| id.value.clone()),
        server_request_id: exchange.server_request_id,
        response_id: exchange.response_id,
        model: None,
        adapter: None,
        class: None,
        target: exchange.target,
        replica: exchange.served_by,
        audio: exchange.audio,
    }
}

/// The chunks in µs since the target's start: `[at, tokens]` each, and when the first token,
/// answer and tool call arrived (streamed replies only).
struct ChunkTimes {
    chunks: Vec<[u64; 2]>,
    first_token_us: Option<u64>,
    first_answer_us: Option<u64>,
    first_tool_call_us: Option<u64>,
}

impl ChunkTimes {
    fn of(ctx: &RequestContext, exchange: &Exchange, chunk_tokens: &[u64]) -> ChunkTimes {
        let us = |at: Instant| ctx.target_micros(at);
        let chunks: Vec<[u64; 2]> = exchange
            .chunks
            .iter()
            .zip(chunk_tokens)
            .map(|(c, &n)| [us(c.at()), n])
            .collect();
        let streamed = ctx.streamed;
        let first_at = |wanted: fn(&ChunkArrival) -> bool| {
            let at = exchange
                .chunks
                .iter()
                .find(|c| wanted(c))
                .map(|c| us(c.at()));
            at.filter(|_| streamed)
        };
        ChunkTimes {
            first_token_us: chunks.first().map(|c| c[0]).filter(|_| streamed),
            first_answer_us: first_at(ChunkArrival::has_answer),
            first_tool_call_us: first_at(|c| c.tool_call()),
            chunks,
        }
    }
}

/// A request's output token count and where it came from.
struct OutputCount {
    tokens: u64,
    source: TokenSource,
    /// goodput's tokenizer over the whole text, when the text was kept in full.
    tokenizer: Option<u64>,
}

impl OutputCount {
    /// Usage first; else the tokenizer over the text; else (text) the number of output chunks.
    fn of(exchange: &Exchange, counter: &dyn TokenCounter) -> OutputCount {
        let text_complete = exchange.text.len() as u64 == exchange.text_bytes
            && exchange.tool_text.len() as u64 == exchange.tool_text_bytes;
        let tokenizer = (text_complete && !exchange.chunks.is_empty() && !exchange.untokenized)
            .then(|| counter.count(&exchange.text) + counter.count(&exchange.tool_text));
        let (tokens, source) = match (exchange.usage, tokenizer) {
            (Some(usage), _) => (usage.completion_tokens, TokenSource::Usage),
            (None, Some(counted)) => (counted, TokenSource::Tokenizer),
            // Untokenized output (a templated JSON reply): what its chunk said, never a guess.
            (None, None) if exchange.untokenized => {
                let last = exchange.chunks.last().and_then(|c| c.cumulative_tokens());
                (last.unwrap_or(0), TokenSource::None)
            }
            (None, None) => (exchange.chunks.len() as u64, TokenSource::None),
        };
        OutputCount {
            tokens,
            source,
            tokenizer,
        }
    }
}

/// Tokens carried by each output chunk, summing to `total`:
/// 1. cumulative usage on every chunk (continuous usage): the differences;
/// 2. as many chunks as tokens: one each;
/// 3. otherwise `total` apportioned by each chunk's tokenizer count (or its byte length when
///    the text was too long to keep).
fn chunk_token_counts(exchange: &Exchange, total: u64, counter: &dyn TokenCounter) -> Vec<u64> {
    let chunks = &exchange.chunks;
    if chunks.is_empty() {
        return Vec::new();
    }
    if chunks.iter().all(|c| c.cumulative_tokens().is_some()) {
        let mut previous = 0;
        let mut counts: Vec<u64> = chunks
            .iter()
            .map(|c| {
                let cumulative = c.cumulative_tokens().unwrap_or(previous).max(previous);
                let delta = cumulative - previous;
                previous = cumulative;
                delta
            })
            .collect();
        let sum: u64 = counts.iter().sum();
        if sum <= total {
            if let Some(last) = counts.last_mut() {
                *last += total - sum;
            }
            return counts;
        }
        return apportion(total, &counts);
    }
    if chunks.len() as u64 == total {
        return vec![1; chunks.len()];
    }
    let weights: Vec<u64> = match channels::chunk_pieces(exchange) {
        Some(pieces) => pieces
            .iter()
            .map(|p| counter.count(p.reasoning) + counter.count(p.answer) + counter.count(p.tool))
            .collect(),
        None => chunks
            .iter()
            .map(|c| u64::from(c.text_bytes) + u64::from(c.tool_bytes()))
            .collect(),
    };
    apportion(total, &weights)
}

/// Prompt tokens and where they came from, and the workload's count: a text prompt's tokens
/// are the server's usage, else the workload's count, else goodput's tokenizer; a prompt that
/// is not text ([`Backend::text_input`]) has only the server's usage and no workload count.
fn input_tokens(
    ctx: &RequestContext,
    exchange: &Exchange,
    spec: &RequestSpec,
) -> (Option<u64>, TokenSource, Option<u64>) {
    let text_input = ctx.backend.text_input();
    let expected = spec.expected_input_tokens.filter(|_| text_input);
    let (tokens, source) = match exchange.usage {
        Some(usage) => (Some(usage.prompt_tokens), TokenSource::Usage),
        None if !text_input => (None, TokenSource::None),
        None => match expected {
            Some(expected) => (Some(expected), TokenSource::Workload),
            None => (
                Some(count(&spec.input, &*ctx.counter)),
                TokenSource::Tokenizer,
            ),
        },
    };
    (tokens, source, expected)
}

/// goodput's tokenizer over every text of `input`.
fn count(input: &RequestInput, counter: &dyn TokenCounter) -> u64 {
    match input {
        RequestInput::Text(text) => counter.count(text),
        RequestInput::Messages(messages) => messages
            .iter()
            .map(|m| counter.count(&m.content.text()))
            .sum(),
        RequestInput::Batch(prompts) => prompts.iter().map(|p| counter.count(p)).sum(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::record::ChunkArrival;
    use crate::tokens::Tiktoken;

    fn exchange(pieces: &[(&str, Option<u64>)]) -> Exchange {
        let mut exchange = Exchange::default();
        let at = Instant::now();
        for (text, cumulative) in pieces {
            exchange.push_output(at, text, *cumulative);
        }
        exchange
    }

    #[test]
    fn continuous_usage_gives_exact_per_chunk_counts() {
        let e = exchange(&[(" a b", Some(2)), (" c", Some(3)), (" d e f", Some(6))]);
        assert_eq!(
            chunk_token_counts(&e, 6, &Tiktoken::cl100k()),
            vec![2, 1, 3]
        );
        // A trailing token the server counted but sent no text for goes to the last chunk.
        assert_eq!(
            chunk_token_counts(&e, 7, &Tiktoken::cl100k()),
            vec![2, 1, 4]
        );
    }

    #[test]
    fn without_usage_per_chunk_counts_follow_the_tokenizer() {
        let e = exchange(&[(" the", None), (" cat sat on", None), (" the mat", None)]);
        assert_eq!(
            chunk_token_counts(&e, 6, &Tiktoken::cl100k()),
            vec![1, 3, 2]
        );
        // The usage total wins; the split follows the tokenizer's proportions.
        assert_eq!(
            chunk_token_counts(&e, 12, &Tiktoken::cl100k()),
            vec![2, 6, 4]
        );
    }

    #[test]
    fn one_chunk_per_token_is_taken_as_is() {
        let mut e = exchange(&[(" x", None), (" y", None)]);
        e.chunks
            .push(ChunkArrival::new(Instant::now(), 0).with_tool(0, true));
        assert_eq!(
            chunk_token_counts(&e, 3, &Tiktoken::cl100k()),
            vec![1, 1, 1]
        );
    }
}
