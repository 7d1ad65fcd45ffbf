//! Methodology checks that need the run's description as well as its steps (the rest are in
//! [`crate::methodology::warnings`]): inputs far shorter than the stated workload, hardware and precision
//! not recorded for a real target, and throughput still trending at the end of the window.
//! Each warning names the fix.

use serde_json::Value;

use crate::metrics::windows::WindowReport;
use crate::report::{RunInfo, StepReport, Warning};

/// Realised prompt length below this fraction of the stated one is flagged.
pub const SHORT_INPUT_FRACTION: f64 = 0.75;

/// Fewest complete windows a throughput trend is judged on.
pub const TREND_MIN_WINDOWS: usize = 6;

/// Tag keys that record the hardware.
pub const HARDWARE_TAGS: [&str; 5] = ["gpu", "accelerator", "accelerators", "hardware", "instance"];
/// Tag keys that record the numeric precision.
pub const PRECISION_TAGS: [&str; 4] = ["precision", "dtype", "quantization", "quant"];

/// Every run-level check on `run` and its `steps`.
pub fn check_run(run: &RunInfo, steps: &[StepReport]) -> Vec<Warning> {
    let mut warnings = Vec::new();
    check_hardware_recorded(run, &mut warnings);
    for step in steps {
        check_input_length(run, step, &mut warnings);
        check_throughput_trend(step, &mut warnings);
    }
    warnings
}

/// A real target's numbers mean little without the hardware and precision behind them.
fn check_hardware_recorded(run: &RunInfo, warnings: &mut Vec<Warning>) {
    if run.target.starts_with("embedded simulator") {
        return;
    }
    let has = |keys: &[&str]| {
        run.tags
            .keys()
            .any(|k| keys.contains(&k.to_ascii_lowercase().as_str()))
    };
    let mut missing = Vec::new();
    if !has(&HARDWARE_TAGS) {
        missing.push("hardware");
    }
    if !has(&PRECISION_TAGS) {
        missing.push("precision");
    }
    if !missing.is_empty() {
        warnings.push(Warning::new(
            "hardware_not_recorded",
            format!(
                "the report does not record the server's {}",
                missing.join(" or ")
            ),
            "tag the run: --tag gpu=H100 --tag accelerators=8 --tag precision=fp8",
        ));
    }
}

/// Prompts much shorter than the workload states (truncation, a different tokenizer).
fn check_input_length(run: &RunInfo, step: &StepReport, warnings: &mut Vec<Warning>) {
    let stated = run.workload.get("input_tokens").and_then(Value::as_f64);
    let realised = step.tokens.input_per_request.mean;
    if let (Some(stated), Some(realised)) = (stated, realised)
        && stated > 0.0
        && realised < SHORT_INPUT_FRACTION * stated
    {
        warnings.push(Warning::new(
            "short_inputs",
            format!("prompts averaged {realised:.0} tokens, far below the stated {stated:.0}; the server saw a lighter workload than described"),
            "check the server's tokenizer and context limit, or state the realised length",
        ));
    }
}

/// Completions per window over the measurement interval, complete windows only.
fn measured_windows(step: &StepReport) -> Vec<&WindowReport> {
    let start = step.window_start_secs;
    let end = start + step.duration_secs;
    let width = match step.windows.as_slice() {
        [first, second, ..] => second.start_secs - first.start_secs,
        _ => return Vec::new(),
    };
    step.windows
        .iter()
        .filter(|w| w.start_secs >= start && w.start_secs + width <= end)
        .collect()
}

/// Throughput that is still rising or falling at the end means the window did not reach a
/// steady state: least-squares slope of completions per window with a t-statistic above 3
/// and a total change over the window above 20 % of the mean.
fn check_throughput_trend(step: &StepReport, warnings: &mut Vec<Warning>) {
    let windows = measured_windows(step);
    if windows.len() < TREND_MIN_WINDOWS {
        return;
    }
    let ys: Vec<f64> = windows.iter().map(|w| w.completions as f64).collect();
    let Some((slope, t_stat, mean)) = least_squares(&ys) else {
        return;
    };
    let change = slope * (ys.len() - 1) as f64;
    if t_stat.abs() > 3.0 && change.abs() > 0.2 * mean && mean > 0.0 {
        let direction = if slope > 0.0 { "rising" } else { "falling" };
        warnings.push(Warning::new(
            "throughput_trending",
            format!(
                "completions per window were still {direction} at the end ({:+.0} % over the measurement window); the figures are not a steady state",
                100.0 * change / mean
            ),
            "measure longer, or warm up longer (--warmup) so the run reaches a steady state",
        ));
    }
}

/// Slope per index, its t-statistic, and the mean of `ys`.
fn least_squares(ys: &[f64]) -> Option<(f64, f64, f64)> {
    let n = ys.len() as f64;
    let mean_x = (n - 1.0) / 2.0;
    let mean_y = ys.iter().sum::<f64>() / n;
    let sxx: f64 = (0..ys.len()).map(|i| (i as f64 - mean_x).powi(2)).sum();
    let sxy: f64 = ys
        .iter()
        .enumerate()
        .map(|(i, y)| (i as f64 - mean_x) * (y - mean_y))
        .sum();
    let slope = sxy / sxx;
    let residual: f64 = ys
        .iter()
        .enumerate()
        .map(|(i, y)| (y - mean_y - slope * (i as f64 - mean_x)).powi(2))
        .sum();
    let standard_error = (residual / (n - 2.0) / sxx).sqrt();
    let t_stat = if standard_error > 0.0 {
        slope / standard_error
    } else if slope == 0.0 {
        0.0
    } else {
        f64::INFINITY.copysign(slope)
    };
    (sxx > 0.0).then_some((slope, t_stat, mean_y))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::BTreeMap;

    use super::*;
    use crate::metrics::StepAggregator;
    use crate::report::LoadReport;

    fn run(target: &str, tags: &[(&str, &str)]) -> RunInfo {
        RunInfo {
            started_at: "2026-01-01T00:00:00Z".into(),
            command_line: vec![],
            seed: 1,
            target: target.into(),
            api: "chat".into(),
            model: "m".into(),
            stream: true,
            workload: BTreeMap::from([("input_tokens".to_string(), 1000.into())]),
            slo: None,
            window_secs: 1.0,
            time_scale: 1.0,
            item_unit: "items".into(),
            end_reason: "completed".into(),
            tags: tags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            client_host: None,
            server_info: None,
            classes: Vec::new(),
        }
    }

    fn step(completions: &[u64]) -> StepReport {
        let mut step = StepAggregator::new(None, std::time::Duration::from_secs(1)).report(
            LoadReport::from(&crate::config::LoadSpec::Closed { concurrency: 1 }),
        );
        step.window_start_secs = 0.0;
        step.duration_secs = completions.len() as f64;
        step.windows = completions
            .iter()
            .enumerate()
            .map(|(i, &c)| WindowReport {
                start_secs: i as f64,
                arrivals: c,
                sent: c,
                completions: c,
                failures: 0,
                output_tokens: 0,
                in_flight: 0,
                mean_ttft_ms: None,
                mean_e2e_ms: None,
                slo_attained: None,
            })
            .collect();
        step
    }

    fn codes(run: &RunInfo, steps: &[StepReport]) -> Vec<String> {
        check_run(run, steps).into_iter().map(|w| w.code).collect()
    }

    #[test]
    fn hardware_tags_are_required_for_real_targets() {
        let flat = step(&[10; 8]);
        assert_eq!(
            codes(&run("http://x/v1", &[]), std::slice::from_ref(&flat)),
            ["hardware_not_recorded"]
        );
        let tagged = run("http://x/v1", &[("gpu", "H100"), ("precision", "fp8")]);
        assert!(codes(&tagged, std::slice::from_ref(&flat)).is_empty());
        assert!(codes(&run("embedded simulator (x)", &[]), &[flat]).is_empty());
    }

    #[test]
    fn a_rising_throughput_is_flagged_and_a_flat_one_is_not() {
        let sim = run("embedded simulator", &[]);
        assert_eq!(
            codes(&sim, &[step(&[2, 4, 6, 8, 10, 12, 14, 16])]),
            ["throughput_trending"]
        );
        assert!(codes(&sim, &[step(&[10, 11, 9, 10, 10, 11, 9, 10])]).is_empty());
    }

    #[test]
    fn short_inputs_are_flagged() {
        let mut s = step(&[10; 8]);
        s.tokens.input_per_request.mean = Some(400.0);
        assert_eq!(
            codes(&run("embedded simulator", &[]), &[s]),
            ["short_inputs"]
        );
    }
}
