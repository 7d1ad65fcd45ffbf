//! `goodput compare` as text and Markdown: the verdict and the headline figures (each with its
//! delta and significance) on one screen; with `--details`, the conditions that differ, the
//! significance verdict per latency distribution (with the test used), then every figure side
//! by side with its absolute and relative delta.

use std::fmt::Write as _;

use goodput_core::decide::compare::{
    Comparison, DistributionChange, Headline, HeadlineFigure, MetricDelta,
};
use goodput_core::decide::significance::Method;

fn number(value: Option<f64>) -> String {
    match value {
        None => "–".to_string(),
        Some(v) if v.fract() == 0.0 && v.abs() < 1e12 => format!("{v:.0}"),
        Some(v) if v.abs() >= 100.0 => format!("{v:.1}"),
        Some(v) => format!("{v:.3}"),
    }
}

fn percent(value: Option<f64>) -> String {
    value.map_or("–".to_string(), |v| format!("{:+.1} %", v * 100.0))
}

fn p_value(p: f64) -> String {
    if p < 1e-4 {
        "< 0.0001".to_string()
    } else {
        format!("{p:.4}")
    }
}

fn method(m: Method) -> &'static str {
    match m {
        Method::MannWhitney => "Mann-Whitney U (journals)",
        Method::BootstrapQuantiles => "bootstrap (quantile points)",
    }
}

fn judgement(m: &MetricDelta) -> &'static str {
    match (m.relative, m.lower_is_better) {
        (Some(r), Some(lower)) if r.abs() > 1e-9 => {
            if (r < 0.0) == lower {
                "better"
            } else {
                "worse"
            }
        }
        _ => "",
    }
}

/// The named breakdowns (per model, adapter, SLO class, target, replica) that have rows: each
/// title with its rows' cells — name, completed, req/s, E2E p99 and SLO met, each `A → B`
/// (the share's number and `%` joined by `percent_gap`).
fn breakdown_cells(
    comparison: &Comparison,
    percent_gap: &str,
) -> Vec<(&'static str, Vec<[String; 5]>)> {
    use goodput_core::decide::compare::rows::BREAKDOWNS;
    let pair = |[a, b]: [Option<f64>; 2]| format!("{} → {}", number(a), number(b));
    let share = |v: Option<f64>| {
        v.map_or("–".to_string(), |v| {
            format!("{:.1}{percent_gap}%", v * 100.0)
        })
    };
    BREAKDOWNS
        .iter()
        .map(|&(key, title)| {
            let rows = comparison.rows.iter().filter(|r| r.breakdown == key);
            let cells = rows
                .map(|row| {
                    [
                        row.name.clone(),
                        pair(row.completed),
                        pair(row.requests_per_sec),
                        pair(row.e2e_p99_ms),
                        format!(
                            "{} → {}",
                            share(row.attained_fraction[0]),
                            share(row.attained_fraction[1])
                        ),
                    ]
                })
                .collect::<Vec<_>>();
            (title, cells)
        })
        .filter(|(_, cells)| !cells.is_empty())
        .collect()
}

/// The named breakdowns as aligned text, A → B per row.
fn rows_text(out: &mut String, comparison: &Comparison) {
    for (title, rows) in breakdown_cells(comparison, "") {
        let _ = writeln!(
            out,
            "\n{title:<22}{:>18}{:>22}{:>24}{:>18}",
            "completed A → B", "req/s A → B", "E2E p99 ms A → B", "SLO met A → B"
        );
        for [name, completed, rate, p99, met] in rows {
            let _ = writeln!(
                out,
                "  {name:<20}{completed:>18}{rate:>22}{p99:>24}{met:>18}"
            );
        }
    }
}

/// The comparison as plain text: the headline, then (with `details`) everything.
pub(crate) fn text(labels: [&str; 2], comparison: &Comparison, details: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "goodput compare: B = {} against A = {}",
        labels[1], labels[0]
    );
    headline_text(&mut out, comparison);
    rows_text(&mut out, comparison);
    if !comparison.warnings.is_empty() {
        let _ = writeln!(out, "\nConditions differ");
        for w in &comparison.warnings {
            let _ = writeln!(out, "  ! {} — {}", w.message, w.fix);
        }
    }
    if !details {
        let _ = writeln!(
            out,
            "\n(--details: every distribution test and all {} figures side by side; --html FILE: the runs overlaid on one page)",
            comparison.metrics.len()
        );
        return out;
    }
    let t = comparison.thresholds;
    let _ = writeln!(
        out,
        "\nLatency distributions (significant: p < {} and the median moved ≥ {:.0} %)",
        t.alpha,
        t.min_effect * 100.0
    );
    let _ = writeln!(
        out,
        "  {:<5} {:<6} {:<28} {:>7} {:>7} {:>12} {:>12} {:>9} {:>10}  verdict",
        "step", "metric", "test", "n A", "n B", "median A ms", "median B ms", "shift", "p-value"
    );
    for d in &comparison.distributions {
        distribution_line(&mut out, d);
    }
    let _ = writeln!(
        out,
        "\n{:<52} {:>14} {:>14} {:>12} {:>10}",
        "Figure", "A", "B", "Δ", "Δ %"
    );
    for m in &comparison.metrics {
        let _ = writeln!(
            out,
            "  {:<50} {:>14} {:>14} {:>12} {:>10} {} {}",
            m.path,
            number(m.a),
            number(m.b),
            number(m.delta),
            percent(m.relative),
            m.unit,
            judgement(m)
        );
    }
    out
}

/// A headline value: the figure's words, or its number.
fn headline_value(value: Option<f64>, text: Option<&String>) -> String {
    text.cloned().unwrap_or_else(|| number(value))
}

fn headline_p(figure: &HeadlineFigure) -> String {
    figure.p_value.map_or("–".to_string(), p_value)
}

/// The verdict, then one line per headline figure.
fn headline_text(out: &mut String, comparison: &Comparison) {
    let h: &Headline = &comparison.headline;
    let t = comparison.thresholds;
    let _ = writeln!(out, "\nVerdict: {} — {}", h.verdict, h.summary);
    let _ = writeln!(
        out,
        "  (step {}; significant = p < {} and a change of at least {:.0} %)",
        h.step + 1,
        t.alpha,
        t.min_effect * 100.0
    );
    let _ = writeln!(
        out,
        "\n  {:<16}{:>13}{:>13}{:>11}{:>9}  {:<6}{:>9}  verdict",
        "figure", "A", "B", "Δ", "Δ %", "unit", "p-value"
    );
    for f in &h.figures {
        let _ = writeln!(
            out,
            "  {:<16}{:>13}{:>13}{:>11}{:>9}  {:<6}{:>9}  {}",
            f.name,
            headline_value(f.a, f.a_text.as_ref()),
            headline_value(f.b, f.b_text.as_ref()),
            number(f.delta),
            percent(f.relative),
            f.unit,
            headline_p(f),
            f.verdict
        );
    }
}

fn distribution_line(out: &mut String, d: &DistributionChange) {
    let t = &d.test;
    let _ = writeln!(
        out,
        "  {:<5} {:<6} {:<28} {:>7} {:>7} {:>12.1} {:>12.1} {:>9} {:>10}  {}",
        d.step,
        d.metric.to_uppercase(),
        method(t.method),
        t.n_a,
        t.n_b,
        t.median_a,
        t.median_b,
        percent(t.relative_shift),
        p_value(t.p_value),
        d.verdict
    );
}

/// The comparison as Markdown: the headline, then (with `details`) everything.
pub(crate) fn markdown(labels: [&str; 2], comparison: &Comparison, details: bool) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## goodput compare: `{}` vs `{}`\n",
        labels[1], labels[0]
    );
    if !comparison.warnings.is_empty() {
        let _ = writeln!(out, "**Conditions differ**\n");
        for w in &comparison.warnings {
            let _ = writeln!(out, "- `{}`: {} — *{}*", w.code, w.message, w.fix);
        }
        out.push('\n');
    }
    markdown_headline(&mut out, comparison);
    markdown_rows(&mut out, comparison);
    if !details {
        return out;
    }
    let t = comparison.thresholds;
    let _ = writeln!(
        out,
        "\nSignificant = two-sided p < {} and the median moved by at least {:.0} %.\n",
        t.alpha,
        t.min_effect * 100.0
    );
    markdown_distributions(&mut out, comparison);
    let _ = writeln!(out, "\n| figure | A | B | Δ | Δ % | unit | |");
    let _ = writeln!(out, "|---|--:|--:|--:|--:|---|---|");
    for m in &comparison.metrics {
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {} | {} | {} |",
            m.path,
            number(m.a),
            number(m.b),
            number(m.delta),
            percent(m.relative),
            m.unit,
            judgement(m)
        );
    }
    out
}

/// The named breakdowns as Markdown tables, A → B per row.
fn markdown_rows(out: &mut String, comparison: &Comparison) {
    for (title, rows) in breakdown_cells(comparison, " ") {
        let _ = writeln!(out, "\n**{title}**\n");
        let _ = writeln!(
            out,
            "| | completed A → B | req/s A → B | E2E p99 ms A → B | SLO met A → B |"
        );
        let _ = writeln!(out, "|---|--:|--:|--:|--:|");
        for row in rows {
            let _ = writeln!(out, "| {} |", row.join(" | "));
        }
    }
}

fn markdown_distributions(out: &mut String, comparison: &Comparison) {
    let _ = writeln!(
        out,
        "| step | metric | test | n A | n B | median A ms | median B ms | shift | p-value | verdict |"
    );
    let _ = writeln!(out, "|--:|---|---|--:|--:|--:|--:|--:|--:|---|");
    for d in &comparison.distributions {
        let x = &d.test;
        let verdict = if d.verdict == "no significant change" {
            d.verdict.clone()
        } else {
            format!("**{}**", d.verdict)
        };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {:.1} | {:.1} | {} | {} | {verdict} |",
            d.step,
            d.metric.to_uppercase(),
            method(x.method),
            x.n_a,
            x.n_b,
            x.median_a,
            x.median_b,
            percent(x.relative_shift),
            p_value(x.p_value)
        );
    }
}

fn markdown_headline(out: &mut String, comparison: &Comparison) {
    let h = &comparison.headline;
    let _ = writeln!(
        out,
        "**Verdict: {}** — {} (step {})\n",
        h.verdict,
        h.summary,
        h.step + 1
    );
    let _ = writeln!(
        out,
        "| figure | A | B | Δ | Δ % | unit | test | p-value | verdict |"
    );
    let _ = writeln!(out, "|---|--:|--:|--:|--:|---|---|--:|---|");
    for f in &h.figures {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            f.name,
            headline_value(f.a, f.a_text.as_ref()),
            headline_value(f.b, f.b_text.as_ref()),
            number(f.delta),
            percent(f.relative),
            f.unit,
            f.test,
            headline_p(f),
            f.verdict
        );
    }
}
