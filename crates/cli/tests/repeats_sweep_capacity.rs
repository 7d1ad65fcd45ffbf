//! `goodput sweep --repeats N` and `goodput capacity --repeats N` against engines whose answer
//! is known: the embedded simulator's fixed-timing engine (4 slots of 300 ms: c / 0.3
//! requests/s at concurrency c ≤ 4, capacity 13.33 requests/s) in virtual time and live, and
//! an exact 20 ms step server — each level's means those of its steps, each search's capacity
//! and the capacity across them, the terminal, report.html and the journal's rebuild.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;

use serde_json::Value;
use support::step_server::steps_of as server;
use support::{goodput, read_json, validate_against_schema};

/// The values of `figure` (a path within a step) in `steps`, for the step indices `at`.
fn step_values(report: &Value, at: &[usize], path: &str) -> Vec<f64> {
    at.iter()
        .map(|&i| {
            path.split('.')
                .fold(&report["steps"][i], |v, key| &v[key])
                .as_f64()
                .unwrap()
        })
        .collect()
}

fn level_figure<'a>(level: &'a Value, path: &str) -> &'a Value {
    let figures = level["figures"].as_array().unwrap();
    figures.iter().find(|f| f["path"] == path).unwrap()
}

/// `goodput sweep --virtual-time` of the 4-slot, 300 ms fixed-timing engine with `args`.
fn virtual_sweep(sim: &Path, out: &Path, args: &[&str]) -> (Value, String) {
    let output = goodput()
        .args([
            "sweep",
            "--virtual-time",
            "--sim-config",
            sim.to_str().unwrap(),
        ])
        .args([
            "--output-tokens",
            "6",
            "--seed",
            "7",
            "--out",
            out.to_str().unwrap(),
        ])
        .args(args)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    (read_json(&out.join("report.json")), stdout)
}

/// Level `i` of the closed-loop sweep of concurrency 1, 2, 4, 8 (three rounds) of the 4-slot,
/// 300 ms engine: its steps are one a round, its means those of its steps, its throughput
/// c / 0.3 (c at most 4) and its TPOT 20 ms.
fn assert_closed_loop_level(report: &Value, i: usize, level: &Value) {
    let at: Vec<usize> = (0..3).map(|round| round * 4 + i).collect();
    let steps: Vec<usize> = level["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_u64().unwrap() as usize)
        .collect();
    assert_eq!(steps, at, "all levels once, then again");
    for &step in &at {
        let concurrency = report["steps"][step]["load"]["concurrency"].as_f64();
        assert_eq!(concurrency, level["load"].as_f64());
    }
    for path in ["throughput.requests_per_sec", "latency_ms.e2e.p50"] {
        let values = step_values(report, &at, path);
        let mean = values.iter().sum::<f64>() / 3.0;
        let figure = level_figure(level, path);
        assert!(
            (figure["mean"].as_f64().unwrap() - mean).abs() < 1e-9,
            "{figure}"
        );
    }
    let c = level["load"].as_f64().unwrap().min(4.0);
    let rate = level_figure(level, "throughput.requests_per_sec")["mean"]
        .as_f64()
        .unwrap();
    assert!(
        (rate / (c / 0.3) - 1.0).abs() < 0.03,
        "level {i}: {rate} req/s"
    );
    let tpot = level_figure(level, "latency_ms.tpot.p50")["mean"]
        .as_f64()
        .unwrap();
    assert!((tpot - 20.0).abs() < 0.2, "level {i}: TPOT {tpot}");
}

/// report.html of the closed-loop sweep.
fn assert_page_shows_levels(page: &Path) {
    // report.html: the knee on the means, each level's mean and interval as a table and charts
    // (mean, both ends of the interval, one point a level each).
    let dom = support::rendered_dom(page);
    assert_eq!(
        support::attribute_of(&dom, "render-status", "data-error"),
        None
    );
    assert!(dom.contains("id=\"repeats\""), "no repeats section");
    assert!(dom.contains("Knee at level 3"), "no knee on the levels");
    let charts = support::charts(&dom);
    for title in [
        "requests/s per level across runs",
        "E2E p50 ms per level across runs",
    ] {
        assert!(
            charts.contains(&(title.to_string(), 12)),
            "{title}: {charts:?}"
        );
    }
}

#[test]
fn a_repeated_sweep_runs_rounds_of_its_levels_and_gives_each_levels_mean_of_its_runs() {
    let dir = tempfile::tempdir().unwrap();
    let sim = support::four_slot_sim(dir.path(), 1.0);
    // Closed loop: 4 slots of 300 ms each serve c / 0.3 requests/s up to c = 4, then no more
    // while latency doubles at 8: the knee is the level of concurrency 4, in every round.
    let (report, stdout) = virtual_sweep(
        &sim,
        &dir.path().join("closed"),
        &[
            "--concurrency-steps",
            "1,2,4,8",
            "--requests",
            "60",
            "--repeats",
            "3",
        ],
    );
    validate_against_schema(&report);
    assert_eq!(report["steps"].as_array().unwrap().len(), 12);
    assert_eq!(report["sweep"]["repeats"], 3);
    assert_eq!(report["repeats"]["runs"], 3);
    let levels = report["repeats"]["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 4);
    for (i, level) in levels.iter().enumerate() {
        assert_closed_loop_level(&report, i, level);
    }
    assert_eq!(report["sweep"]["knee"]["load"], 4.0, "{}", report["sweep"]);
    assert_eq!(report["sweep"]["knee"]["step"], 2);
    assert!(stdout.contains("Each level across 3 runs"), "{stdout}");
    assert!(stdout.contains("Knee: level 3"), "{stdout}");
    assert_page_shows_levels(&dir.path().join("closed").join("report.html"));
}

#[test]
fn a_repeated_open_loop_sweep_draws_each_rounds_arrivals_anew_and_rebuilds_from_its_journal() {
    let dir = tempfile::tempdir().unwrap();
    let sim = support::four_slot_sim(dir.path(), 1.0);
    // Open loop: each round draws its Poisson arrivals from seed + round, so a level's runs
    // differ, and its mean and interval are those of its runs.
    let (report, _) = virtual_sweep(
        &sim,
        &dir.path().join("open"),
        &["--rate-steps", "4,8", "--requests", "80", "--repeats", "3"],
    );
    validate_against_schema(&report);
    for (i, level) in report["repeats"]["levels"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        let values = step_values(&report, &[i, i + 2, i + 4], "latency_ms.e2e.p99");
        assert!(
            values[0] != values[1] && values[1] != values[2],
            "{values:?}"
        );
        let figure = level_figure(level, "latency_ms.e2e.p99");
        let mean = values.iter().sum::<f64>() / 3.0;
        assert!(
            (figure["mean"].as_f64().unwrap() - mean).abs() < 1e-9,
            "{figure}"
        );
        let (low, high) = (
            figure["ci_low"].as_f64().unwrap(),
            figure["ci_high"].as_f64().unwrap(),
        );
        assert!(low < mean && mean < high, "{figure}");
    }
    // The journal rebuilds the same levels, knee and intervals (run.json records the rounds).
    let rebuilt = goodput()
        .args(["report", "--json"])
        .arg(dir.path().join("open"))
        .output()
        .unwrap();
    let rebuilt: Value = serde_json::from_slice(&rebuilt.stdout).unwrap();
    assert_eq!(rebuilt["sweep"], report["sweep"]);
    assert_eq!(rebuilt["repeats"], report["repeats"]);
}

/// Each search's capacity, after checking that the searches follow each other in the steps
/// and each lies within 0.8–1 × `physical`.
fn capacities_of(report: &Value, physical: f64) -> Vec<f64> {
    let searches = report["repeats"]["capacity"]["searches"]
        .as_array()
        .unwrap();
    let mut lowers = Vec::new();
    let mut next_step = 0;
    for search in searches {
        assert_eq!(
            search["first_step"].as_u64().unwrap(),
            next_step,
            "{search}"
        );
        next_step += search["steps"].as_u64().unwrap();
        let lower = search["lower_bound"].as_f64().unwrap();
        assert!(lower <= physical && lower >= physical * 0.8, "{search}");
        if let Some(upper) = search["upper_bound"].as_f64() {
            assert!(upper > lower, "{search}");
        }
        lowers.push(lower);
    }
    assert_eq!(
        next_step as usize,
        report["steps"].as_array().unwrap().len()
    );
    lowers
}

/// The conclusion across the searches on the terminal and in report.html.
fn assert_capacity_shown(stdout: &str, page: &Path) {
    assert!(stdout.contains("Across 3 capacity searches"), "{stdout}");
    let dom = support::rendered_dom(page);
    assert_eq!(
        support::attribute_of(&dom, "render-status", "data-error"),
        None
    );
    assert!(
        dom.contains("The highest sustainable load is"),
        "no verdict across searches"
    );
    assert!(
        stdout.contains("the highest sustainable load is") && stdout.contains("across 3 searches"),
        "{stdout}"
    );
}

/// `goodput capacity --virtual-time --repeats 3` of the engine at `sim`, TTFT 2 s at 95 %.
fn virtual_capacity(sim: &Path, out: &Path) -> std::process::Output {
    let output = goodput()
        .args([
            "capacity",
            "--virtual-time",
            "--sim-config",
            sim.to_str().unwrap(),
        ])
        .args([
            "--slo",
            "ttft=2s",
            "--attainment",
            "0.95",
            "--confidence",
            "0.95",
        ])
        .args(["--tolerance", "2%", "--output-tokens", "6", "--seed", "1"])
        .args(["--probe-min-duration", "120s", "--repeats", "3"])
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

#[test]
fn repeated_capacity_searches_each_bracket_slots_over_service_time_and_so_does_their_mean() {
    let dir = tempfile::tempdir().unwrap();
    let sim = support::four_slot_sim(dir.path(), 1.0);
    let out = dir.path().join("capacity");
    let output = virtual_capacity(&sim, &out);
    let report = read_json(&out.join("report.json"));
    validate_against_schema(&report);
    // 4 slots × 300 ms: 13.33 requests/s, never exceeded; a TTFT target of 2 s admits a
    // little queueing, so each search's capacity is C/S or a little below.
    let physical = 4.0 / 0.3;
    let repeated = &report["repeats"]["capacity"];
    let searches = repeated["searches"].as_array().unwrap();
    assert_eq!(searches.len(), 3);
    assert_eq!(report["repeats"]["runs"], 3);
    let lowers = capacities_of(&report, physical);
    // Each search's own seeds: not three replays of one search.
    assert!(lowers.iter().any(|l| *l != lowers[0]), "{lowers:?}");
    // The report's capacity is the first search's.
    assert_eq!(report["capacity"]["lower_bound"].as_f64(), Some(lowers[0]));
    assert_eq!(
        report["capacity"]["first_probe_step"],
        searches[0]["first_probe_step"]
    );
    let capacity = &repeated["capacity"];
    let mean = lowers.iter().sum::<f64>() / 3.0;
    assert!(
        (capacity["mean"].as_f64().unwrap() - mean).abs() < 1e-9,
        "{capacity}"
    );
    assert!(mean <= physical && mean >= physical * 0.8, "{capacity}");
    let (low, high) = (
        capacity["ci_low"].as_f64().unwrap(),
        capacity["ci_high"].as_f64().unwrap(),
    );
    assert!(low <= mean && mean <= high, "{capacity}");
    assert_eq!(capacity["unit"], "req/s");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_capacity_shown(&stdout, &out.join("report.html"));
}

#[test]
fn a_live_repeated_sweep_measures_a_20_ms_server_at_20_ms_in_every_round() {
    let dir = tempfile::tempdir().unwrap();
    let url = server(20.0);
    let out = dir.path().join("sweep");
    let output = goodput()
        .args([
            "sweep",
            "--quiet",
            "--target",
            &url,
            "--concurrency-steps",
            "1,2",
        ])
        .args([
            "--requests",
            "8",
            "--input-tokens",
            "8",
            "--output-tokens",
            "6",
        ])
        .args([
            "--seed",
            "3",
            "--repeats",
            "2",
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = read_json(&out.join("report.json"));
    validate_against_schema(&report);
    assert_eq!(report["steps"].as_array().unwrap().len(), 4);
    for (i, level) in report["repeats"]["levels"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        let values = step_values(&report, &[i, i + 2], "latency_ms.tpot.p50");
        for value in &values {
            // The server's 20 ms step (its engine thread may wake a little late).
            assert!((19.5..30.0).contains(value), "level {i}: {values:?}");
        }
        let figure = level_figure(level, "latency_ms.tpot.p50");
        let mean = values.iter().sum::<f64>() / 2.0;
        assert!(
            (figure["mean"].as_f64().unwrap() - mean).abs() < 1e-9,
            "{figure}"
        );
    }
}

/// run.json records both searches, and `goodput report` rebuilds them from the journal.
fn assert_rebuilt(out: &Path, report: &Value) {
    let spans = &read_json(&out.join("run.json"))["capacity"]["searches"];
    assert_eq!(spans.as_array().unwrap().len(), 2, "{spans}");
    let rebuilt = goodput()
        .args(["report", "--json"])
        .arg(out)
        .output()
        .unwrap();
    let rebuilt: Value = serde_json::from_slice(&rebuilt.stdout).unwrap();
    assert_eq!(rebuilt["repeats"], report["repeats"]);
    assert_eq!(
        rebuilt["capacity"]["lower_bound"],
        report["capacity"]["lower_bound"]
    );
}

#[test]
fn a_live_repeated_capacity_search_records_each_search_and_its_journal_rebuilds_them() {
    let dir = tempfile::tempdir().unwrap();
    // 4 slots of 300 ms, 20 times faster: at concurrency 8 a request waits at most one
    // service (300 ms) for a slot, then 200 ms to its first token, far inside TTFT 2 s, so
    // every probe up to the maximum of 8 passes in both searches.
    let sim = support::four_slot_sim(dir.path(), 20.0);
    let out = dir.path().join("capacity");
    let output = goodput()
        .args(["capacity", "--quiet", "--sim-config", sim.to_str().unwrap()])
        .args(["--seed", "7", "--output-tokens", "6", "--slo", "ttft=2s"])
        .args([
            "--dimension",
            "concurrency",
            "--start",
            "2",
            "--max-load",
            "8",
        ])
        .args([
            "--max-probes",
            "3",
            "--probe-requests",
            "40",
            "--probe-warmup",
            "0s",
        ])
        .args([
            "--attainment",
            "0.9",
            "--confidence",
            "0.9",
            "--repeats",
            "2",
        ])
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = read_json(&out.join("report.json"));
    validate_against_schema(&report);
    let repeated = &report["repeats"]["capacity"];
    for search in repeated["searches"].as_array().unwrap() {
        assert_eq!(search["lower_bound"], 8.0, "{search}");
    }
    assert_eq!(repeated["capacity"]["mean"], 8.0);
    assert_eq!(repeated["capacity"]["sd"], 0.0);
    assert_eq!(repeated["capacity"]["unit"], "concurrency");
    assert_rebuilt(&out, &report);
}
