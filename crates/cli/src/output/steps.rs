//! The terminal summary of a multi-step run (sweep, capacity search): one row per step, then
//! the knee or the capacity verdict with its bounds, confidence and every probe's reason.

use std::fmt::Write as _;

use goodput_core::decide::capacity::{CapacityReport, Dimension, Outcome};
use goodput_core::decide::sweep::{SweepDimension, SweepReport};
use goodput_core::report::{LoadReport, Report, StepReport};

/// The step whose full detail follows the overview: the knee, the passing probe at capacity,
/// or else the last step.
pub(crate) fn featured_step(report: &Report) -> Option<usize> {
    let steps = report.steps.len();
    if let Some(knee) = report.sweep.as_ref().and_then(|s| s.knee.as_ref()) {
        return Some(knee.step);
    }
    if let Some(capacity) = &report.capacity {
        let at = capacity.lower_bound?;
        return capacity
            .probes
            .iter()
            .position(|p| p.load == at && p.outcome == Outcome::Pass)
            .map(|i| capacity.first_probe_step + i)
            .filter(|i| *i < steps);
    }
    steps.checked_sub(1)
}

/// One row per step.
pub(crate) fn render_overview(out: &mut String, report: &Report) {
    let batches = report
        .sweep
        .as_ref()
        .filter(|sweep| sweep.dimension == SweepDimension::Batch);
    let unit = &report.run.item_unit;
    let items = batches.is_some() || unit != "items";
    let _ = writeln!(
        out,
        "\n{:>4}  {:<28}{:>9}{:>9}{:>11}{:>10}{:>10}{:>10}{:>10}{:>10}{:>8}{:>9}  queue",
        "step",
        "load",
        "offered",
        "req/s",
        if items {
            format!("{unit}/s")
        } else {
            "out tok/s".to_string()
        },
        "TTFT p50",
        "TTFT p99",
        "TPOT p99",
        "E2E p50",
        "E2E p99",
        "good %",
        "srv wait",
    );
    for (index, step) in report.steps.iter().enumerate() {
        // A repeated sweep's steps are rounds of its levels.
        let batch = batches.and_then(|sweep| sweep.loads.get(index % sweep.loads.len().max(1)));
        let _ = writeln!(out, "{}", overview_row(index, step, items, batch));
    }
    let _ = writeln!(
        out,
        "      (offered = arrivals/s, req/s = completions/s; latency in ms from the scheduled send; good % = requests meeting every threshold; srv wait = mean requests waiting in the server's queue, when its metrics are scraped)"
    );
}

/// A step's row: items/s instead of output tokens/s when `items`, its batch size in a batch
/// sweep.
fn overview_row(index: usize, step: &StepReport, items: bool, batch: Option<&f64>) -> String {
    let l = &step.latency_ms;
    let load = match batch {
        Some(batch) => format!("batch {batch} · {}", short_load(&step.load)),
        None => short_load(&step.load),
    };
    let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
    format!(
        "{:>4}  {:<28}{:>9}{:>9.2}{:>11.1}{:>10}{:>10}{:>10}{:>10}{:>10}{:>8}{:>9}  {}",
        index + 1,
        load,
        step.throughput
            .offered_requests_per_sec
            .map_or("-".to_string(), |offered| format!("{offered:.2}")),
        step.throughput.requests_per_sec,
        if items {
            step.throughput.items_per_sec
        } else {
            step.throughput.output_tokens_per_sec
        },
        ms(l.ttft.p50),
        ms(l.ttft.p99),
        ms(l.tpot.p99),
        ms(l.e2e.p50),
        ms(l.e2e.p99),
        step.goodput
            .attained_fraction
            .map_or("-".to_string(), |f| format!("{:.1}", f * 100.0)),
        step.server
            .as_ref()
            .and_then(|server| server.measurement.waiting.mean)
            .map_or("-".to_string(), |waiting| format!("{waiting:.1}")),
        verdict_word(step.stability.verdict)
    )
}

fn short_load(load: &LoadReport) -> String {
    match (load.concurrency, load.rate_per_sec) {
        (Some(c), _) => format!("concurrency {c}"),
        (None, Some(rate)) => format!("{rate:.2} req/s {}", load.arrival.as_deref().unwrap_or("")),
        (None, None) if load.phases.is_some() => "phase profile".to_string(),
        (None, None) => load.mode.clone(),
    }
}

/// The sweep's knee.
pub(crate) fn render_sweep(out: &mut String, sweep: &SweepReport, item_unit: &str) {
    let batch = format!("{item_unit} per request");
    let unit = match sweep.dimension {
        SweepDimension::Concurrency => "concurrency",
        SweepDimension::Rate => "req/s",
        SweepDimension::Batch => batch.as_str(),
    };
    // A repeated sweep's knee is a level, found on the levels' means.
    let (noun, means) = match sweep.repeats {
        Some(rounds) => ("level", format!(" (means across {rounds} runs)")),
        None => ("step", String::new()),
    };
    match &sweep.knee {
        Some(knee) => {
            let _ = writeln!(
                out,
                "\nKnee: {noun} {} ({} {unit}) — the next level added {:.1} % throughput and {:.1} % E2E p50{means}",
                knee.step + 1,
                knee.load,
                knee.next_throughput_gain * 100.0,
                knee.next_latency_rise * 100.0
            );
        }
        None => {
            let _ = writeln!(
                out,
                "\nKnee: not reached — every level raised throughput by at least {:.0} % (or latency did not rise); sweep further",
                sweep.knee_min_gain * 100.0
            );
        }
    }
}

/// The capacity verdict and every probe.
pub(crate) fn render_capacity(out: &mut String, capacity: &CapacityReport) {
    let _ = writeln!(
        out,
        "\nCapacity under SLO {} — {:.1} % of requests within every threshold, proven at {:.0} % confidence (at most {} measured requests per probe, each ended once decided)",
        capacity.slo,
        capacity.attainment_target * 100.0,
        capacity.confidence * 100.0,
        capacity.requests_per_probe
    );
    let load = |v: f64| match capacity.dimension {
        Dimension::Rate => format!("{v:.2} req/s"),
        Dimension::Concurrency => format!("concurrency {v}"),
    };
    let verdict = match (capacity.lower_bound, capacity.upper_bound) {
        (Some(lower), Some(upper)) => format!("{} (fails at {})", load(lower), load(upper)),
        (Some(lower), None) => format!("at least {}", load(lower)),
        (None, Some(upper)) => format!("below {} (nothing passed)", load(upper)),
        (None, None) => "unknown (no probe was judged)".to_string(),
    };
    let _ = writeln!(
        out,
        "  highest sustainable load   {verdict} · search {:?}",
        capacity.conclusion
    );
    if let (Some(per), Some(n)) = (capacity.per_accelerator, capacity.accelerators) {
        let _ = writeln!(
            out,
            "  per accelerator            {} ({n} accelerators)",
            load(per)
        );
    }
    if let Some(goodput) = capacity.goodput_at_capacity_per_sec {
        let _ = writeln!(out, "  goodput at capacity        {goodput:.2} good req/s");
    }
    if let Some(distserve) = capacity.distserve_goodput_per_sec {
        let _ = writeln!(
            out,
            "  DistServe goodput          {distserve:.2} req/s (highest arrival rate meeting every attainment target)"
        );
    }
    for probe in &capacity.probes {
        let _ = writeln!(
            out,
            "  probe {:>2}  {:<22}{:<13}{:<34}{}",
            probe.index + 1,
            load(probe.load),
            format!("{:?}", probe.outcome).to_lowercase(),
            decided(probe),
            probe.reason
        );
    }
}

/// How many requests decided a probe, beside the fewest any fixed-sample test could use:
/// `decided after 531 (fixed ≥ 459)`, or `undecided after 1596 (fixed ≥ 459)`.
pub(crate) fn decided(probe: &goodput_core::decide::capacity::Probe) -> String {
    let fixed = probe
        .fixed_sample_minimum
        .map_or(String::new(), |n| format!(" (fixed ≥ {n})"));
    match probe.decided_after {
        Some(n) => format!("decided after {n}{fixed}"),
        None => format!("undecided after {}{fixed}", probe.measured),
    }
}

/// `stable`, `UNSTABLE` or `inconclusive`, as the terminal shows a stability verdict.
pub(crate) fn verdict_word(verdict: goodput_core::metrics::stability::Verdict) -> &'static str {
    match verdict {
        goodput_core::metrics::stability::Verdict::Unstable => "UNSTABLE",
        verdict => verdict.as_str(),
    }
}
