//! The client-side counts the server's figures are checked against, folded from request
//! records as they finish (so `goodput report` refolds them from the journal): tokens the
//! client received and sent, and tokens per streamed chunk (speculative decoding delivers
//! several tokens per chunk).

use std::io;

use crate::record::RequestRecord;
use crate::runner::RecordSink;

/// Client-side totals over every request of a run (warmup and failures included).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientTally {
    /// Output tokens received, every request.
    pub output_tokens: u64,
    /// Prompt tokens of requests that received a first token.
    pub input_tokens: u64,
    /// Output chunks after the first, of successful streamed requests.
    pub chunks_after_first: u64,
    /// Tokens those chunks carried.
    pub tokens_after_first: u64,
}

impl ClientTally {
    /// Folds one record.
    pub fn add(&mut self, record: &RequestRecord) {
        self.output_tokens += record.output_tokens;
        if record.first_token_us.is_some() {
            self.input_tokens += record.input_tokens.unwrap_or(0);
        }
        if record.is_ok() && record.streamed && record.chunks.len() >= 2 {
            let after_first = &record.chunks[1..];
            self.chunks_after_first += after_first.len() as u64;
            self.tokens_after_first += after_first.iter().map(|chunk| chunk[1]).sum::<u64>();
        }
    }

    /// Mean tokens per chunk after the first, when any.
    pub fn tokens_per_chunk(&self) -> Option<f64> {
        (self.chunks_after_first > 0)
            .then(|| self.tokens_after_first as f64 / self.chunks_after_first as f64)
    }
}

impl RecordSink for ClientTally {
    fn record(&mut self, record: &RequestRecord) -> io::Result<()> {
        self.add(record);
        Ok(())
    }
}
