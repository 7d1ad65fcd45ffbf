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

/// A step whose throughput and E2E p50 are the given ones.
fn step(requests_per_sec: f64, e2e_p50: f64) -> StepReport {
    let mut value = serde_json::to_value(
        crate::metrics::StepAggregator::new(None, std::time::Duration::from_secs(1)).report(
            crate::report::LoadReport::from(&crate::config::LoadSpec::Closed { concurrency: 1 }),
        ),
    )
    .unwrap_or_default();
    value["throughput"]["requests_per_sec"] = requests_per_sec.into();
    value["latency_ms"]["e2e"]["p50"] = e2e_p50.into();
    serde_json::from_value(value).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_repeated_sweeps_levels_are_its_rounds_and_its_knee_is_on_their_means() {
    use crate::decide::sweep::{SweepDimension, SweepReport, conclude};
    // Two rounds of levels 1, 2, 4. Round 2's level 2 is a noisy outlier (no gain over
    // level 1 on its own: a knee at level 1 if that round were alone), but on the means
    // level 2 still gains 50 % and level 4 nothing while E2E rises: the knee is level 2.
    let steps = [
        step(10.0, 100.0),
        step(20.0, 110.0),
        step(20.0, 200.0),
        step(10.0, 100.0),
        step(10.0, 110.0),
        step(10.0, 200.0),
    ];
    let plan = SweepReport {
        dimension: SweepDimension::Concurrency,
        loads: vec![1.0, 2.0, 4.0],
        repeats: Some(2),
        knee_min_gain: 0.1,
        knee: None,
    };
    let (sweep, repeats) = conclude(&plan, &steps);
    let knee = sweep.knee.unwrap_or_else(|| panic!("no knee"));
    assert_eq!((knee.step, knee.load), (1, 2.0));
    assert!(knee.next_throughput_gain.abs() < 1e-12, "{knee:?}");
    let repeats = repeats.unwrap_or_else(|| panic!("no repeats"));
    assert_eq!(repeats.runs, 2);
    let levels = repeats.levels.unwrap_or_default();
    assert_eq!(levels[1].steps, vec![1, 4]);
    let rate = levels[1]
        .figures
        .iter()
        .find(|f| f.path == "throughput.requests_per_sec")
        .unwrap_or_else(|| panic!("no throughput"));
    assert_eq!(
        (rate.mean, rate.values.clone()),
        (15.0, vec![Some(20.0), Some(10.0)])
    );
    // One round: the plain knee on the steps, no repeats section.
    let one = SweepReport {
        repeats: None,
        loads: vec![1.0, 2.0, 4.0],
        ..plan
    };
    let (sweep, repeats) = conclude(&one, &steps[..3]);
    assert_eq!(sweep.knee.map(|k| k.step), Some(1));
    assert!(repeats.is_none());
}

#[test]
fn searches_give_the_capacity_across_them_and_say_which_proved_nothing() {
    let search = |lower: Option<f64>, upper: Option<f64>, first: usize| {
        serde_json::from_value::<CapacityReport>(serde_json::json!({
            "dimension": "rate", "lower_bound": lower, "upper_bound": upper,
            "undecided_loads": [], "spent_secs": 0.0, "slo": "ttft=1s",
            "attainment_target": 0.99, "confidence": 0.95, "requests_per_probe": 100,
            "conclusion": "converged", "probes": [], "first_probe_step": first,
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let (a, b, c) = (
        search(Some(9.0), Some(10.0), 1),
        search(Some(10.0), Some(11.0), 6),
        search(None, Some(0.1), 11),
    );
    let report = searches(&[(0, 5, &a), (5, 5, &b), (10, 3, &c)]);
    let capacity = report.capacity.unwrap_or_else(|| panic!("no section"));
    let figure = capacity.capacity.unwrap_or_else(|| panic!("no capacity"));
    // Two proved loads, 9 and 10: mean 9.5, sd √0.5, t(0.975, 1) = 12.706.
    assert_eq!(figure.values, vec![Some(9.0), Some(10.0), None]);
    assert!((figure.mean - 9.5).abs() < 1e-12);
    let half = figure.ci_high.unwrap_or(0.0) - 9.5;
    assert!(
        (half - 12.706 * 0.5f64.sqrt() / 2f64.sqrt()).abs() < 1e-2,
        "{half}"
    );
    assert_eq!(capacity.searches[1].first_probe_step, 6);
    assert!(
        capacity
            .conclusion
            .contains("9.50 ± 6.35 req/s across 2 searches"),
        "{}",
        capacity.conclusion
    );
    assert!(
        capacity
            .conclusion
            .contains("1 of 3 searches proved no load"),
        "{}",
        capacity.conclusion
    );
    assert_eq!(report.runs, 3);
}
