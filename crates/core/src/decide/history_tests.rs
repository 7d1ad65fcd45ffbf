//! Tests of grouping, listing and trends across recorded runs, with significance marks as
//! compare judges them.
#![allow(clippy::unwrap_used)]

use serde_json::json;

use super::*;

/// A one-step report whose TTFT is spread evenly over ±20 % of `ttft` (400 requests), with
/// `completed` requests over 10 s.
fn report(ttft: f64, completed: u64) -> Value {
    let points: Vec<[f64; 2]> = (0..=100)
        .map(|p| [f64::from(p), ttft * (0.8 + 0.4 * f64::from(p) / 100.0)])
        .collect();
    json!({
        "run": {"model": "m"},
        "steps": [{
            "duration_secs": 10.0,
            "requests": {"completed": completed, "failed": 0, "scheduled": completed},
            "throughput": {"requests_per_sec": completed as f64 / 10.0},
            "latency_ms": {"ttft": {"p50": ttft, "p99": ttft * 1.2, "count": 400}},
            "distributions_ms": {"ttft": points, "tpot": [], "itl": [], "e2e": []}
        }],
        "warnings": [{"code": "x"}]
    })
}

fn tags(version: &str) -> BTreeMap<String, String> {
    BTreeMap::from([("version".to_string(), version.to_string())])
}

#[test]
fn grouping_parses_and_names_the_series() {
    assert_eq!(GroupBy::parse("model"), Ok(GroupBy::Model));
    assert_eq!(GroupBy::parse(""), Ok(GroupBy::Nothing));
    assert_eq!(
        GroupBy::parse("tag:version"),
        Ok(GroupBy::Tag("version".into()))
    );
    assert!(GroupBy::parse("tag:").is_err() && GroupBy::parse("host").is_err());
    let (report, none) = (report(200.0, 400), BTreeMap::new());
    let run = RecordedRun {
        id: 1,
        started_at: "2026-01-01T00:00:00Z",
        model: "m",
        target: "t",
        tags: &none,
        report: &report,
    };
    assert_eq!(GroupBy::Tag("version".into()).group(&run), "(untagged)");
    assert_eq!(GroupBy::Target.group(&run), "t");
}

#[test]
fn a_listed_run_has_its_kind_figures_and_warnings() {
    let row = listed(&report(200.0, 400));
    assert_eq!((row.kind, row.steps, row.warnings), ("run", 1, 1));
    assert_eq!(row.figures.len(), LISTED.len());
    assert_eq!(row.figures[0], Some(40.0));
    assert_eq!(row.figures[3], Some(240.0), "TTFT p99");
    assert_eq!(row.figures[5], Some(0.0), "error rate");
    let mut capacity = report(200.0, 400);
    capacity["capacity"] = json!({"lower_bound": 12.5});
    let row = listed(&capacity);
    assert_eq!((row.kind, row.capacity), ("capacity", Some(12.5)));
}

#[test]
fn each_run_is_judged_against_the_previous_run_of_its_series() {
    let reports = [
        report(200.0, 400),
        report(200.0, 400),
        report(260.0, 400),
        report(201.0, 400),
    ];
    let versions = [tags("1"), tags("2"), tags("2"), tags("1")];
    let runs: Vec<RecordedRun<'_>> = reports
        .iter()
        .zip(&versions)
        .enumerate()
        .map(|(i, (report, tags))| RecordedRun {
            id: i as i64 + 1,
            started_at: "2026-01-01T00:00:00Z",
            model: "m",
            target: "t",
            tags,
            report,
        })
        .collect();
    let by = GroupBy::Tag("version".into());
    let t = trend(&runs, "ttft.p99", &by, Thresholds::default()).unwrap();
    assert_eq!(
        (t.path.as_str(), t.unit, t.by.as_str()),
        ("steps[0].latency_ms.ttft.p99", "ms", "tag:version")
    );
    let verdicts: Vec<&str> = t.points.iter().map(|p| p.verdict).collect();
    assert_eq!(
        verdicts,
        ["first", "first", "worse", "no significant change"],
        "{t:?}"
    );
    let slower = &t.points[2];
    assert_eq!(slower.previous, Some(2), "its own series' previous run");
    assert!((slower.relative.unwrap() - 0.3).abs() < 1e-9);
    assert!(slower.test.starts_with("bootstrap"), "{}", slower.test);
    assert!(slower.p_value.unwrap() < 0.01);
    assert_eq!(t.points[3].previous, Some(1));
    let names: Vec<(&str, usize, usize)> = t
        .groups
        .iter()
        .map(|g| (g.name.as_str(), g.values.len(), g.worse))
        .collect();
    assert_eq!(names, [("1", 2, 0), ("2", 2, 1)]);
}

#[test]
fn throughput_is_judged_by_the_rate_test_and_unknown_figures_fail() {
    let reports = [report(200.0, 400), report(200.0, 300)];
    let none = BTreeMap::new();
    let runs: Vec<RecordedRun<'_>> = reports
        .iter()
        .enumerate()
        .map(|(i, report)| RecordedRun {
            id: i as i64 + 1,
            started_at: "2026-01-01T00:00:00Z",
            model: "m",
            target: "t",
            tags: &none,
            report,
        })
        .collect();
    let t = trend(
        &runs,
        "requests_per_sec",
        &GroupBy::Nothing,
        Thresholds::default(),
    )
    .unwrap();
    assert_eq!(t.points[1].verdict, "worse");
    assert_eq!(t.points[1].test, "Poisson rate z-test");
    let errors = trend(
        &runs,
        "error_rate",
        &GroupBy::Nothing,
        Thresholds::default(),
    )
    .unwrap();
    assert_eq!(errors.points[1].test, "two-proportion z-test");
    assert_eq!(errors.points[1].verdict, "no significant change");
    let untested = trend(
        &runs,
        "requests.completed",
        &GroupBy::Nothing,
        Thresholds::default(),
    );
    assert_eq!(untested.unwrap().points[1].verdict, "not tested");
    assert!(
        trend(
            &runs,
            "no_such_figure",
            &GroupBy::Nothing,
            Thresholds::default()
        )
        .is_err()
    );
    assert!(trend(&[], "anything", &GroupBy::Nothing, Thresholds::default()).is_ok());
}
