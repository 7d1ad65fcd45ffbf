//! One figure of two reports judged as a comparison's headline judges it, without comparing
//! everything else: what a figure's trend across recorded runs marks.

use serde_json::Value;

use super::{
    DistributionChange, HeadlineFigure, Side, TESTED_METRICS, headline, step_count,
    test_distribution,
};
use crate::decide::report_path::lookup;
use crate::decide::significance::Thresholds;

/// One figure of `b` against `a` (`path` a full report path, as
/// [`report_path::resolve`](crate::decide::report_path::resolve) gives it, e.g.
/// `steps[0].latency_ms.ttft.p99`), judged as [`super::compare`]'s headline judges it — a headline
/// figure with its test, another quantile of a tested latency distribution (`latency_ms.ttft`,
/// `.tpot`, `.e2e`, `reasoning.time_to_first_answer_ms`) by that distribution's bootstrap
/// over the reports' quantile points, any other figure with its change only (`not tested`).
/// What the trend of a figure across recorded runs marks ([`crate::decide::history`]).
pub fn figure_change(a: &Value, b: &Value, path: &str, thresholds: Thresholds) -> HeadlineFigure {
    let (step, below) = match step_and_rest(path) {
        Some((step, rest)) if step < step_count(a).min(step_count(b)) => (step, rest),
        _ => {
            let value = |r: &Value| lookup(r, path).and_then(Value::as_f64);
            return headline::root_figure(path, value(a), value(b));
        }
    };
    let metric = if let Some(rest) = below.strip_prefix("latency_ms.") {
        TESTED_METRICS
            .iter()
            .find(|m| rest.split('.').next() == Some(**m))
            .copied()
    } else if below.starts_with("reasoning.time_to_first_answer_ms.") {
        Some("ttfat")
    } else {
        None
    };
    let side = |report| Side {
        report,
        samples: None,
    };
    let distributions: Vec<DistributionChange> = metric
        .and_then(|m| test_distribution(side(a), side(b), step, m, thresholds))
        .into_iter()
        .collect();
    headline::one_figure([a, b], step, below, &distributions, thresholds)
}

/// `steps[3].latency_ms.e2e.p99` → `(3, "latency_ms.e2e.p99")`.
fn step_and_rest(path: &str) -> Option<(usize, &str)> {
    let rest = path.strip_prefix("steps[")?;
    let (index, rest) = rest.split_once("].")?;
    Some((index.parse().ok()?, rest))
}
