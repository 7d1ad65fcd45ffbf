//! The terminal summary of `--repeats N`: of `goodput run`, each headline figure across the
//! runs — mean with the half-width of its 95 % confidence interval, standard deviation (and as
//! a share of the mean), range; of `goodput sweep`, each level's main figures so; of `goodput
//! capacity`, each search's capacity and the capacity across the searches.

use std::fmt::Write as _;

use goodput_core::report::repeats::{RepeatedCapacity, RepeatedFigure, RepeatsReport};

/// The figures a repeated sweep's level table shows.
const LEVEL_FIGURES: [&str; 6] = [
    "throughput.requests_per_sec",
    "throughput.output_tokens_per_sec",
    "latency_ms.ttft.p99",
    "latency_ms.tpot.p99",
    "latency_ms.e2e.p50",
    "latency_ms.e2e.p99",
];

/// The figures across the runs, one line each (a sweep's per level, a capacity search's
/// capacity).
pub(crate) fn render(out: &mut String, repeats: &RepeatsReport) {
    if let Some(levels) = &repeats.levels {
        render_levels(out, repeats, levels);
    }
    if let Some(capacity) = &repeats.capacity {
        render_capacity(out, repeats, capacity);
    }
    if repeats.figures.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\nAcross {} runs: mean ± {:.0} % confidence interval, run-to-run spread, range",
        repeats.runs,
        repeats.confidence * 100.0
    );
    for figure in &repeats.figures {
        let digits = if figure.mean.abs() >= 100.0 { 1 } else { 2 };
        let half = figure.ci_high.map(|high| high - figure.mean);
        let mean = match half {
            Some(half) => format!("{:.digits$} ± {half:.digits$}", figure.mean),
            None => format!("{:.digits$}", figure.mean),
        };
        let spread = match (figure.sd, figure.cv) {
            (Some(sd), Some(cv)) => format!("sd {sd:.digits$} ({:.1} %)", cv * 100.0),
            (Some(sd), None) => format!("sd {sd:.digits$}"),
            _ => "one run".to_string(),
        };
        let _ = writeln!(
            out,
            "  {:<16}{:>22} {:<9}{:<22}{:.digits$}–{:.digits$}",
            figure.name, mean, figure.unit, spread, figure.min, figure.max
        );
    }
}

/// `mean ± half` of a figure (the mean alone without an interval), at its precision.
fn mean_and_interval(figure: &RepeatedFigure) -> String {
    let digits = if figure.mean.abs() >= 100.0 { 1 } else { 2 };
    match figure.ci_high {
        Some(high) => format!("{:.digits$} ± {:.digits$}", figure.mean, high - figure.mean),
        None => format!("{:.digits$}", figure.mean),
    }
}

/// A repeated sweep's levels: each level's main figures, mean ± half-width of the interval.
fn render_levels(
    out: &mut String,
    repeats: &RepeatsReport,
    levels: &[goodput_core::report::repeats::RepeatedLevel],
) {
    let _ = writeln!(
        out,
        "\nEach level across {} runs: mean ± {:.0} % confidence interval",
        repeats.runs,
        repeats.confidence * 100.0
    );
    let _ = write!(out, "  {:<10}", "load");
    for header in [
        "req/s",
        "out tok/s",
        "TTFT p99",
        "TPOT p99",
        "E2E p50",
        "E2E p99",
    ] {
        let _ = write!(out, "{header:>17}");
    }
    let _ = writeln!(out);
    for level in levels {
        let _ = write!(out, "  {:<10}", level.load);
        for path in LEVEL_FIGURES {
            let cell = level
                .figures
                .iter()
                .find(|f| f.path == path)
                .map_or("-".to_string(), mean_and_interval);
            let _ = write!(out, "{cell:>17}");
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(out, "  (latency in ms; the knee is found on these means)");
}

/// A repeated capacity search: each search's bounds, then the capacity across them.
fn render_capacity(out: &mut String, repeats: &RepeatsReport, capacity: &RepeatedCapacity) {
    let _ = writeln!(out, "\nAcross {} capacity searches", repeats.runs);
    let bound = |b: Option<f64>| b.map_or("-".to_string(), |v| format!("{v:.2}"));
    for (i, search) in capacity.searches.iter().enumerate() {
        let _ = writeln!(
            out,
            "  search {:<3} capacity {:>10}  fails at {:>10}  {:?}, steps {}–{}",
            i + 1,
            bound(search.lower_bound),
            bound(search.upper_bound),
            search.conclusion,
            search.first_step + 1,
            search.first_step + search.steps
        );
    }
    let _ = writeln!(out, "  {}", capacity.conclusion);
}
