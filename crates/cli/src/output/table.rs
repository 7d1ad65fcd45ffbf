//! The terminal summary: what was measured, under which load, with units and scope on every
//! figure — on one screen by default (load, throughput, latency table, goodput, stability,
//! server agreement, client overhead, warnings); with `--details` also the latency from the
//! actual send, per-channel, per-session and per-bucket figures, degrading trends, the server's
//! gauges and histograms, utilisation with formulas, speculative decoding and cost. `--format
//! json|markdown` prints the report or its Markdown tables instead.

use std::fmt::Write as _;
use std::io::Write;

use anyhow::{Context, Result};
use goodput_core::report::{LatencyStats, LoadReport, Report, StepReport};

use crate::options::run::SummaryFormat;

/// Prints the report on stdout in `format` (the text summary with or without `details`).
pub(crate) fn print_report(report: &Report, format: SummaryFormat, details: bool) -> Result<()> {
    let text = match format {
        SummaryFormat::Json => return super::json::print_report(report),
        SummaryFormat::Markdown => super::markdown::summary(report),
        SummaryFormat::Text => {
            super::color::paint(&render(report, details), super::color::stdout_enabled())
        }
    };
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .context("writing to stdout")
}

/// A multi-step run's overview, then its knee, capacity verdict or figures across runs.
fn render_decisions(out: &mut String, report: &Report) {
    super::steps::render_overview(out, report);
    if let Some(sweep) = &report.sweep {
        super::steps::render_sweep(out, sweep, &report.run.item_unit);
    }
    if let Some(capacity) = &report.capacity {
        super::steps::render_capacity(out, capacity);
    }
    if let Some(repeats) = &report.repeats {
        super::repeats::render(out, repeats);
    }
}

/// The summary as text: one screen, or everything with `details`.
pub(crate) fn render(report: &Report, details: bool) -> String {
    let mut out = String::new();
    let run = &report.run;
    let _ = writeln!(
        out,
        "goodput {} · {} · model {} · {} API, {}",
        report.tool.version,
        run.target,
        run.model,
        run.api,
        if run.stream {
            "streamed"
        } else {
            "not streamed"
        }
    );
    if let Some(tune) = &report.tune {
        super::tune::render(&mut out, tune, details);
        return out;
    }
    if report.steps.len() > 1 || report.sweep.is_some() || report.capacity.is_some() {
        render_decisions(&mut out, report);
        // With --details, the last step stands in when no step is featured (no load passed).
        let last = report.steps.len().checked_sub(1).filter(|_| details);
        if let Some(index) = super::steps::featured_step(report).or(last) {
            let _ = writeln!(
                out,
                "\nStep {} in detail (every step is in report.json)",
                index + 1
            );
            render_step(
                &mut out,
                &report.steps[index],
                &report.run.item_unit,
                details,
            );
        }
    } else {
        for step in &report.steps {
            render_step(&mut out, step, &report.run.item_unit, details);
        }
    }
    super::client::render(&mut out, report.client.as_ref());
    if !report.warnings.is_empty() {
        let _ = writeln!(out, "\nWarnings");
        for warning in &report.warnings {
            let _ = writeln!(out, "  ! {} — {}", warning.message, warning.fix);
        }
    }
    if !details {
        let _ = writeln!(
            out,
            "\n(--details: latency from the actual send, per-bucket and per-channel figures, server gauges and histograms, utilisation with formulas; report.html draws it all)"
        );
    }
    out
}

pub(crate) fn describe_load(load: &LoadReport) -> String {
    if let Some(phases) = &load.phases {
        let phases: Vec<String> = phases
            .iter()
            .map(|p| {
                format!(
                    "{} {:.2} req/s for {:?}",
                    p.name, p.rate_per_sec, p.duration
                )
            })
            .collect();
        return format!(
            "open loop, {} arrivals in phases: {}",
            load.arrival.as_deref().unwrap_or("poisson"),
            phases.join(" → ")
        );
    }
    match (load.concurrency, load.rate_per_sec) {
        (Some(concurrency), _) => format!("closed loop, concurrency {concurrency}"),
        (None, Some(rate)) => {
            let cap = load
                .max_concurrency
                .map(|c| format!(", client cap {c} in flight"))
                .unwrap_or_default();
            format!(
                "open loop, {} arrivals at {rate:.2} req/s{cap}",
                load.arrival.as_deref().unwrap_or("poisson")
            )
        }
        (None, None) => load.mode.clone(),
    }
}

fn render_step(out: &mut String, step: &StepReport, unit: &str, details: bool) {
    let r = &step.requests;
    let _ = writeln!(
        out,
        "\nLoad: {} · measured {:.1} s (after {} warmup requests)",
        describe_load(&step.load),
        step.duration_secs,
        r.warmup
    );
    let _ = writeln!(
        out,
        "Requests: {} scheduled · {} sent · {} completed · {} failed{}",
        r.scheduled,
        r.sent,
        r.completed,
        r.failed,
        failures(step)
    );
    super::failures::render(out, step);
    render_throughput(out, step);
    render_items(out, step, unit);
    render_latency(out, step, details);
    super::channels::render_audio(out, step);
    if details {
        super::channels::render(out, step);
        super::channels::render_sessions(out, step);
    }
    render_goodput(out, step);
    super::breakdown::render_images(out, &step.image_buckets);
    super::breakdown::render_generation(out, &step.image_settings);
    super::breakdown::render_labels(out, step);
    if details {
        super::breakdown::render(out, step);
    }
    let s = &step.stability;
    let growth = s
        .queue_growth_per_sec
        .map(|g| format!(", in-flight trend {g:+.2}/s"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "\nStability: {} — {}{growth}",
        super::steps::verdict_word(s.verdict),
        s.reason
    );
    render_trends_and_recovery(out, step);
    if details {
        super::server::render_step(out, step);
    } else if let Some(server) = &step.server {
        super::server::render_agreement(out, server);
    }
}

fn render_throughput(out: &mut String, step: &StepReport) {
    let t = &step.throughput;
    let offered = t
        .offered_requests_per_sec
        .map(|o| format!(" (offered {o:.2} req/s)"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "\nThroughput: {:.2} req/s{offered} · {:.1} input tok/s · {:.1} output tok/s · {:.1} total tok/s",
        t.requests_per_sec, t.input_tokens_per_sec, t.output_tokens_per_sec, t.total_tokens_per_sec
    );
    let tokens = &step.tokens;
    let _ = writeln!(
        out,
        "  per request: input {} tokens, output {} tokens (mean)",
        fmt_opt(tokens.input_per_request.mean, 0),
        fmt_opt(tokens.output_per_request.mean, 0)
    );
}

/// Items (inputs, documents, prompts of a batch) per second and the latency per item, when a
/// request carries more than one item or the API counts items (embeddings, rerank).
fn render_items(out: &mut String, step: &StepReport, unit: &str) {
    let t = &step.throughput;
    let batched = (t.items_per_sec - t.requests_per_sec).abs() > 1e-9;
    if unit == "items" && !batched {
        return;
    }
    let per_item = &step.latency_ms.e2e_per_item;
    let _ = writeln!(
        out,
        "Items: {:.2} {unit}/s · {:.2} {unit} per request · E2E per item p50 {} ms, p99 {} ms",
        t.items_per_sec,
        t.items_per_sec / t.requests_per_sec.max(f64::MIN_POSITIVE),
        fmt_opt(per_item.p50, 2),
        fmt_opt(per_item.p99, 2)
    );
}

/// Degrading trends over the run (soak) and the recovery after an overload phase.
fn render_trends_and_recovery(out: &mut String, step: &StepReport) {
    for trend in step.stability.trends.iter().filter(|t| t.degrading) {
        let _ = writeln!(
            out,
            "  degrading: {} changed {:+.1} % over the run (slope {:+.3}/s, t = {:.1})",
            trend.series,
            trend.relative_change * 100.0,
            trend.slope_per_sec,
            trend.t_stat
        );
    }
    let Some(r) = &step.recovery else { return };
    let secs = |v: Option<f64>| v.map_or("not within the run".to_string(), |v| format!("{v:.1} s"));
    let _ = writeln!(
        out,
        "\nRecovery after {} ({:.0}–{:.0} s): in flight {:.1} before → peak {} · backlog {:.0} requests · queue drained in {} · SLO met again after {}",
        r.overload_phase,
        r.overload_start_secs,
        r.overload_end_secs,
        r.baseline_in_flight,
        r.peak_in_flight,
        r.backlog_requests,
        secs(r.drain_secs),
        secs(r.slo_recovery_secs)
    );
}

fn failures(step: &StepReport) -> String {
    if step.requests.failed_by_kind.is_empty() {
        return String::new();
    }
    let kinds: Vec<String> = step
        .requests
        .failed_by_kind
        .iter()
        .map(|(kind, n)| format!("{kind} {n}"))
        .collect();
    format!(" ({})", kinds.join(", "))
}

fn render_latency(out: &mut String, step: &StepReport, details: bool) {
    let l = &step.latency_ms;
    let s = &step.latency_from_send_ms;
    let _ = writeln!(
        out,
        "\nLatency (ms){:>18}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>9}",
        "mean", "p50", "p90", "p95", "p99", "p99.9", "max", "n"
    );
    let rows: [(&str, &LatencyStats); 8] = [
        ("TTFT", &l.ttft),
        ("TPOT", &l.tpot),
        ("ITL", &l.itl),
        ("E2E", &l.e2e),
        ("TTFT from send", &s.ttft),
        ("E2E from send", &s.e2e),
        ("dispatch lag", &l.dispatch_lag),
        ("client queue", &l.client_queue_wait),
    ];
    for (name, stats) in rows.into_iter().take(if details { 8 } else { 4 }) {
        let _ = writeln!(
            out,
            "  {name:<18}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>9}",
            fmt_opt(stats.mean, 1),
            fmt_opt(stats.p50, 1),
            fmt_opt(stats.p90, 1),
            fmt_opt(stats.p95, 1),
            fmt_opt(stats.p99, 1),
            fmt_opt(stats.p999, 1),
            fmt_opt(stats.max, 1),
            stats.count
        );
    }
    let _ = writeln!(
        out,
        "  (TTFT, E2E: from the scheduled send time, so client-side queueing counts; \"from send\": from the actual send)"
    );
}

fn render_goodput(out: &mut String, step: &StepReport) {
    let g = &step.goodput;
    let Some(slo) = &g.slo else {
        let _ = writeln!(out, "\nGoodput: no SLO given (--slo)");
        return;
    };
    let _ = writeln!(out, "\nGoodput under SLO {slo}");
    if let (Some(fraction), Some(rps), Some(tps)) = (
        g.attained_fraction,
        g.requests_per_sec,
        g.output_tokens_per_sec,
    ) {
        let _ = writeln!(
            out,
            "  {:.1} % of requests met every threshold · {rps:.2} good req/s · {tps:.1} good output tok/s",
            fraction * 100.0
        );
    }
    for objective in &g.objectives {
        let measured = objective
            .measured_ms
            .map_or("∞ (failures)".to_string(), |v| format!("{v:.1} ms"));
        let _ = writeln!(
            out,
            "  {} ≤ {:.1} ms: {measured} → {}",
            objective.name,
            objective.max_ms,
            if objective.pass { "PASS" } else { "FAIL" }
        );
    }
}

fn fmt_opt(value: Option<f64>, decimals: usize) -> String {
    value.map_or("-".to_string(), |v| format!("{v:.decimals$}"))
}
