//! The terminal summary's workload sections: key figures per prompt-length bucket, per turn
//! index and per image-resolution bucket, and what the workload asked for (realised prompt and
//! answer lengths); and per model, adapter and SLO class of a mix and per target and replica
//! of a fleet (shown without `--details` too: a mix or a fleet is what such a run is about).

use std::fmt::Write as _;

use goodput_core::report::{
    CountStats, GenerationReport, ImageBucketReport, SliceMetrics, StepReport,
};

/// Appends the workload sections of `step` to `out`.
pub(crate) fn render(out: &mut String, step: &StepReport) {
    let header = header();
    let buckets: Vec<_> = step
        .buckets
        .iter()
        .filter(|b| b.metrics.requests.scheduled > 0)
        .collect();
    if !buckets.is_empty() {
        let _ = writeln!(out, "\nBy prompt length (tokens) {header}");
        for bucket in buckets {
            let range = match bucket.max_input_tokens {
                Some(max) => format!("{}-{max}", bucket.min_input_tokens),
                None => format!("{}+", bucket.min_input_tokens),
            };
            row(out, &format!("{} ({range})", bucket.name), &bucket.metrics);
        }
    }
    if !step.turns.is_empty() {
        let _ = writeln!(out, "\n{:<26}{header}", "By turn");
        for turn in &step.turns {
            let later = if turn.and_later { "+" } else { "" };
            row(out, &format!("turn {}{later}", turn.turn), &turn.metrics);
        }
    }
    let w = &step.workload_stats;
    if w.requests > 0 {
        let sessions = w
            .sessions
            .map(|n| format!(" · {n} sessions"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "\nWorkload asked: prompts {} tokens · answers {} tokens{sessions}",
            lengths(&w.input_tokens),
            lengths(&w.output_tokens)
        );
    }
}

/// Per model, per adapter, per fleet target, per replica and per SLO class (each class's
/// goodput under its own SLO).
pub(crate) fn render_labels(out: &mut String, step: &StepReport) {
    let header = header();
    let sections = [
        ("By model", &step.models),
        ("By adapter", &step.adapters),
        ("By target", &step.targets),
        ("By replica", &step.replicas),
    ];
    for (title, rows) in sections {
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(out, "\n{title:<26}{header}");
        for label in rows {
            row(out, &label.name, &label.metrics);
        }
    }
    render_replica_servers(out, step);
    if !step.classes.is_empty() {
        let _ = writeln!(out, "\n{:<26}{header}", "By SLO class");
        for class in &step.classes {
            let slo = class.slo.as_deref().unwrap_or("the run's SLO");
            row(out, &format!("{} ({slo})", class.name), &class.metrics);
        }
    }
}

/// What each target of a fleet counted on its own `/metrics` over the step.
fn render_replica_servers(out: &mut String, step: &StepReport) {
    let servers: Vec<_> = step
        .targets
        .iter()
        .filter_map(|t| Some((&t.name, t.server.as_ref()?)))
        .collect();
    if servers.is_empty() {
        return;
    }
    let _ = writeln!(out, "\nEach target's own /metrics over the step");
    let count = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    for (name, server) in servers {
        let problem = server
            .problem
            .as_deref()
            .map(|p| format!(" ({p})"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  {name:<24}{} requests finished · {} prompt tokens · {} generated{problem}",
            count(server.requests_finished),
            count(server.prompt_tokens),
            count(server.generation_tokens),
        );
    }
}

/// The columns of a breakdown's rows.
fn header() -> String {
    format!(
        "{:>7}{:>9}{:>11}{:>11}{:>10}{:>10}{:>10}{:>10}{:>9}",
        "n",
        "req/s",
        "in tok/s",
        "out tok/s",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "E2E p99",
        "good %"
    )
}

/// Vision prompts: requests, throughput and latency per resolution bucket (shown without
/// `--details` too: it is what a vision run is about).
pub(crate) fn render_images(out: &mut String, buckets: &[ImageBucketReport]) {
    if buckets.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n{:<26}{:>7}{:>7}{:>8}{:>9}{:>9}{:>10}{:>10}{:>10}{:>10}",
        "By image resolution",
        "ok",
        "failed",
        "images",
        "req/s",
        "img/s",
        "TTFT p50",
        "TTFT p99",
        "E2E p50",
        "E2E p99"
    );
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    for b in buckets {
        let (m, l) = (&b.metrics, &b.metrics.latency_ms);
        let _ = writeln!(
            out,
            "  {:<24}{:>7}{:>7}{:>8}{:>9.2}{:>9.2}{:>10}{:>10}{:>10}{:>10}",
            b.resolution,
            m.requests.completed,
            m.requests.failed,
            b.images,
            m.throughput.requests_per_sec,
            b.images_per_sec,
            opt(l.ttft.p50),
            opt(l.ttft.p99),
            opt(l.e2e.p50),
            opt(l.e2e.p99)
        );
    }
}

/// Image generation: one row per size and step count asked for (shown without `--details`:
/// the breakdown is what `--image-size`/`--image-steps` ask for).
pub(crate) fn render_generation(out: &mut String, settings: &[GenerationReport]) {
    if settings.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n{:<26}{:>7}{:>7}{:>8}{:>9}{:>9}{:>11}{:>11}{:>10}{:>10}",
        "By image size and steps",
        "ok",
        "failed",
        "images",
        "req/s",
        "img/s",
        "ms/img p50",
        "ms/img p99",
        "E2E p50",
        "E2E p99"
    );
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    for g in settings {
        let (m, l) = (&g.metrics, &g.metrics.latency_ms);
        let size = g.size.as_deref().unwrap_or("default");
        let steps = g.steps.map_or("default".to_string(), |s| s.to_string());
        let _ = writeln!(
            out,
            "  {:<24}{:>7}{:>7}{:>8}{:>9.2}{:>9.2}{:>11}{:>11}{:>10}{:>10}",
            format!("{size}, {steps} steps"),
            m.requests.completed,
            m.requests.failed,
            g.images,
            m.throughput.requests_per_sec,
            m.throughput.items_per_sec,
            opt(l.e2e_per_item.p50),
            opt(l.e2e_per_item.p99),
            opt(l.e2e.p50),
            opt(l.e2e.p99)
        );
    }
}

fn row(out: &mut String, label: &str, m: &SliceMetrics) {
    let opt = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.1}"));
    let t = &m.throughput;
    let good = m
        .goodput
        .attained_fraction
        .map_or("-".to_string(), |f| format!("{:.1}", f * 100.0));
    let _ = writeln!(
        out,
        "  {label:<24}{:>7}{:>9.2}{:>11.1}{:>11.1}{:>10}{:>10}{:>10}{:>10}{:>9}",
        m.requests.scheduled,
        t.requests_per_sec,
        t.input_tokens_per_sec,
        t.output_tokens_per_sec,
        opt(m.latency_ms.ttft.p50),
        opt(m.latency_ms.ttft.p99),
        opt(m.latency_ms.tpot.p50),
        opt(m.latency_ms.e2e.p99),
        good
    );
}

fn lengths(stats: &CountStats) -> String {
    let count = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
    match stats.mean {
        Some(mean) => format!(
            "mean {mean:.0} · p50 {} · p99 {}",
            count(stats.p50),
            count(stats.p99)
        ),
        None => "-".to_string(),
    }
}
