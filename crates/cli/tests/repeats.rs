//! `goodput run --repeats N` against exact-timing servers written in the test (steps of a
//! fixed time, so every run's TPOT is known), in virtual time, and `goodput compare` of two
//! repeated runs judged across their runs by Welch's t-test.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;

use serde_json::Value;
use support::step_server::steps_of as server;
use support::{goodput, read_json, validate_against_schema};

/// `goodput run --repeats 3` against `url`, one request at a time; its report.
fn repeated(url: &str, out: &Path) -> Value {
    let output = goodput()
        .args(["run", "--quiet", "--target", url, "--concurrency", "1"])
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
            "3",
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
    read_json(&out.join("report.json"))
}

fn figure<'a>(report: &'a Value, path: &str) -> &'a Value {
    let figures = report["repeats"]["figures"].as_array().unwrap();
    figures.iter().find(|f| f["path"] == path).unwrap()
}

fn headline<'a>(comparison: &'a Value, name: &str) -> &'a Value {
    let figures = comparison["headline"]["figures"].as_array().unwrap();
    figures.iter().find(|f| f["name"] == name).unwrap()
}

/// `goodput report DIR --json`: the report rebuilt from the journal and run.json.
fn rebuilt(out: &Path) -> Value {
    let output = goodput()
        .args(["report", out.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn compare(a: &Path, b: &Path) -> Value {
    let output = goodput()
        .args(["compare", a.to_str().unwrap(), b.to_str().unwrap()])
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn three_runs_of_a_20_ms_server_give_its_tpot_each_time_and_compare_judges_across_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (fast, slow) = (server(20.0), server(25.0));
    let a = dir.path().join("a");
    let report = repeated(&fast, &a);
    validate_against_schema(&report);
    assert_eq!(report["steps"].as_array().unwrap().len(), 3);
    assert_eq!(report["repeats"]["runs"], 3);
    let tpot = figure(&report, "latency_ms.tpot.p50");
    let values: Vec<f64> = tpot["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(values.len(), 3);
    for (run, value) in values.iter().enumerate() {
        // Each run's figure is its own step's, and the server's 20 ms step (its engine
        // thread may wake a little late on a loaded machine).
        let step = report["steps"][run]["latency_ms"]["tpot"]["p50"]
            .as_f64()
            .unwrap();
        assert_eq!(*value, step);
        assert!((19.5..24.0).contains(value), "run {run}: {value}");
    }
    let mean = values.iter().sum::<f64>() / 3.0;
    assert!((tpot["mean"].as_f64().unwrap() - mean).abs() < 1e-9);
    let (low, high) = (
        tpot["ci_low"].as_f64().unwrap(),
        tpot["ci_high"].as_f64().unwrap(),
    );
    assert!(low <= mean && mean <= high, "{tpot}");
    // Every run sends its 8 requests: what is not warm-up completes.
    // The journal and run.json give the same runs and figures again.
    assert_eq!(rebuilt(&a)["repeats"], report["repeats"]);
    let completed = figure(&report, "requests.completed");
    for (run, value) in completed["values"].as_array().unwrap().iter().enumerate() {
        let warmup = report["steps"][run]["requests"]["warmup"].as_u64().unwrap();
        assert_eq!(value.as_f64().unwrap() as u64 + warmup, 8, "run {run}");
    }
    // Three runs of a server 25 % slower per step: TPOT worse across the runs; the same
    // server again: no significant change.
    let (b, again) = (dir.path().join("b"), dir.path().join("again"));
    repeated(&slow, &b);
    repeated(&fast, &again);
    let worse = compare(&a.join("report.json"), &b.join("report.json"));
    let row = headline(&worse, "TPOT p50");
    assert_eq!(row["test"], "Welch t-test across runs", "{row}");
    assert_eq!(row["verdict"], "worse", "{row}");
    let relative = row["relative"].as_f64().unwrap();
    assert!((0.15..0.30).contains(&relative), "{row}");
    let same = compare(&a.join("report.json"), &again.join("report.json"));
    let row = headline(&same, "TPOT p50");
    assert_eq!(row["test"], "Welch t-test across runs", "{row}");
    assert_eq!(row["verdict"], "no significant change", "{row}");
}

#[test]
fn repeats_in_virtual_time_draw_each_runs_arrivals_anew_and_print_the_figures_across_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = goodput()
        .args(["run", "--virtual-time", "--rate", "8", "--requests", "60"])
        .args([
            "--seed",
            "5",
            "--repeats",
            "4",
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
    // Poisson arrivals from seed + run: no two runs alike.
    let e2e = figure(&report, "latency_ms.e2e.p99");
    let values: Vec<f64> = e2e["values"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    for (i, x) in values.iter().enumerate() {
        assert!(values[i + 1..].iter().all(|y| y != x), "{values:?}");
    }
    assert!(e2e["sd"].as_f64().unwrap() > 0.0);
    assert_eq!(rebuilt(&out)["repeats"], report["repeats"]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("Across 4 runs"), "{stdout}");
    assert!(stdout.contains("E2E p99"), "{stdout}");
    // The page draws the section (every figure a row, each run's value in it) and reads at
    // 1280 and 390 px.
    let page = out.join("report.html");
    let dom = support::rendered_dom(&page);
    assert!(dom.contains("id=\"repeats\""), "no repeats section");
    let section = &dom[dom.find("id=\"repeats\"").unwrap()..];
    assert!(
        section.contains("Across runs") && section.contains("E2E p99"),
        "the repeats section names its figures"
    );
    support::layout::assert_readable(&page, "repeats");
}

#[test]
fn repeats_are_refused_where_they_cannot_mean_anything() {
    let shards = ["--shards", "2", "--shard-index", "0", "--seed", "1"];
    let cases: [(&[&str], Vec<&str>, &str); 5] = [
        (
            &["run", "--requests", "4"],
            vec!["--repeats", "0"],
            "0 is not in 1..=1000",
        ),
        (
            &["run", "--requests", "4"],
            [&["--repeats", "2"][..], &shards].concat(),
            "--repeats with --shards",
        ),
        (
            &["sweep", "--concurrency-steps", "1,2", "--requests", "4"],
            vec!["--repeats", "0"],
            "0 is not in 1..=1000",
        ),
        (
            &["sweep", "--concurrency-steps", "2,4", "--duration", "2s"],
            [&["--repeats", "2"][..], &shards].concat(),
            "--repeats with --shards",
        ),
        (
            &["capacity", "--slo", "ttft=1s"],
            [&["--repeats", "2"][..], &shards].concat(),
            "--repeats with --shards",
        ),
    ];
    for (command, args, says) in cases {
        let output = goodput()
            .args(command)
            .arg("--quiet")
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{command:?} {args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(says), "{command:?} {args:?}: {stderr}");
    }
}
