//! Terminal lines for reasoning models, tool calls and agentic sessions: reasoning vs answer
//! tokens, time to first answer token, answers emptied by the thinking budget, tool calls and
//! how answers ended, per-session figures and the prefix reuse expected vs reported; the audio
//! APIs' audio seconds per second and real-time factor.

use std::fmt::Write;

use goodput_core::report::{LatencyStats, StepReport};

fn ms(value: Option<f64>) -> String {
    value.map_or_else(|| "—".to_string(), |v| format!("{v:.1}"))
}

fn stats(stats: &LatencyStats) -> String {
    format!(
        "mean {} · p50 {} · p99 {} · max {} ms (n {})",
        ms(stats.mean),
        ms(stats.p50),
        ms(stats.p99),
        ms(stats.max),
        stats.count
    )
}

/// The step's audio line (nothing without audio): audio seconds sent or produced per second
/// and the real-time factor.
pub(crate) fn render_audio(out: &mut String, step: &StepReport) {
    let Some(a) = &step.audio else {
        return;
    };
    let f = |v: Option<f64>| v.map_or_else(|| "—".to_string(), |v| format!("{v:.3}"));
    let rtf = &a.real_time_factor;
    let rates = [
        (a.input_seconds_total, a.input_seconds_per_sec, "processed"),
        (a.output_seconds_total, a.output_seconds_per_sec, "produced"),
    ];
    for (total, per_sec, what) in rates.into_iter().filter(|(total, _, _)| *total > 0.0) {
        let _ = writeln!(
            out,
            "\nAudio: {total:.1} s {what} by {} requests · {per_sec:.2} audio s/s",
            a.requests
        );
    }
    let _ = writeln!(
        out,
        "  real-time factor (E2E from send ÷ audio): mean {} · p50 {} · p95 {} · p99 {} (n {})",
        f(rtf.mean),
        f(rtf.p50),
        f(rtf.p95),
        f(rtf.p99),
        rtf.count
    );
}

/// The step's reasoning and tool-call lines (nothing when it had neither).
pub(crate) fn render(out: &mut String, step: &StepReport) {
    if let Some(r) = &step.reasoning {
        let _ = writeln!(
            out,
            "\nReasoning: {} requests thought ({} counted by the server's usage) · reasoning {:.2} tok/s · answer {:.2} tok/s",
            r.requests_with_reasoning,
            r.reasoning_from_usage,
            r.reasoning_tokens_per_sec,
            r.answer_tokens_per_sec
        );
        let _ = writeln!(
            out,
            "  tokens per request: reasoning {} · answer {} (mean)",
            ms(r.reasoning_tokens_per_request.mean),
            ms(r.answer_tokens_per_request.mean)
        );
        let _ = writeln!(
            out,
            "  time to first answer token: {}",
            stats(&r.time_to_first_answer_ms)
        );
        let _ = writeln!(out, "  thinking time: {}", stats(&r.thinking_ms));
        if r.empty_answers + r.truncated_answers > 0 {
            let _ = writeln!(
                out,
                "  {} answers empty, {} cut at max_tokens after thinking",
                r.empty_answers, r.truncated_answers
            );
        }
    }
    if let Some(t) = &step.tool_calls {
        let _ = writeln!(
            out,
            "\nTool calls: {} requests called a tool ({} calls, {} tokens) · ended in a tool call {} · in text {}",
            t.requests_with_tool_calls,
            t.tool_calls,
            t.tool_call_tokens_total,
            t.ended_in_tool_call,
            t.ended_in_text
        );
        let _ = writeln!(
            out,
            "  time to first tool call: {}",
            stats(&t.time_to_first_tool_call_ms)
        );
    }
}

fn percent(value: Option<f64>) -> String {
    value.map_or_else(|| "—".to_string(), |v| format!("{:.1} %", 100.0 * v))
}

/// The step's session and prefix-reuse lines (nothing without them).
pub(crate) fn render_sessions(out: &mut String, step: &StepReport) {
    if let Some(s) = &step.sessions {
        let _ = writeln!(
            out,
            "\nSessions: {} ({} without a failed turn) · {} turns, {} tool results · turns per session {} (mean)",
            s.sessions,
            s.sessions_without_failure,
            s.turns,
            s.tool_result_turns,
            ms(s.turns_per_session.mean)
        );
        let _ = writeln!(out, "  session duration: {}", stats(&s.session_duration_ms));
        let _ = writeln!(
            out,
            "  final context: mean {} · max {} tokens",
            ms(s.final_context_tokens.mean),
            s.final_context_tokens
                .max
                .map_or_else(|| "—".to_string(), |v| v.to_string())
        );
    }
    if let Some(r) = &step.prefix_reuse {
        let server = step
            .server
            .as_ref()
            .and_then(|server| server.measurement.prefix_cache_hit_rate);
        let _ = writeln!(
            out,
            "\nPrefix reuse: expected {} of prompt tokens re-sent ({} of {}) · usage cached {} ({} requests reporting) · server hit rate {}",
            percent(r.expected_shareable_fraction),
            r.expected_shareable_tokens_total,
            r.expected_input_tokens_total,
            percent(r.cached_fraction),
            r.requests_reporting_cached,
            percent(server)
        );
    }
}
