//! Tests of the repeats section and Welch's test against arithmetic done by hand.

use super::*;

#[test]
fn a_figure_gives_its_mean_spread_and_the_t_interval_of_its_mean() {
    let values = [1.0, 2.0, 3.0, 4.0, 5.0].map(Some).to_vec();
    let f = figure("TTFT p50", "latency_ms.ttft.p50", "ms", values).unwrap_or_else(|| panic!());
    // Mean 3, sd √2.5 = 1.5811; t(0.975, 4) = 2.7764 (tables): half-width 1.9632.
    assert!((f.mean - 3.0).abs() < 1e-12);
    assert!((f.sd.unwrap_or(0.0) - 2.5f64.sqrt()).abs() < 1e-12);
    assert!((f.ci_low.unwrap_or(0.0) - 1.0368).abs() < 1e-3, "{f:?}");
    assert!((f.ci_high.unwrap_or(0.0) - 4.9632).abs() < 1e-3, "{f:?}");
    assert!((f.cv.unwrap_or(0.0) - 2.5f64.sqrt() / 3.0).abs() < 1e-12);
    assert_eq!((f.min, f.max), (1.0, 5.0));
}

#[test]
fn a_run_without_the_figure_is_left_out_of_its_statistics() {
    let f = figure("E2E p99", "latency_ms.e2e.p99", "ms", vec![Some(4.0), None])
        .unwrap_or_else(|| panic!());
    assert_eq!((f.mean, f.sd, f.ci_low), (4.0, None, None));
    assert_eq!(f.values, vec![Some(4.0), None]);
    assert!(figure("x", "x", "ms", vec![None, None]).is_none());
}

#[test]
fn welch_matches_the_closed_form_at_two_degrees_of_freedom() {
    // Two runs a side with equal spread: Welch–Satterthwaite gives df = 2 exactly, and
    // P(|T| > t) = 1 − t / √(2 + t²) there. a = {0, 2}, b = {4, 6}: t = 4 / √2.
    let p = welch(&[0.0, 2.0], &[4.0, 6.0]).unwrap_or(f64::NAN);
    let t = 4.0 / 2f64.sqrt();
    let expected = 1.0 - t / (2.0 + t * t).sqrt();
    assert!((p - expected).abs() < 1e-9, "{p} vs {expected}");
    // {10, 11, 12} against {13, 14, 15, 16}: t = 4.0415, df = 4.959 — between the tables'
    // two-sided 1 % points at df 4 (4.604) and 5 (4.032): p just above 0.01.
    let p = welch(&[10.0, 11.0, 12.0], &[13.0, 14.0, 15.0, 16.0]).unwrap_or(f64::NAN);
    assert!(p > 0.01 && p < 0.012, "{p}");
    // Identical runs never differ; constant but different runs always do.
    assert_eq!(welch(&[5.0, 5.0], &[5.0, 5.0]), Some(1.0));
    assert_eq!(welch(&[5.0, 5.0], &[6.0, 6.0]), Some(0.0));
    assert_eq!(welch(&[5.0], &[6.0, 7.0]), None);
}

#[test]
fn run_values_are_read_from_a_reports_repeats_section() {
    let report = serde_json::json!({"repeats": {"figures": [
        {"path": "latency_ms.ttft.p50", "values": [1.0, null, 3.0]},
    ]}});
    assert_eq!(
        run_values(&report, "latency_ms.ttft.p50"),
        Some((0, vec![1.0, 3.0]))
    );
    assert_eq!(run_values(&report, "latency_ms.e2e.p50"), None);
    assert_eq!(run_values(&serde_json::json!({}), "x"), None);
}
