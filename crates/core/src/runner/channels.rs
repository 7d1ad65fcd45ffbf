//! A finished answer split by channel: reasoning, answer text and tool calls. Each output
//! chunk's tokens (already attributed, `docs/metrics.md` §3) go to the channels it carried — all
//! of them when it carried one, else in proportion to each part's tokenizer count — and the
//! server's `completion_tokens_details.reasoning_tokens` wins over the deltas when present.

use crate::record::{ChunkArrival, Exchange, ReasoningSource};
use crate::tokens::{TokenCounter, apportion};

/// One chunk's text, by channel.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Pieces<'a> {
    pub(super) reasoning: &'a str,
    pub(super) answer: &'a str,
    pub(super) tool: &'a str,
}

/// Every chunk's pieces, when the whole text was kept (else `None`).
pub(super) fn chunk_pieces(exchange: &Exchange) -> Option<Vec<Pieces<'_>>> {
    let complete = exchange.text.len() as u64 == exchange.text_bytes
        && exchange.tool_text.len() as u64 == exchange.tool_text_bytes;
    if !complete {
        return None;
    }
    let (mut text_at, mut tool_at) = (0usize, 0usize);
    let pieces = exchange
        .chunks
        .iter()
        .map(|chunk| {
            let cut = |source: &str, from: usize, bytes: u32| -> usize {
                (from + bytes as usize).min(source.len())
            };
            let reasoning_end = cut(&exchange.text, text_at, chunk.reasoning_bytes);
            let text_end = cut(&exchange.text, text_at, chunk.text_bytes);
            let tool_end = cut(&exchange.tool_text, tool_at, chunk.tool_bytes());
            let pieces = Pieces {
                reasoning: exchange.text.get(text_at..reasoning_end).unwrap_or(""),
                answer: exchange.text.get(reasoning_end..text_end).unwrap_or(""),
                tool: exchange.tool_text.get(tool_at..tool_end).unwrap_or(""),
            };
            (text_at, tool_at) = (text_end, tool_end);
            pieces
        })
        .collect();
    Some(pieces)
}

/// The per-channel figures of a finished answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Channels {
    pub(super) reasoning_tokens: Option<u64>,
    pub(super) reasoning_source: Option<ReasoningSource>,
    pub(super) tool_call_tokens: Option<u64>,
    pub(super) ended_in_tool_call: bool,
}

/// Splits the answer's tokens (`chunk_tokens`, one count per chunk) by channel.
pub(super) fn split(
    exchange: &Exchange,
    chunk_tokens: &[u64],
    counter: &dyn TokenCounter,
) -> Channels {
    let pieces = chunk_pieces(exchange);
    let (mut reasoning, mut tool) = (0u64, 0u64);
    for (position, (chunk, &tokens)) in exchange.chunks.iter().zip(chunk_tokens).enumerate() {
        let piece = pieces.as_ref().and_then(|p| p.get(position)).copied();
        let [r, _, t] = chunk_channels(chunk, piece, tokens, counter);
        reasoning += r;
        tool += t;
    }
    let saw_reasoning = exchange.chunks.iter().any(|c| c.reasoning_bytes > 0);
    let from_usage = exchange.usage.and_then(|usage| usage.reasoning_tokens());
    let (reasoning_tokens, reasoning_source) = match (from_usage, saw_reasoning) {
        (Some(tokens), _) => (Some(tokens), Some(ReasoningSource::Usage)),
        (None, true) => (Some(reasoning), Some(ReasoningSource::Deltas)),
        (None, false) => (None, None),
    };
    let ended_in_tool_call = exchange.finish_reason.as_deref() == Some("tool_calls")
        || exchange.chunks.last().is_some_and(|c| c.tool_call());
    Channels {
        reasoning_tokens,
        reasoning_source,
        tool_call_tokens: (!exchange.tool_calls.is_empty()).then_some(tool),
        ended_in_tool_call,
    }
}

/// `[reasoning, answer, tool]` tokens of one chunk carrying `tokens`.
fn chunk_channels(
    chunk: &ChunkArrival,
    piece: Option<Pieces<'_>>,
    tokens: u64,
    counter: &dyn TokenCounter,
) -> [u64; 3] {
    let present = [
        chunk.reasoning_bytes > 0,
        chunk.text_bytes > chunk.reasoning_bytes,
        chunk.tool_bytes() > 0 || chunk.tool_call(),
    ];
    match present.iter().filter(|p| **p).count() {
        0 => [0, tokens, 0],
        1 => present.map(|p| if p { tokens } else { 0 }),
        _ => {
            let weights = match piece {
                Some(piece) => {
                    [piece.reasoning, piece.answer, piece.tool].map(|t| counter.count(t))
                }
                None => [
                    chunk.reasoning_bytes,
                    chunk.text_bytes - chunk.reasoning_bytes,
                    chunk.tool_bytes(),
                ]
                .map(u64::from),
            };
            let shares = apportion(tokens, &weights);
            [shares[0], shares[1], shares[2]]
        }
    }
}
