//! [`TraceWorkload`]: replays a trace open-loop — request `i` is sent at the trace's own
//! (scaled) timestamp, with a prompt of exactly the trace's input length and `max_tokens` of
//! its output length. The runner reads the arrival offsets from
//! [`Workload::arrival_offsets`] (load mode `replay`).
//!
//! Scaling: the time scale divides the trace's clock (2 = twice as fast); the rate scale keeps
//! the clock and thins (below 1: each row is kept with that probability) or multiplies (above
//! 1: each row is sent ⌊r⌋ or ⌈r⌉ times, the copies spread evenly up to the next row's time)
//! the requests. Both are seeded. Offsets count from the earliest row.
//!
//! Shared blocks (Mooncake `hash_ids`): block `b` of a prompt is `block_tokens` tokens of text
//! drawn from a generator seeded by its hash id, so requests that share ids share exactly that
//! prefix; tokens beyond the listed blocks are unique to the request.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use serde_json::json;

use super::generated::stream;
use super::source::Loaded;
use super::trace::{TraceFormat, TraceRow};
use super::vocabulary::PromptVocabulary;
use super::{Workload, mix_seed};
use crate::backend::{RequestInput, RequestSpec};

const BLOCKS: u64 = 0x000b_10c5;
const THINNING: u64 = 0x7417;

/// Largest rate scale.
pub const MAX_RATE_SCALE: f64 = 1000.0;
/// Latest send offset of a replay (ten years; a trace spanning more is cut there).
pub const MAX_OFFSET: Duration = Duration::from_secs(10 * 365 * 86_400);

/// How to replay a trace.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReplayOptions {
    /// Trace seconds per real second (2 = twice as fast).
    pub time_scale: f64,
    /// Requests per trace request (0.5 = half of them, 2 = twice as many).
    pub rate_scale: f64,
    /// Tokens per hash block (Mooncake: 512).
    pub block_tokens: u32,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions {
            time_scale: 1.0,
            rate_scale: 1.0,
            block_tokens: 512,
        }
    }
}

impl ReplayOptions {
    /// Checks the factors, naming the flag to fix.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.time_scale.is_finite() && self.time_scale > 0.0) {
            return Err("--trace-time-scale: must be a positive number (2 = twice as fast)".into());
        }
        let rate_ok = self.rate_scale.is_finite() && self.rate_scale > 0.0;
        if !(rate_ok && self.rate_scale <= MAX_RATE_SCALE) {
            return Err(format!(
                "--trace-rate-scale: must be a positive number up to {MAX_RATE_SCALE} (2 = twice the \
                 requests)"
            ));
        }
        if self.block_tokens == 0 {
            return Err("--trace-block-tokens: must be at least 1".into());
        }
        Ok(())
    }
}

/// A trace, scheduled.
#[derive(Debug, Clone)]
pub struct TraceWorkload {
    rows: Vec<TraceRow>,
    /// Row of each request.
    schedule: Vec<u32>,
    offsets: Arc<[Duration]>,
    vocabulary: Arc<PromptVocabulary>,
    options: ReplayOptions,
    seed: u64,
    description: BTreeMap<String, serde_json::Value>,
}

impl TraceWorkload {
    /// Schedules `loaded` (rows in any order) with `options`.
    pub fn new(
        format: TraceFormat,
        loaded: Loaded<TraceRow>,
        options: ReplayOptions,
        vocabulary: Arc<PromptVocabulary>,
        seed: u64,
    ) -> Self {
        let mut rows = loaded.records;
        rows.sort_by_key(|row| row.at_us);
        let (schedule, offsets) = schedule(&rows, options, seed);
        let span = offsets.last().copied().unwrap_or_default();
        let description = BTreeMap::from([
            ("kind".to_string(), json!("trace")),
            ("path".to_string(), json!(loaded.path)),
            ("format".to_string(), json!(format.as_str())),
            ("rows".to_string(), json!(rows.len())),
            ("requests".to_string(), json!(schedule.len())),
            ("time_scale".to_string(), json!(options.time_scale)),
            ("rate_scale".to_string(), json!(options.rate_scale)),
            ("replay_secs".to_string(), json!(span.as_secs_f64())),
            ("skipped_invalid".to_string(), json!(loaded.skipped)),
            (
                "first_skipped".to_string(),
                json!(loaded.first_skipped.map(|e| e.to_string())),
            ),
            ("tokenizer".to_string(), json!(vocabulary.tokenizer())),
            ("seed".to_string(), json!(seed)),
        ]);
        let mut workload = TraceWorkload {
            rows,
            schedule,
            offsets: offsets.into(),
            vocabulary,
            options,
            seed,
            description,
        };
        if workload.rows.iter().any(|row| !row.hash_ids.is_empty()) {
            workload
                .description
                .insert("block_tokens".into(), json!(options.block_tokens));
        }
        workload
    }

    /// Requests in the replay.
    pub fn len(&self) -> usize {
        self.schedule.len()
    }

    /// Whether the replay sends nothing (a rate scale thinned every row away).
    pub fn is_empty(&self) -> bool {
        self.schedule.is_empty()
    }

    /// The prompt of `row` for request `index`.
    fn prompt(&self, row: &TraceRow, index: u64) -> String {
        let block = self.options.block_tokens;
        let mut left = row.input_tokens;
        let mut text = String::new();
        for &hash in &row.hash_ids {
            if left == 0 {
                break;
            }
            let take = left.min(block);
            let mut rng = stream(self.seed, BLOCKS, hash);
            if text.is_empty() {
                text = self.vocabulary.prompt(&mut rng, take);
            } else {
                text.push(' ');
                text.push_str(&self.vocabulary.continuation(&mut rng, take));
            }
            left -= take;
        }
        if left > 0 {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(mix_seed(self.seed, index));
            if text.is_empty() {
                text = self.vocabulary.prompt(&mut rng, left);
            } else {
                text.push(' ');
                text.push_str(&self.vocabulary.continuation(&mut rng, left));
            }
        }
        text
    }
}

/// The row of every request and its offset from the start of the replay.
fn schedule(rows: &[TraceRow], options: ReplayOptions, seed: u64) -> (Vec<u32>, Vec<Duration>) {
    let Some(first) = rows.first() else {
        return (Vec::new(), Vec::new());
    };
    let start = first.at_us;
    let options = if options.validate().is_ok() {
        options
    } else {
        ReplayOptions {
            block_tokens: options.block_tokens.max(1),
            ..ReplayOptions::default()
        }
    };
    let whole = options.rate_scale.floor();
    let fraction = options.rate_scale - whole;
    let mut schedule = Vec::with_capacity((rows.len() as f64 * options.rate_scale) as usize + 1);
    let mut offsets = Vec::with_capacity(schedule.capacity());
    for (i, row) in rows.iter().enumerate() {
        let extra = fraction > 0.0 && stream(seed, THINNING, i as u64).random::<f64>() < fraction;
        let copies = whole as u64 + u64::from(extra);
        let gap_us = rows.get(i + 1).map_or(0, |next| next.at_us - row.at_us) as f64;
        for copy in 0..copies {
            let trace_us = (row.at_us - start) as f64 + gap_us * copy as f64 / copies as f64;
            let offset = Duration::try_from_secs_f64(trace_us / 1e6 / options.time_scale);
            offsets.push(offset.map_or(MAX_OFFSET, |offset| offset.min(MAX_OFFSET)));
            schedule.push(u32::try_from(i).unwrap_or(u32::MAX));
        }
    }
    (schedule, offsets)
}

impl Workload for TraceWorkload {
    fn request(&self, index: u64) -> RequestSpec {
        let position = usize::try_from(index).unwrap_or(usize::MAX) % self.schedule.len().max(1);
        let Some(row) = self
            .schedule
            .get(position)
            .and_then(|&row| self.rows.get(row as usize))
        else {
            return RequestSpec {
                index,
                input: RequestInput::Text(String::new()),
                expected_input_tokens: None,
                max_output_tokens: None,
                turn: None,
                tags: Default::default(),
            };
        };
        RequestSpec {
            index,
            input: RequestInput::Text(self.prompt(row, index)),
            expected_input_tokens: Some(u64::from(row.input_tokens)),
            max_output_tokens: Some(u64::from(row.output_tokens)),
            turn: None,
            tags: Default::default(),
        }
    }

    fn describe(&self) -> BTreeMap<String, serde_json::Value> {
        self.description.clone()
    }

    fn arrival_offsets(&self) -> Option<Arc<[Duration]>> {
        Some(Arc::clone(&self.offsets))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::tokens::{Tiktoken, TokenCounter};

    fn row(line: usize, at_ms: u64, input: u32, hash_ids: &[u64]) -> TraceRow {
        TraceRow {
            line,
            at_us: at_ms * 1000,
            input_tokens: input,
            output_tokens: 7,
            hash_ids: hash_ids.to_vec(),
        }
    }

    fn workload(rows: Vec<TraceRow>, options: ReplayOptions) -> TraceWorkload {
        let loaded = Loaded {
            path: "t".into(),
            records: rows,
            skipped: 0,
            first_skipped: None,
        };
        TraceWorkload::new(
            TraceFormat::Mooncake,
            loaded,
            options,
            Arc::new(PromptVocabulary::cl100k()),
            5,
        )
    }

    #[test]
    fn offsets_follow_the_trace_scaled() {
        let rows = vec![
            row(1, 1000, 10, &[]),
            row(3, 3000, 10, &[]),
            row(2, 1500, 10, &[]),
        ];
        let options = ReplayOptions {
            time_scale: 2.0,
            ..ReplayOptions::default()
        };
        let replay = workload(rows, options);
        let offsets: Vec<u128> = replay
            .arrival_offsets()
            .unwrap()
            .iter()
            .map(|d| d.as_millis())
            .collect();
        assert_eq!(offsets, vec![0, 250, 1000]);
        assert_eq!(replay.request(1).max_output_tokens, Some(7));
    }

    #[test]
    fn rate_scale_multiplies_or_thins_requests() {
        let rows: Vec<TraceRow> = (0..1000).map(|i| row(i, i as u64 * 10, 5, &[])).collect();
        let double = workload(
            rows.clone(),
            ReplayOptions {
                rate_scale: 2.0,
                ..ReplayOptions::default()
            },
        );
        assert_eq!(double.len(), 2000);
        let offsets = double.arrival_offsets().unwrap();
        assert_eq!(
            offsets[1],
            Duration::from_millis(5),
            "copies spread up to the next row"
        );
        assert!(offsets.windows(2).all(|w| w[0] <= w[1]));
        let half = workload(
            rows,
            ReplayOptions {
                rate_scale: 0.5,
                ..ReplayOptions::default()
            },
        );
        assert!((450..550).contains(&half.len()), "{}", half.len());
    }

    #[test]
    fn shared_hash_ids_give_shared_prefixes_of_exact_length() {
        let options = ReplayOptions {
            block_tokens: 16,
            ..ReplayOptions::default()
        };
        let replay = workload(
            vec![row(1, 0, 40, &[1, 2, 3]), row(2, 5, 60, &[1, 2, 9])],
            options,
        );
        let counter = Tiktoken::cl100k();
        let text = |i| match replay.request(i).input {
            RequestInput::Text(text) => text,
            _ => panic!("text"),
        };
        let (a, b) = (text(0), text(1));
        assert_eq!(counter.count(&a), 40);
        assert_eq!(counter.count(&b), 60);
        let words = |s: &str| s.split(' ').map(str::to_string).collect::<Vec<_>>();
        let (a, b) = (words(&a), words(&b));
        assert_eq!(a[..32], b[..32], "two shared blocks of 16 tokens");
        assert_ne!(a[32..40], b[32..40]);
    }
}
