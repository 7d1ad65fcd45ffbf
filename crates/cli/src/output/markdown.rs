//! `summary.md`: the report's key figures as Markdown tables, for pasting into a review —
//! image-resolution buckets, audio (seconds sent or produced, real-time factor), reasoning,
//! tool calls, sessions and prefix reuse included when the run had them.

use std::fmt::Write as _;

use goodput_core::report::{LatencyStats, Report, StepReport};

fn cell(value: Option<f64>, decimals: usize) -> String {
    value.map_or("–".to_string(), |v| format!("{v:.decimals$}"))
}

/// The Markdown summary of a report.
pub(crate) fn summary(report: &Report) -> String {
    let mut out = String::new();
    heading(&mut out, report);
    if let Some(tune) = &report.tune {
        super::tune::markdown(&mut out, tune);
        return out;
    }
    let _ = writeln!(
        out,
        "| step | load | window s | offered req/s | req/s | {}/s | input tok/s | output tok/s | goodput req/s | SLO met | completed | failed | queue |",
        report.run.item_unit
    );
    let _ = writeln!(out, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|");
    for (i, step) in report.steps.iter().enumerate() {
        step_row(&mut out, i, step);
    }
    let _ = writeln!(
        out,
        "\nLatency, ms, from the scheduled send (TTFT/E2E include client-side queueing):\n"
    );
    let _ = writeln!(
        out,
        "| step | metric | mean | p50 | p90 | p95 | p99 | p99.9 | max | n |"
    );
    let _ = writeln!(out, "|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|");
    for (i, step) in report.steps.iter().enumerate() {
        let l = &step.latency_ms;
        for (name, stats) in [
            ("TTFT", &l.ttft),
            ("TPOT", &l.tpot),
            ("ITL", &l.itl),
            ("E2E", &l.e2e),
            ("E2E per item", &l.e2e_per_item),
        ] {
            latency_row(&mut out, i, name, stats);
        }
    }
    images(&mut out, report);
    generation(&mut out, report);
    audio(&mut out, report);
    channels(&mut out, report);
    if !report.warnings.is_empty() {
        let _ = writeln!(out, "\n**Warnings**\n");
        for w in &report.warnings {
            let _ = writeln!(out, "- `{}`: {} — *{}*", w.code, w.message, w.fix);
        }
    }
    out
}

/// Vision prompts: one row per step and resolution bucket.
fn images(out: &mut String, report: &Report) {
    if report.steps.iter().all(|s| s.image_buckets.is_empty()) {
        return;
    }
    let _ = writeln!(
        out,
        "\nBy image resolution (latency ms from the scheduled send):\n"
    );
    let _ = writeln!(
        out,
        "| step | resolution | completed | failed | images | req/s | images/s | TTFT p50 | TTFT p99 | E2E p50 | E2E p99 |"
    );
    let _ = writeln!(out, "|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    for (i, step) in report.steps.iter().enumerate() {
        for b in &step.image_buckets {
            let (m, l) = (&b.metrics, &b.metrics.latency_ms);
            let _ = writeln!(
                out,
                "| {i} | {} | {} | {} | {} | {:.2} | {:.2} | {} | {} | {} | {} |",
                b.resolution,
                m.requests.completed,
                m.requests.failed,
                b.images,
                m.throughput.requests_per_sec,
                b.images_per_sec,
                cell(l.ttft.p50, 1),
                cell(l.ttft.p99, 1),
                cell(l.e2e.p50, 1),
                cell(l.e2e.p99, 1)
            );
        }
    }
}

/// Image generation: one row per step, size and step count asked for.
fn generation(out: &mut String, report: &Report) {
    if report.steps.iter().all(|s| s.image_settings.is_empty()) {
        return;
    }
    let _ = writeln!(
        out,
        "\nBy image size and steps (latency ms from the scheduled send; per image: E2E ÷ images):\n"
    );
    let _ = writeln!(
        out,
        "| step | size | steps | completed | failed | images | req/s | images/s | per image p50 | per image p99 | E2E p50 | E2E p99 |"
    );
    let _ = writeln!(out, "|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    for (i, step) in report.steps.iter().enumerate() {
        for g in &step.image_settings {
            let (m, l) = (&g.metrics, &g.metrics.latency_ms);
            let _ = writeln!(
                out,
                "| {i} | {} | {} | {} | {} | {} | {:.2} | {:.2} | {} | {} | {} | {} |",
                g.size.as_deref().unwrap_or("default"),
                g.steps.map_or("default".to_string(), |s| s.to_string()),
                m.requests.completed,
                m.requests.failed,
                g.images,
                m.throughput.requests_per_sec,
                m.throughput.items_per_sec,
                cell(l.e2e_per_item.p50, 1),
                cell(l.e2e_per_item.p99, 1),
                cell(l.e2e.p50, 1),
                cell(l.e2e.p99, 1)
            );
        }
    }
}

/// The audio APIs: one row per step with audio (as the terminal's and report.html's audio
/// figures).
fn audio(out: &mut String, report: &Report) {
    if report.steps.iter().all(|s| s.audio.is_none()) {
        return;
    }
    let _ = writeln!(
        out,
        "\nAudio (real-time factor: E2E from send ÷ audio seconds):\n"
    );
    let _ = writeln!(
        out,
        "| step | requests | audio s in | audio s out | audio s in/s | audio s out/s | RTF mean | RTF p50 | RTF p95 | RTF p99 | RTF max |"
    );
    let _ = writeln!(out, "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
    for (i, step) in report.steps.iter().enumerate() {
        let Some(a) = &step.audio else {
            continue;
        };
        let r = &a.real_time_factor;
        let _ = writeln!(
            out,
            "| {i} | {} | {:.2} | {:.2} | {:.3} | {:.3} | {} | {} | {} | {} | {} |",
            a.requests,
            a.input_seconds_total,
            a.output_seconds_total,
            a.input_seconds_per_sec,
            a.output_seconds_per_sec,
            cell(r.mean, 3),
            cell(r.p50, 3),
            cell(r.p95, 3),
            cell(r.p99, 3),
            cell(r.max, 3)
        );
    }
}

/// Reasoning, tool calls, sessions and prefix reuse: one table each, for the steps that have
/// them (as the terminal's `--details`).
fn channels(out: &mut String, report: &Report) {
    let steps = || report.steps.iter().enumerate();
    if steps().any(|(_, s)| s.reasoning.is_some()) {
        let _ = writeln!(
            out,
            "\nReasoning (TTFAT: time to first answer token, ms from the scheduled send):\n"
        );
        let _ = writeln!(
            out,
            "| step | with reasoning | reasoning tok | answer tok | reasoning tok/s | answer tok/s | TTFAT p50 | TTFAT p99 | thinking p50 | empty answers | truncated |"
        );
        let _ = writeln!(out, "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
        for (i, r) in steps().filter_map(|(i, s)| Some((i, s.reasoning.as_ref()?))) {
            let t = &r.time_to_first_answer_ms;
            let _ = writeln!(
                out,
                "| {i} | {} | {} | {} | {:.1} | {:.1} | {} | {} | {} | {} | {} |",
                r.requests_with_reasoning,
                r.reasoning_tokens_total,
                r.answer_tokens_total,
                r.reasoning_tokens_per_sec,
                r.answer_tokens_per_sec,
                cell(t.p50, 1),
                cell(t.p99, 1),
                cell(r.thinking_ms.p50, 1),
                r.empty_answers,
                r.truncated_answers
            );
        }
    }
    if steps().any(|(_, s)| s.tool_calls.is_some()) {
        let _ = writeln!(out, "\nTool calls:\n");
        let _ = writeln!(
            out,
            "| step | requests calling | calls | call tokens | ended in a tool call | ended in text | first tool call p50 ms | p99 ms |"
        );
        let _ = writeln!(out, "|--:|--:|--:|--:|--:|--:|--:|--:|");
        for (i, t) in steps().filter_map(|(i, s)| Some((i, s.tool_calls.as_ref()?))) {
            let first = &t.time_to_first_tool_call_ms;
            let _ = writeln!(
                out,
                "| {i} | {} | {} | {} | {} | {} | {} | {} |",
                t.requests_with_tool_calls,
                t.tool_calls,
                t.tool_call_tokens_total,
                t.ended_in_tool_call,
                t.ended_in_text,
                cell(first.p50, 1),
                cell(first.p99, 1)
            );
        }
    }
    sessions(out, report);
}

fn sessions(out: &mut String, report: &Report) {
    let percent = |f: Option<f64>| f.map_or("–".to_string(), |f| format!("{:.1} %", f * 100.0));
    let steps = || report.steps.iter().enumerate();
    if steps().any(|(_, s)| s.sessions.is_some()) {
        let _ = writeln!(out, "\nSessions:\n");
        let _ = writeln!(
            out,
            "| step | sessions | without failure | turns | tool results | turns/session | duration p50 ms | p99 ms | final context max |"
        );
        let _ = writeln!(out, "|--:|--:|--:|--:|--:|--:|--:|--:|--:|");
        for (i, s) in steps().filter_map(|(i, s)| Some((i, s.sessions.as_ref()?))) {
            let _ = writeln!(
                out,
                "| {i} | {} | {} | {} | {} | {} | {} | {} | {} |",
                s.sessions,
                s.sessions_without_failure,
                s.turns,
                s.tool_result_turns,
                cell(s.turns_per_session.mean, 1),
                cell(s.session_duration_ms.p50, 1),
                cell(s.session_duration_ms.p99, 1),
                s.final_context_tokens
                    .max
                    .map_or("–".to_string(), |m| m.to_string())
            );
        }
    }
    if steps().any(|(_, s)| s.prefix_reuse.is_some()) {
        let _ = writeln!(
            out,
            "\nPrefix reuse (expected by the workload vs cached by the server):\n"
        );
        let _ = writeln!(
            out,
            "| step | expected shareable tok | of prompt tok | expected % | cached tok | of reported tok | cached % |"
        );
        let _ = writeln!(out, "|--:|--:|--:|--:|--:|--:|--:|");
        for (i, r) in steps().filter_map(|(i, s)| Some((i, s.prefix_reuse.as_ref()?))) {
            let _ = writeln!(
                out,
                "| {i} | {} | {} | {} | {} | {} | {} |",
                r.expected_shareable_tokens_total,
                r.expected_input_tokens_total,
                percent(r.expected_shareable_fraction),
                r.cached_tokens_total,
                r.reported_input_tokens_total,
                percent(r.cached_fraction)
            );
        }
    }
}

fn step_row(out: &mut String, i: usize, step: &StepReport) {
    let t = &step.throughput;
    let g = &step.goodput;
    let load = match (step.load.concurrency, step.load.rate_per_sec) {
        (Some(c), _) => format!("closed, concurrency {c}"),
        (None, Some(r)) => format!("open, {r:.2} req/s"),
        _ => step.load.mode.clone(),
    };
    let _ = writeln!(
        out,
        "| {i} | {load} | {:.1} | {} | {:.2} | {:.2} | {:.1} | {:.1} | {} | {} | {} | {} | {} |",
        step.duration_secs,
        cell(t.offered_requests_per_sec, 2),
        t.requests_per_sec,
        t.items_per_sec,
        t.input_tokens_per_sec,
        t.output_tokens_per_sec,
        cell(g.requests_per_sec, 2),
        g.attained_fraction
            .map_or("–".to_string(), |f| format!("{:.1} %", f * 100.0)),
        step.requests.completed,
        step.requests.failed,
        match step.stability.verdict {
            goodput_core::metrics::stability::Verdict::Unstable => "**unstable**",
            verdict => verdict.as_str(),
        }
    );
}

fn latency_row(out: &mut String, step: usize, name: &str, s: &LatencyStats) {
    let _ = writeln!(
        out,
        "| {step} | {name} | {} | {} | {} | {} | {} | {} | {} | {} |",
        cell(s.mean, 1),
        cell(s.p50, 1),
        cell(s.p90, 1),
        cell(s.p95, 1),
        cell(s.p99, 1),
        cell(s.p999, 1),
        cell(s.max, 1),
        s.count
    );
}

fn heading(out: &mut String, report: &Report) {
    let run = &report.run;
    let _ = writeln!(out, "## goodput: {} on {}\n", run.model, run.target);
    let _ = writeln!(
        out,
        "{} API, {} · started {} · seed {} · goodput {}{} · ended: {}\n",
        run.api,
        if run.stream {
            "streamed"
        } else {
            "not streamed"
        },
        run.started_at,
        run.seed,
        report.tool.version,
        report
            .tool
            .git_sha
            .as_deref()
            .map(|s| format!(" ({s})"))
            .unwrap_or_default(),
        run.end_reason
    );
    if !run.tags.is_empty() {
        let tags: Vec<String> = run.tags.iter().map(|(k, v)| format!("`{k}={v}`")).collect();
        let _ = writeln!(out, "Tags: {}\n", tags.join(" "));
    }
}
