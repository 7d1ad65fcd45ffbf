//! Multi-turn and agentic sessions (`steps[].sessions`) and prefix reuse
//! (`steps[].prefix_reuse`): per-session duration and turns, tool-result turns, how long the
//! context grew, and the prompt tokens the workload expected the server to reuse beside those
//! the server said it served from its cache. Definitions in `docs/metrics.md` §20.

use std::collections::HashMap;
use std::time::Duration;

use super::aggregate::{count_stats, latency_stats};
use super::histogram::{CountHistogram, LatencyHistogram};
use crate::record::RequestRecord;
pub use crate::report::channels::{PrefixReuseReport, SessionReport};

#[derive(Debug, Clone, Copy, Default)]
struct Session {
    first_scheduled_us: u64,
    last_end_us: u64,
    turns: u64,
    failed: bool,
    last_turn: u32,
    last_input: u64,
}

/// Accumulates sessions and prefix reuse over a step's measured requests.
#[derive(Debug, Clone, Default)]
pub struct SessionAggregator {
    sessions: HashMap<u64, Session>,
    turns: u64,
    tool_results: u64,
    reuse: PrefixReuseReport,
}

impl SessionAggregator {
    /// Folds in a measured request (failed ones included).
    pub fn add(&mut self, record: &RequestRecord) {
        if record.is_ok() {
            self.add_reuse(record);
        }
        let Some(id) = record.session else { return };
        self.turns += 1;
        self.tool_results += u64::from(record.tool_result_turn);
        let session = self.sessions.entry(id).or_insert(Session {
            first_scheduled_us: record.scheduled_us,
            ..Session::default()
        });
        session.first_scheduled_us = session.first_scheduled_us.min(record.scheduled_us);
        session.last_end_us = session.last_end_us.max(record.end_us);
        session.turns += 1;
        session.failed |= !record.is_ok();
        let turn = record.turn.unwrap_or(0);
        if turn >= session.last_turn {
            session.last_turn = turn;
            session.last_input = record
                .expected_input_tokens
                .or(record.input_tokens)
                .unwrap_or(0);
        }
    }

    fn add_reuse(&mut self, record: &RequestRecord) {
        let r = &mut self.reuse;
        if let Some(expected) = record.expected_input_tokens {
            r.requests += 1;
            r.expected_input_tokens_total += expected;
            r.expected_shareable_tokens_total += record.expected_prefix_tokens.unwrap_or(0);
        }
        if let Some(cached) = record.cached_input_tokens {
            r.requests_reporting_cached += 1;
            r.reported_input_tokens_total += record.input_tokens.unwrap_or(0);
            r.cached_tokens_total += cached;
        }
    }

    /// The session report (`None` without sessions) and the prefix-reuse report (`None` when
    /// the workload expected no reuse and the server reported no cached tokens).
    pub fn report(&self) -> (Option<SessionReport>, Option<PrefixReuseReport>) {
        let sessions = (!self.sessions.is_empty()).then(|| {
            let (mut durations, mut turns, mut context) = (
                LatencyHistogram::default(),
                CountHistogram::default(),
                CountHistogram::default(),
            );
            for session in self.sessions.values() {
                let span = session
                    .last_end_us
                    .saturating_sub(session.first_scheduled_us);
                durations.record(Duration::from_micros(span));
                turns.record(session.turns);
                context.record(session.last_input);
            }
            SessionReport {
                sessions: self.sessions.len() as u64,
                sessions_without_failure: self.sessions.values().filter(|s| !s.failed).count()
                    as u64,
                turns: self.turns,
                tool_result_turns: self.tool_results,
                session_duration_ms: latency_stats(&durations),
                turns_per_session: count_stats(&turns),
                final_context_tokens: count_stats(&context),
            }
        });
        let r = &self.reuse;
        let fraction = |part: u64, whole: u64| (whole > 0).then(|| part as f64 / whole as f64);
        let reuse = (r.expected_shareable_tokens_total > 0 || r.requests_reporting_cached > 0)
            .then(|| PrefixReuseReport {
                expected_shareable_fraction: fraction(
                    r.expected_shareable_tokens_total,
                    r.expected_input_tokens_total,
                ),
                cached_fraction: fraction(r.cached_tokens_total, r.reported_input_tokens_total),
                ..r.clone()
            });
        (sessions, reuse)
    }
}
