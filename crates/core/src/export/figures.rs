//! The headline figures of a report, flat: per step, throughput (requests and tokens per
//! second), goodput, TTFT/TPOT/ITL/E2E at p50/p95/p99 and request counts with failures by
//! kind. Every exporter that sends figures elsewhere (Prometheus, OpenTelemetry, MLflow) reads
//! this one list, so they all send the same numbers, each exactly as `report.json` holds it.

use crate::report::{LatencyStats, Report, StepReport};

/// The unit of a figure's value (the value is always in the report's own unit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Milliseconds (latencies).
    Millis,
    /// Per second (throughput, goodput).
    PerSec,
    /// A fraction between 0 and 1.
    Ratio,
    /// A count of requests.
    Count,
}

/// One figure of one step.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// Base name without unit, e.g. `requests_per_second`, `ttft`, `requests`.
    pub name: &'static str,
    /// What it is, for people.
    pub help: &'static str,
    /// Its unit.
    pub unit: Unit,
    /// Index of the step in `report.steps`.
    pub step: usize,
    /// What tells it apart from the figures of the same name and step, e.g.
    /// `("quantile", "0.99")`, `("outcome", "failed")`, `("kind", "timeout")`.
    pub labels: Vec<(&'static str, String)>,
    /// The value, exactly as the report holds it.
    pub value: f64,
}

/// An identifier of the run: its start time (RFC 3339, as `run.started_at`), unique per run
/// on one machine and the same in every export.
pub fn run_id(report: &Report) -> &str {
    &report.run.started_at
}

/// Every headline figure of every step, in step order. Figures the report does not have
/// (goodput without an SLO, a latency with no sample) are left out, never sent as zero.
pub fn headline(report: &Report) -> Vec<Figure> {
    let mut figures = Vec::new();
    for (index, step) in report.steps.iter().enumerate() {
        step_figures(index, step, &mut figures);
    }
    figures
}

/// The latencies exported, with their report field and help.
const LATENCIES: [(&str, &str); 4] = [
    ("ttft", "Time to first token"),
    ("tpot", "Time per output token after the first"),
    ("itl", "Inter-token latency"),
    ("e2e", "End-to-end latency"),
];

/// A statistic read from a latency's summary.
type Stat = fn(&LatencyStats) -> Option<f64>;

/// The percentiles exported: label value and the statistic.
const QUANTILES: [(&str, Stat); 3] = [("0.5", |s| s.p50), ("0.95", |s| s.p95), ("0.99", |s| s.p99)];

fn step_figures(step_index: usize, step: &StepReport, out: &mut Vec<Figure>) {
    let mut push = |name, help, unit, labels: Vec<(&'static str, String)>, value: Option<f64>| {
        if let Some(value) = value.filter(|v| v.is_finite()) {
            out.push(Figure {
                name,
                help,
                unit,
                step: step_index,
                labels,
                value,
            });
        }
    };
    for (name, help, value) in rates(step) {
        push(name, help, Unit::PerSec, Vec::new(), value);
    }
    let attained = step.goodput.attained_fraction;
    let help = "Fraction of measured requests meeting the SLO";
    push("slo_attained", help, Unit::Ratio, Vec::new(), attained);
    let latencies = [
        &step.latency_ms.ttft,
        &step.latency_ms.tpot,
        &step.latency_ms.itl,
        &step.latency_ms.e2e,
    ];
    for ((name, help), stats) in LATENCIES.into_iter().zip(latencies) {
        for (quantile, stat) in QUANTILES {
            let labels = vec![("quantile", quantile.to_string())];
            push(name, help, Unit::Millis, labels, stat(stats));
        }
    }
    let r = &step.requests;
    let counts = [
        ("scheduled", r.scheduled),
        ("completed", r.completed),
        ("failed", r.failed),
    ];
    for (outcome, count) in counts {
        let labels = vec![("outcome", outcome.to_string())];
        let help = "Measured requests by outcome";
        push("requests", help, Unit::Count, labels, Some(count as f64));
    }
    for (kind, count) in &r.failed_by_kind {
        let labels = vec![("kind", kind.clone())];
        let help = "Failed measured requests by kind";
        push(
            "request_failures",
            help,
            Unit::Count,
            labels,
            Some(*count as f64),
        );
    }
}

/// The per-second figures of a step: name, help, value.
fn rates(step: &StepReport) -> [(&'static str, &'static str, Option<f64>); 6] {
    let t = &step.throughput;
    let g = &step.goodput;
    [
        (
            "requests_per_second",
            "Completed requests per second",
            Some(t.requests_per_sec),
        ),
        (
            "input_tokens_per_second",
            "Prompt tokens of completed requests per second",
            Some(t.input_tokens_per_sec),
        ),
        (
            "output_tokens_per_second",
            "Generated tokens of completed requests per second",
            Some(t.output_tokens_per_sec),
        ),
        (
            "total_tokens_per_second",
            "Prompt plus generated tokens per second",
            Some(t.total_tokens_per_sec),
        ),
        (
            "goodput_requests_per_second",
            "Requests meeting the SLO per second",
            g.requests_per_sec,
        ),
        (
            "goodput_output_tokens_per_second",
            "Generated tokens of requests meeting the SLO per second",
            g.output_tokens_per_sec,
        ),
    ]
}
