//! [`ChunkArrival`], the per-chunk record a stream keeps while it runs: 24 bytes, since a long
//! answer keeps one per token for every stream in flight (an [`Instant`] alone takes 16).

use std::sync::OnceLock;
use std::time::Duration;

use tokio::time::Instant;

/// An instant in 8 bytes: signed nanoseconds from a process-wide origin (exact both ways).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Stamp(i64);

fn origin() -> std::time::Instant {
    static ORIGIN: OnceLock<std::time::Instant> = OnceLock::new();
    *ORIGIN.get_or_init(std::time::Instant::now)
}

impl Stamp {
    fn of(at: Instant) -> Self {
        let (at, origin) = (at.into_std(), origin());
        let nanos = |d: Duration| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX);
        match at.checked_duration_since(origin) {
            Some(after) => Stamp(nanos(after)),
            None => Stamp(-nanos(origin.duration_since(at))),
        }
    }

    fn instant(self) -> Instant {
        let origin = origin();
        let offset = Duration::from_nanos(self.0.unsigned_abs());
        let at = if self.0 >= 0 {
            origin + offset
        } else {
            origin - offset
        };
        Instant::from_std(at)
    }
}

/// No cumulative usage with the chunk.
const NO_USAGE: u32 = u32::MAX;
const TOOL_CALL: u32 = 1 << 31;

/// One streamed chunk that carried generated output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkArrival {
    at: Stamp,
    /// Bytes of generated text it carried (its slice of [`super::Exchange::text`]).
    pub text_bytes: u32,
    /// Cumulative `usage.completion_tokens`, or [`NO_USAGE`].
    cumulative: u32,
    /// Of `text_bytes`, the reasoning text (the start of the chunk's slice).
    pub reasoning_bytes: u32,
    /// Tool-call text bytes, and [`TOOL_CALL`] when the chunk carried a tool-call delta.
    tool: u32,
}

impl ChunkArrival {
    /// A chunk of `text_bytes` answer bytes decoded at `at`.
    pub fn new(at: Instant, text_bytes: u32) -> Self {
        ChunkArrival {
            at: Stamp::of(at),
            text_bytes,
            cumulative: NO_USAGE,
            reasoning_bytes: 0,
            tool: 0,
        }
    }

    /// With the cumulative `usage.completion_tokens` sent with the chunk (continuous usage).
    pub fn with_cumulative(mut self, tokens: Option<u64>) -> Self {
        self.cumulative = tokens.map_or(NO_USAGE, |n| u32::try_from(n).unwrap_or(NO_USAGE - 1));
        self
    }

    /// With `bytes` of the text being reasoning.
    pub fn with_reasoning(mut self, bytes: u32) -> Self {
        self.reasoning_bytes = bytes;
        self
    }

    /// With `bytes` of tool-call text (names and argument pieces), and whether it carried a
    /// tool-call delta.
    pub fn with_tool(mut self, bytes: u32, call: bool) -> Self {
        self.tool = bytes.min(TOOL_CALL - 1) | if call { TOOL_CALL } else { 0 };
        self
    }

    /// When the chunk's last byte was decoded.
    pub fn at(&self) -> Instant {
        self.at.instant()
    }

    /// Cumulative `usage.completion_tokens` sent with the chunk (continuous usage), if any.
    pub fn cumulative_tokens(&self) -> Option<u64> {
        (self.cumulative != NO_USAGE).then_some(u64::from(self.cumulative))
    }

    /// Bytes of tool-call text (function names and argument pieces).
    pub fn tool_bytes(&self) -> u32 {
        self.tool & !TOOL_CALL
    }

    /// The chunk carried a tool-call delta.
    pub fn tool_call(&self) -> bool {
        self.tool & TOOL_CALL != 0
    }

    /// Whether the chunk carried answer output: answer text or a tool-call delta.
    pub fn has_answer(&self) -> bool {
        self.text_bytes > self.reasoning_bytes || self.tool_call()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chunk_is_24_bytes_and_keeps_everything_exactly() {
        assert_eq!(std::mem::size_of::<ChunkArrival>(), 24);
        let now = Instant::now();
        for at in [
            now,
            now + Duration::from_nanos(1),
            now - Duration::from_secs(3600),
        ] {
            assert_eq!(ChunkArrival::new(at, 1).at(), at);
        }
        let chunk = ChunkArrival::new(now, 7)
            .with_cumulative(Some(12))
            .with_reasoning(3)
            .with_tool(5, true);
        assert_eq!(chunk.cumulative_tokens(), Some(12));
        assert_eq!((chunk.text_bytes, chunk.reasoning_bytes), (7, 3));
        assert_eq!((chunk.tool_bytes(), chunk.tool_call()), (5, true));
        let plain = ChunkArrival::new(now, 0).with_tool(0, false);
        assert_eq!(
            (plain.cumulative_tokens(), plain.tool_call()),
            (None, false)
        );
        assert!(!plain.has_answer());
    }
}
