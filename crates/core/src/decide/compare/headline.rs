//! The headline of a comparison: the verdict and the dozen figures a reader looks at first
//! (throughput, goodput, TTFT/TPOT/E2E p50 and p99, error rate, stability; TTFAT p50/p99 and
//! reasoning tokens/s when both runs have them), each with its delta and a significance
//! verdict. Latency rows carry their distribution's test (Mann–Whitney U or
//! the bootstrap, see [`crate::decide::significance`]); throughput and goodput a test of two Poisson
//! rates (completions over the measured window); the error rate a two-proportion test. When
//! both runs were repeated (`goodput run --repeats`), each figure their repeats sections give is
//! judged by Welch's t-test across the runs instead ([`crate::decide::repeats`]).

use serde::Serialize;
use serde_json::Value;

use super::DistributionChange;
use crate::decide::repeats::{moments, number_at, run_values, welch};
use crate::decide::significance::{Thresholds, normal_upper_tail};

/// One headline figure in both runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeadlineFigure {
    /// Name for people (`E2E p99`).
    pub name: &'static str,
    /// Path in the report (`steps[0].latency_ms.e2e.p99`).
    pub path: String,
    /// Unit label (`ms`, `req/s`, `%`).
    pub unit: &'static str,
    /// Baseline value.
    pub a: Option<f64>,
    /// Candidate value.
    pub b: Option<f64>,
    /// Baseline value in words, for figures that are not numbers (stability).
    pub a_text: Option<String>,
    /// Candidate value in words.
    pub b_text: Option<String>,
    /// `b − a`.
    pub delta: Option<f64>,
    /// `(b − a) / |a|`.
    pub relative: Option<f64>,
    /// The test behind the verdict (`none` when the figure is not tested).
    pub test: &'static str,
    /// Its two-sided p-value.
    pub p_value: Option<f64>,
    /// `better`, `worse`, `no significant change` or `not tested`.
    pub verdict: &'static str,
}

/// The verdict and the headline figures of one step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Headline {
    /// The step the figures come from (the only one, or the last both runs have).
    pub step: usize,
    /// `regression`, `improvement`, `mixed` or `no significant change`.
    pub verdict: &'static str,
    /// The verdict in one sentence, naming the figures that changed significantly.
    pub summary: String,
    /// The figures.
    pub figures: Vec<HeadlineFigure>,
}

const LATENCIES: [(&str, &str, &str); 6] = [
    ("TTFT p50", "ttft", "p50"),
    ("TTFT p99", "ttft", "p99"),
    ("TPOT p50", "tpot", "p50"),
    ("TPOT p99", "tpot", "p99"),
    ("E2E p50", "e2e", "p50"),
    ("E2E p99", "e2e", "p99"),
];

/// The headline of `b` against `a` at `step`.
pub(super) fn headline(
    a: &Value,
    b: &Value,
    step: usize,
    distributions: &[DistributionChange],
    thresholds: Thresholds,
) -> Headline {
    let figures = placed(
        figures(a, b, step, distributions, thresholds),
        [a, b],
        step,
        thresholds,
    );
    let worse: Vec<String> = changed(&figures, "worse");
    let better: Vec<String> = changed(&figures, "better");
    let (verdict, summary) = match (worse.is_empty(), better.is_empty()) {
        (true, true) => (
            "no significant change",
            "No headline figure changed significantly.".to_string(),
        ),
        (false, true) => ("regression", format!("Worse: {}.", worse.join(", "))),
        (true, false) => ("improvement", format!("Better: {}.", better.join(", "))),
        (false, false) => (
            "mixed",
            format!(
                "Worse: {}. Better: {}.",
                worse.join(", "),
                better.join(", ")
            ),
        ),
    };
    Headline {
        step,
        verdict,
        summary,
        figures,
    }
}

/// The headline figures of `step`, in reading order, with their paths below the step.
fn figures(
    a: &Value,
    b: &Value,
    step: usize,
    distributions: &[DistributionChange],
    thresholds: Thresholds,
) -> Vec<HeadlineFigure> {
    let (sa, sb) = (&a["steps"][step], &b["steps"][step]);
    let mut figures = vec![
        rate_figure(
            "throughput",
            "throughput.requests_per_sec",
            "requests.completed",
            [sa, sb],
            thresholds,
        ),
        rate_figure(
            "goodput",
            "goodput.requests_per_sec",
            "goodput.compliant",
            [sa, sb],
            thresholds,
        ),
        untested(
            "output tokens/s",
            "throughput.output_tokens_per_sec",
            "tok/s",
            [sa, sb],
        ),
    ];
    for (name, metric, quantile) in LATENCIES {
        let path = format!("latency_ms.{metric}.{quantile}");
        figures.push(latency_figure(
            name,
            &path,
            metric,
            [sa, sb],
            step,
            distributions,
        ));
    }
    for (name, quantile) in [("TTFAT p50", "p50"), ("TTFAT p99", "p99")] {
        let path = format!("reasoning.time_to_first_answer_ms.{quantile}");
        let f = latency_figure(name, &path, "ttfat", [sa, sb], step, distributions);
        figures.extend(in_both(f));
    }
    let per_sec = "reasoning.reasoning_tokens_per_sec";
    figures.extend(in_both(untested(
        "reasoning tokens/s",
        per_sec,
        "tok/s",
        [sa, sb],
    )));
    figures.push(error_rate([sa, sb], thresholds));
    figures.push(stability([sa, sb]));
    figures
}

/// One figure of `step` (`path` below the step, e.g. `latency_ms.ttft.p99`) judged as the
/// headline judges it: a headline figure with its test, another latency quantile of a tested
/// distribution with that distribution's test, any other figure untested.
pub(super) fn one_figure(
    [a, b]: [&Value; 2],
    step: usize,
    path: &str,
    distributions: &[DistributionChange],
    thresholds: Thresholds,
) -> HeadlineFigure {
    let (sa, sb) = (&a["steps"][step], &b["steps"][step]);
    let found = figures(a, b, step, distributions, thresholds)
        .into_iter()
        .find(|f| f.path == path);
    let tested = distributions
        .iter()
        .find(|d| d.step == step && !path.ends_with(".count"));
    let figure = match (found, tested) {
        (Some(f), _) => f,
        (None, Some(d)) => latency_figure("figure", path, &d.metric, [sa, sb], step, distributions),
        (None, None) => untested("figure", path, "", [sa, sb]),
    };
    placed(vec![figure], [a, b], step, thresholds)
        .pop()
        .unwrap_or_else(|| untested("figure", path, "", [sa, sb]))
}

/// The figures of `step` with their paths in the report, each judged across the runs where
/// both reports were repeated.
fn placed(
    mut figures: Vec<HeadlineFigure>,
    reports: [&Value; 2],
    step: usize,
    thresholds: Thresholds,
) -> Vec<HeadlineFigure> {
    for figure in &mut figures {
        across_runs(figure, reports, thresholds);
        if figure.test != ACROSS_RUNS {
            figure.path = format!("steps[{step}].{}", figure.path);
        }
    }
    figures
}

/// The test of a figure both runs measured several times (`goodput run --repeats`).
const ACROSS_RUNS: &str = "Welch t-test across runs";

/// With both reports repeated (`goodput run --repeats`), a figure both repeats sections give
/// is judged across their runs instead: the means of the runs' values, Welch's t-test of the
/// two sets (run-to-run noise counted, which one run's per-request tests cannot see); its
/// path then names the candidate's repeats figure.
fn across_runs(figure: &mut HeadlineFigure, [a, b]: [&Value; 2], thresholds: Thresholds) {
    let path = figure.path.clone();
    let (Some((_, va)), Some((index, vb))) = (run_values(a, &path), run_values(b, &path)) else {
        return;
    };
    let Some(p) = welch(&va, &vb) else { return };
    let mean = |v: &[f64]| moments(v).0;
    let mut judged = self::figure(
        figure.name,
        &format!("repeats.figures[{index}].mean"),
        figure.unit,
        Some(mean(&va)),
        Some(mean(&vb)),
    );
    judged.test = ACROSS_RUNS;
    judged.p_value = Some(p);
    judged.verdict = judge(p, judged.relative, figure.unit == "ms", thresholds);
    *figure = judged;
}

fn changed(figures: &[HeadlineFigure], verdict: &str) -> Vec<String> {
    figures
        .iter()
        .filter(|f| f.verdict == verdict)
        .map(|f| match f.relative {
            Some(r) => format!("{} {:+.1} %", f.name, r * 100.0),
            None => f.name.to_string(),
        })
        .collect()
}

/// A figure of the report root (not of a step), untested.
pub(super) fn root_figure(path: &str, a: Option<f64>, b: Option<f64>) -> HeadlineFigure {
    figure("figure", path, "", a, b)
}

fn figure(
    name: &'static str,
    path: &str,
    unit: &'static str,
    a: Option<f64>,
    b: Option<f64>,
) -> HeadlineFigure {
    let delta = a.zip(b).map(|(x, y)| y - x);
    HeadlineFigure {
        name,
        path: path.to_string(),
        unit,
        a,
        b,
        a_text: None,
        b_text: None,
        delta,
        relative: a
            .zip(delta)
            .and_then(|(x, d)| (x != 0.0).then(|| d / x.abs())),
        test: "none",
        p_value: None,
        verdict: "not tested",
    }
}

fn untested(
    name: &'static str,
    path: &str,
    unit: &'static str,
    [a, b]: [&Value; 2],
) -> HeadlineFigure {
    figure(name, path, unit, number_at(a, path), number_at(b, path))
}

/// Whether a change with p-value `p` and relative size `relative` counts, and which way.
fn judge(
    p: f64,
    relative: Option<f64>,
    higher_is_worse: bool,
    thresholds: Thresholds,
) -> &'static str {
    let big = relative.is_none_or(|r| r.abs() >= thresholds.min_effect);
    match relative {
        _ if !(p < thresholds.alpha && big) => "no significant change",
        Some(r) if (r > 0.0) == higher_is_worse => "worse",
        None if higher_is_worse => "worse",
        _ => "better",
    }
}

/// A per-second rate (`path`) whose numerator is the count at `count`, over each step's
/// measured window: two Poisson rates compared by a z-test.
fn rate_figure(
    name: &'static str,
    path: &str,
    count: &str,
    [a, b]: [&Value; 2],
    thresholds: Thresholds,
) -> HeadlineFigure {
    let mut f = untested(name, path, "req/s", [a, b]);
    let side = |s: &Value| {
        number_at(s, count)
            .zip(number_at(s, "duration_secs"))
            .filter(|(_, t)| *t > 0.0)
    };
    let (Some((na, ta)), Some((nb, tb))) = (side(a), side(b)) else {
        return f;
    };
    let variance = na / (ta * ta) + nb / (tb * tb);
    if variance <= 0.0 {
        return f;
    }
    let z = (nb / tb - na / ta) / variance.sqrt();
    let p = (2.0 * normal_upper_tail(z.abs())).min(1.0);
    f.test = "Poisson rate z-test";
    f.p_value = Some(p);
    f.verdict = judge(p, f.relative, false, thresholds);
    f
}

/// A figure only some runs have (reasoning): kept when both runs have it, else omitted.
fn in_both(figure: HeadlineFigure) -> Option<HeadlineFigure> {
    (figure.a.is_some() && figure.b.is_some()).then_some(figure)
}

/// The latency at `path`, judged by the distribution test of `metric`.
fn latency_figure(
    name: &'static str,
    path: &str,
    metric: &str,
    [a, b]: [&Value; 2],
    step: usize,
    distributions: &[DistributionChange],
) -> HeadlineFigure {
    let mut f = untested(name, path, "ms", [a, b]);
    if let Some(d) = distributions
        .iter()
        .find(|d| d.step == step && d.metric == metric)
    {
        f.test = d.test.method.describe();
        f.p_value = Some(d.test.p_value);
        f.verdict = match d.verdict.as_str() {
            "regression" => "worse",
            "improvement" => "better",
            _ => "no significant change",
        };
    }
    f
}

/// Failed over finished requests, in percent; a two-proportion z-test.
fn error_rate([a, b]: [&Value; 2], thresholds: Thresholds) -> HeadlineFigure {
    let counts = |s: &Value| {
        let failed = number_at(s, "requests.failed")?;
        let total = failed + number_at(s, "requests.completed")?;
        (total > 0.0).then_some((failed, total))
    };
    let (ca, cb) = (counts(a), counts(b));
    let percent = |c: Option<(f64, f64)>| c.map(|(f, n)| 100.0 * f / n);
    let mut f = figure(
        "error rate",
        "requests.failed",
        "%",
        percent(ca),
        percent(cb),
    );
    let (Some((fa, na)), Some((fb, nb))) = (ca, cb) else {
        return f;
    };
    let pooled = (fa + fb) / (na + nb);
    let variance = pooled * (1.0 - pooled) * (1.0 / na + 1.0 / nb);
    f.test = "two-proportion z-test";
    let p = if variance > 0.0 {
        (2.0 * normal_upper_tail(((fb / nb - fa / na) / variance.sqrt()).abs())).min(1.0)
    } else {
        1.0
    };
    f.p_value = Some(p);
    f.verdict = judge(p, f.relative, true, thresholds);
    f
}

fn stability([a, b]: [&Value; 2]) -> HeadlineFigure {
    let word = |s: &Value| s["stability"]["verdict"].as_str().map(str::to_string);
    let mut f = figure("stability", "stability.verdict", "", None, None);
    f.a_text = word(a);
    f.b_text = word(b);
    let stable = |s: &Value| s["stability"]["stable"].as_bool();
    f.test = "verdict";
    f.verdict = match (stable(a), stable(b)) {
        (Some(true), Some(false)) => "worse",
        (Some(false), Some(true)) => "better",
        (Some(_), Some(_)) => "no significant change",
        _ => "not tested",
    };
    f
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    fn step(completed: u64, failed: u64, secs: f64, stable: bool) -> Value {
        json!({"steps": [{
            "duration_secs": secs,
            "requests": {"completed": completed, "failed": failed},
            "throughput": {"requests_per_sec": completed as f64 / secs},
            "goodput": {"requests_per_sec": completed as f64 / secs, "compliant": completed},
            "latency_ms": {"e2e": {"p50": 100.0, "p99": 200.0}},
            "stability": {"stable": stable, "verdict": if stable { "stable" } else { "unstable" }}
        }]})
    }

    #[test]
    fn a_large_throughput_drop_and_new_errors_are_worse() {
        let a = step(2000, 0, 100.0, true);
        let b = step(1500, 60, 100.0, false);
        let h = headline(&a, &b, 0, &[], Thresholds::default());
        let get = |name: &str| h.figures.iter().find(|f| f.name == name).unwrap();
        assert_eq!(get("throughput").verdict, "worse");
        assert!(get("throughput").p_value.unwrap() < 1e-6);
        assert_eq!(get("error rate").verdict, "worse");
        assert_eq!(get("stability").verdict, "worse");
        assert_eq!(
            get("E2E p99").verdict,
            "not tested",
            "no distribution test given"
        );
        assert_eq!(get("E2E p99").path, "steps[0].latency_ms.e2e.p99");
        assert_eq!(h.verdict, "regression");
        assert!(
            h.summary.starts_with("Worse: throughput -25.0 %"),
            "{}",
            h.summary
        );
    }

    #[test]
    fn the_same_counts_are_no_change() {
        let a = step(500, 5, 50.0, true);
        let h = headline(&a, &a, 0, &[], Thresholds::default());
        assert_eq!(h.verdict, "no significant change");
        let rate = h.figures.iter().find(|f| f.name == "throughput").unwrap();
        assert_eq!(
            (rate.delta, rate.verdict),
            (Some(0.0), "no significant change")
        );
    }

    #[test]
    fn a_small_but_certain_change_is_below_the_minimum_effect() {
        let a = step(1_000_000, 0, 100.0, true);
        let b = step(1_020_000, 0, 100.0, true);
        let h = headline(&a, &b, 0, &[], Thresholds::default());
        let rate = h.figures.iter().find(|f| f.name == "throughput").unwrap();
        assert!(rate.p_value.unwrap() < 0.01);
        assert_eq!(
            rate.verdict, "no significant change",
            "2 % < min_effect 5 %"
        );
    }
}
