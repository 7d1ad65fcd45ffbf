//! Reasoning and tool-call figures of a step (`steps[].reasoning`, `steps[].tool_calls`):
//! reasoning vs answer tokens, time to first answer token, thinking time, answers emptied or
//! cut by the thinking budget, tool calls and how answers ended. Definitions in
//! `docs/metrics.md` §19.

use super::aggregate::{count_stats, latency_stats};
use super::histogram::{CountHistogram, LatencyHistogram};
use crate::record::{ReasoningSource, RequestRecord};
pub use crate::report::channels::{ReasoningReport, ToolCallReport};

/// Accumulates the reasoning and tool-call figures of one step.
#[derive(Debug, Clone, Default)]
pub struct ChannelAggregator {
    completed: u64,
    with_reasoning: u64,
    from_usage: u64,
    reasoning_total: u64,
    answer_total: u64,
    reasoning: CountHistogram,
    answer: CountHistogram,
    ttfat: LatencyHistogram,
    ttfat_from_send: LatencyHistogram,
    thinking: LatencyHistogram,
    /// Completed streamed requests with no answer token (for `ttfat` objectives).
    no_answer: u64,
    empty: u64,
    truncated: u64,
    with_tools: u64,
    ended_in_tool_call: u64,
    tool_calls: u64,
    tool_tokens: u64,
    ttftc: LatencyHistogram,
    /// Audio sent and produced.
    audio: super::audio::AudioAggregator,
}

impl ChannelAggregator {
    /// Folds in a completed measured request.
    pub fn add(&mut self, record: &RequestRecord) {
        self.completed += 1;
        self.audio.add(record);
        let answer = record.answer_tokens();
        self.answer_total += answer;
        self.answer.record(answer);
        if let Some(reasoning) = record.reasoning_tokens.filter(|r| *r > 0) {
            self.with_reasoning += 1;
            self.from_usage +=
                u64::from(record.reasoning_tokens_source == Some(ReasoningSource::Usage));
            self.reasoning_total += reasoning;
            self.reasoning.record(reasoning);
        }
        let timed = [
            (&mut self.ttfat, record.ttfat()),
            (&mut self.ttfat_from_send, record.ttfat_from_send()),
            (&mut self.thinking, record.thinking_time()),
            (&mut self.ttftc, record.time_to_first_tool_call()),
        ];
        for (histogram, value) in timed {
            if let Some(value) = value {
                histogram.record(value);
            }
        }
        self.no_answer += u64::from(record.streamed && record.first_answer_us.is_none());
        self.empty += u64::from(record.answer_empty_after_reasoning());
        self.truncated += u64::from(record.answer_truncated_after_reasoning());
        if record.tool_calls > 0 {
            self.with_tools += 1;
            self.tool_calls += u64::from(record.tool_calls);
            self.tool_tokens += record.tool_call_tokens.unwrap_or(0);
        }
        self.ended_in_tool_call += u64::from(record.ended_in_tool_call);
    }

    /// The audio figures, from the step's completed requests/s.
    pub fn audio(&self, requests_per_sec: f64) -> Option<super::audio::AudioReport> {
        self.audio.report(requests_per_sec)
    }

    /// Time to first answer token from the schedule, over completed measured requests.
    pub fn ttfat(&self) -> &LatencyHistogram {
        &self.ttfat
    }

    /// Completed streamed requests that never produced an answer token.
    pub fn no_answer(&self) -> u64 {
        self.no_answer
    }

    /// The reports, each `None` when no completed request showed its channel; token rates
    /// share out the step's `output_tokens_per_sec`.
    pub fn report(
        &self,
        output_tokens_per_sec: f64,
    ) -> (Option<ReasoningReport>, Option<ToolCallReport>) {
        let output = self.reasoning_total + self.answer_total;
        let share = |tokens: u64| {
            if output == 0 {
                0.0
            } else {
                output_tokens_per_sec * tokens as f64 / output as f64
            }
        };
        let reasoning = (self.with_reasoning > 0).then(|| ReasoningReport {
            requests_with_reasoning: self.with_reasoning,
            reasoning_from_usage: self.from_usage,
            reasoning_tokens_total: self.reasoning_total,
            answer_tokens_total: self.answer_total,
            reasoning_tokens_per_request: count_stats(&self.reasoning),
            answer_tokens_per_request: count_stats(&self.answer),
            reasoning_tokens_per_sec: share(self.reasoning_total),
            answer_tokens_per_sec: share(self.answer_total),
            time_to_first_answer_ms: latency_stats(&self.ttfat),
            time_to_first_answer_from_send_ms: latency_stats(&self.ttfat_from_send),
            thinking_ms: latency_stats(&self.thinking),
            empty_answers: self.empty,
            truncated_answers: self.truncated,
        });
        let tools = (self.with_tools > 0).then(|| ToolCallReport {
            requests_with_tool_calls: self.with_tools,
            ended_in_tool_call: self.ended_in_tool_call,
            ended_in_text: self.completed - self.ended_in_tool_call,
            tool_calls: self.tool_calls,
            tool_call_tokens_total: self.tool_tokens,
            time_to_first_tool_call_ms: latency_stats(&self.ttftc),
        });
        (reasoning, tools)
    }
}
