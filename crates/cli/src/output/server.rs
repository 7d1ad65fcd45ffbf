//! The terminal form of a step's server-side sections: what the server's metrics said,
//! utilisation, speculative decoding, cost and energy — every derived figure with its formula
//! and inputs.

use std::fmt::Write as _;

use goodput_core::analysis::{CostReport, Figure, SpeculativeReport, UtilisationReport};
use goodput_core::observe::server::ServerReport;
use goodput_core::observe::server::report::{GaugeStats, HistogramStats};
use goodput_core::report::StepReport;

/// Appends the step's server-side sections (those present) to `out`.
pub(crate) fn render_step(out: &mut String, step: &StepReport) {
    if let Some(server) = &step.server {
        render_server(out, server);
    }
    if let Some(utilisation) = &step.utilisation {
        render_utilisation(out, utilisation);
    }
    if let Some(speculative) = &step.speculative_decoding {
        render_speculative(out, speculative);
    }
    if let Some(cost) = &step.cost {
        render_cost(out, cost);
    }
}

/// One line: whether the server's token counts agree with the client's, and its peak KV use
/// and queue (the default summary; `--details` shows the whole server section).
pub(crate) fn render_agreement(out: &mut String, server: &ServerReport) {
    let a = &server.agreement;
    let ratio = |r: Option<f64>| r.map_or("-".to_string(), |r| format!("×{r:.3}"));
    let m = &server.measurement;
    let kv = m
        .kv_cache_usage
        .max
        .map(|v| format!(" · KV cache max {:.0} %", v * 100.0))
        .unwrap_or_default();
    let waiting = m
        .waiting
        .max
        .map(|v| format!(" · waiting max {}", num(v)))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "\nServer agreement: generated tokens {} and prompt tokens {} of the client's ({} scrapes){kv}{waiting}",
        ratio(a.output_ratio),
        ratio(a.input_ratio),
        server.scrapes
    );
}

/// A number for people: 4 significant digits, scientific when very large or small.
pub(crate) fn num(value: f64) -> String {
    let magnitude = value.abs();
    if value == 0.0 {
        "0".into()
    } else if value.fract() == 0.0 && magnitude < 1e7 {
        format!("{value:.0}")
    } else if !(1e-3..1e7).contains(&magnitude) {
        format!("{value:.4e}")
    } else if magnitude >= 1000.0 {
        format!("{value:.0}")
    } else if magnitude >= 10.0 {
        format!("{value:.2}")
    } else {
        format!("{value:.4}")
    }
}

fn opt(value: Option<f64>) -> String {
    value.map_or("-".into(), num)
}

fn render_server(out: &mut String, server: &ServerReport) {
    let _ = writeln!(
        out,
        "\nServer side ({} metrics at {}: {} scrapes every {:.0} ms, {} failed)",
        server.flavour.as_deref().unwrap_or("unrecognised"),
        server.metrics_url,
        server.scrapes,
        server.interval_ms,
        server.failed_scrapes
    );
    render_gauges(out, server);
    let m = &server.measurement;
    let _ = writeln!(
        out,
        "  rates: {} prompt tok/s · {} generated tok/s · {} finished req/s · {} preemptions · prefix-cache hit rate {}",
        opt(m.prompt_tokens_per_sec),
        opt(m.generation_tokens_per_sec),
        opt(m.requests_finished_per_sec),
        opt(m.preemptions),
        m.prefix_cache_hit_rate
            .map_or("-".into(), |r| format!("{:.1} %", r * 100.0))
    );
    render_server_latency(out, server);
    if let Some(d) = &server.measurement.disaggregation {
        render_disaggregation(out, d);
    }
    let a = &server.agreement;
    let _ = writeln!(
        out,
        "  tokens over the run: server generated {} / client received {} (×{}); server prompt {} / client {} (×{})",
        opt(a.server_generation_tokens),
        a.client_output_tokens,
        opt(a.output_ratio),
        opt(a.server_prompt_tokens),
        a.client_input_tokens,
        opt(a.input_ratio)
    );
}

fn render_gauges(out: &mut String, server: &ServerReport) {
    let m = &server.measurement;
    let _ = writeln!(
        out,
        "  {:<22}{:>10}{:>10}{:>10}   (measurement interval {:.1}–{:.1} s)",
        "gauges", "mean", "p95", "max", m.start_secs, m.end_secs
    );
    let percent = |g: &GaugeStats| GaugeStats {
        mean: g.mean.map(|v| v * 100.0),
        p95: g.p95.map(|v| v * 100.0),
        max: g.max.map(|v| v * 100.0),
        samples: g.samples,
    };
    for (name, stats) in [
        ("running requests", m.running.clone()),
        ("waiting requests", m.waiting.clone()),
        ("KV cache usage (%)", percent(&m.kv_cache_usage)),
        ("power (W)", m.power_watts.clone()),
    ] {
        if stats.samples > 0 {
            let _ = writeln!(
                out,
                "  {name:<22}{:>10}{:>10}{:>10}",
                opt(stats.mean),
                opt(stats.p95),
                opt(stats.max)
            );
        }
    }
}

/// A disaggregated deployment's queues on each side and its KV transfers.
fn render_disaggregation(
    out: &mut String,
    d: &goodput_core::observe::server::report::Disaggregation,
) {
    let _ = writeln!(out, "  disaggregated prefill/decode");
    for (name, stats) in [
        ("prefill: waiting KV room", &d.prefill_prealloc_queue),
        ("prefill: KV in transfer", &d.prefill_inflight_queue),
        ("decode: waiting KV room", &d.decode_prealloc_queue),
        ("decode: awaiting KV", &d.decode_transfer_queue),
        ("KV transfer latency (ms)", &d.kv_transfer_latency_ms),
    ] {
        if stats.samples > 0 {
            let _ = writeln!(
                out,
                "    {name:<26}mean {} · p95 {} · max {}",
                opt(stats.mean),
                opt(stats.p95),
                opt(stats.max)
            );
        }
    }
    let t = &d.kv_transfer_ms;
    if t.count.is_some() || d.kv_transfer_failures.is_some() {
        let _ = writeln!(
            out,
            "    KV transfers: {} · mean {} ms · p99 in {} · {} failed",
            opt(t.count),
            opt(t.mean),
            bucket(t.p99),
            opt(d.kv_transfer_failures)
        );
    }
}

fn render_server_latency(out: &mut String, server: &ServerReport) {
    let l = &server.measurement.latency_ms;
    let rows: [(&str, &HistogramStats); 4] = [
        ("TTFT", &l.ttft),
        ("ITL", &l.itl),
        ("E2E", &l.e2e),
        ("queue", &l.queue),
    ];
    if rows.iter().all(|(_, h)| h.count.is_none()) {
        return;
    }
    let _ = writeln!(
        out,
        "  {:<22}{:>10}{:>10}{:>10}{:>10}{:>9}",
        "server latency (ms)", "mean", "p50", "p90", "p99", "n"
    );
    for (name, h) in rows {
        if h.count.is_some() {
            let _ = writeln!(
                out,
                "    {name:<20}{:>10}{:>10}{:>10}{:>10}{:>9}",
                opt(h.mean),
                bucket(h.p50),
                bucket(h.p90),
                bucket(h.p99),
                h.count.map_or("-".into(), |n| format!("{n:.0}"))
            );
        }
    }
    let _ = writeln!(
        out,
        "    (server clock, from its arrival; percentiles to the resolution of the server's buckets, means exact)"
    );
}

fn render_figure(out: &mut String, name: &str, figure: &Figure) {
    let value = figure.value.map_or("-".into(), num);
    let inputs: Vec<String> = figure
        .inputs
        .iter()
        .map(|(key, v)| format!("{key} {}", num(*v)))
        .collect();
    let missing = if figure.missing.is_empty() {
        String::new()
    } else {
        format!("; missing: {}", figure.missing.join(", "))
    };
    let _ = writeln!(
        out,
        "  {name:<26}{value:>12} {:<10} = {}",
        figure.unit, figure.formula
    );
    let _ = writeln!(out, "  {:<26}[{}{missing}]", "", inputs.join(", "));
}

fn render_utilisation(out: &mut String, u: &UtilisationReport) {
    let _ = writeln!(
        out,
        "\nUtilisation ({} on {} × {}, tensor parallel {}, {} replica(s))",
        u.model, u.accelerators, u.accelerator, u.tensor_parallel, u.replicas
    );
    for (name, figure) in [
        ("weights", &u.weight_bytes),
        ("KV per token", &u.kv_bytes_per_token),
        ("KV capacity", &u.kv_capacity_tokens),
        ("sequences that fit", &u.max_sequences),
        ("MFU", &u.mfu),
        ("HBM bandwidth used", &u.hbm_bandwidth_utilisation),
        ("TPOT floor (batch 1)", &u.tpot_floor_ms),
    ] {
        render_figure(out, name, figure);
    }
}

fn render_speculative(out: &mut String, s: &SpeculativeReport) {
    let _ = writeln!(
        out,
        "\nSpeculative decoding (from {})",
        s.source.replace('_', " ")
    );
    for (name, figure) in [
        ("drafts per step (K)", &s.num_draft_tokens),
        ("acceptance rate", &s.acceptance_rate),
        ("mean accepted length", &s.mean_accepted_length),
        ("theoretical speedup", &s.theoretical_speedup),
    ] {
        render_figure(out, name, figure);
    }
}

fn render_cost(out: &mut String, c: &CostReport) {
    let _ = writeln!(
        out,
        "\nCost and energy ({} accelerator(s), at this step's throughput)",
        c.accelerators
    );
    for (name, figure) in [
        ("cost per hour", &c.cost_per_hour),
        ("cost per 1k requests", &c.cost_per_1k_requests),
        (
            "cost per 1M output tokens",
            &c.cost_per_million_output_tokens,
        ),
        ("cost per 1M total tokens", &c.cost_per_million_total_tokens),
        ("power", &c.power_watts),
        ("energy per output token", &c.energy_per_output_token_joules),
        ("kWh per 1M output tokens", &c.kwh_per_million_output_tokens),
        ("kWh per 1M total tokens", &c.kwh_per_million_total_tokens),
    ] {
        if figure.value.is_some() {
            render_figure(out, name, figure);
        }
    }
}

/// A percentile known to its bucket: `≤ 300`, `300–500` or `> 10000`.
fn bucket(value: Option<goodput_core::observe::server::report::QuantileBucket>) -> String {
    value.map_or_else(|| "-".to_string(), |b| b.to_string())
}
