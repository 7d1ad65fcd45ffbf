//! `goodput tune --virtual-time`: the grid over the simulator's own knobs, from a fixed-timing
//! configuration whose capacity is arithmetic — 1, 2 or 4 slots (`max_num_seqs`) of 0.3 s
//! serve exactly that many clients and slots / 0.3 requests per second, on tp × replicas
//! accelerators — ranked in virtual time; a configuration the simulator refuses is failed and
//! the rest go on; `--repeats` judges the margin by Welch's test; `--verify-top` measures the
//! best prediction live and puts it beside the prediction.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;

use serde_json::Value;
use support::tune::{BY_SLOTS, SERVICE_SECS, TIME_SCALE, fixed_configs};
use support::{goodput, read_json, validate_against_schema};

/// `goodput tune --virtual-time` on the 4-slot fixed-timing configuration, a capacity search
/// by concurrency, with `extra` flags; the report.
fn tune(dir: &Path, extra: &[&str]) -> Value {
    tune_with(dir, &BY_SLOTS, extra)
}

/// `goodput tune --virtual-time` on the 4-slot fixed-timing configuration with `base` and
/// `extra` flags; the report.
fn tune_with(dir: &Path, base: &[&str], extra: &[&str]) -> Value {
    fixed_configs(dir, &[4]);
    let out = dir.join("out");
    let output = goodput()
        .args(["tune", "--virtual-time", "--quiet", "--sim-config"])
        .arg(dir.join("sim-4.json"))
        .args(base)
        .args(extra)
        .arg("--out")
        .arg(&out)
        .env_remove("GOODPUT_TARGET")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "exit {:?}: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stderr)
    );
    let report = read_json(&out.join("report.json"));
    validate_against_schema(&report);
    report
}

fn named<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["tune"]["configurations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no configuration {name}"))
}

/// 4 slots first, then 2, then 1 (one or two replicas each: the same per accelerator).
fn ranked_by_slots(report: &Value) {
    let ranks = |slots: u32| {
        [1, 2].map(|r| {
            named(report, &format!("max_num_seqs={slots},replicas={r}"))["rank"]
                .as_u64()
                .unwrap()
        })
    };
    assert!(
        ranks(4).iter().all(|&r| r <= 2),
        "4 slots first: {:?}",
        ranks(4)
    );
    assert!(
        ranks(2).iter().all(|&r| (3..=4).contains(&r)),
        "{:?}",
        ranks(2)
    );
    assert!(
        ranks(1).iter().all(|&r| (5..=6).contains(&r)),
        "{:?}",
        ranks(1)
    );
}

#[test]
fn the_ranking_over_max_num_seqs_agrees_with_arithmetic() {
    let dir = tempfile::tempdir().unwrap();
    let report = tune(dir.path(), &["--grid", "max_num_seqs=1,2,4,0;replicas=1,2"]);
    let tune = &report["tune"];
    assert_eq!(tune["mode"], "virtual");
    for (slots, replicas) in [(1u32, 1u32), (2, 1), (4, 1), (1, 2), (2, 2), (4, 2)] {
        let c = named(
            &report,
            &format!("max_num_seqs={slots},replicas={replicas}"),
        );
        assert_eq!(c["accelerators"], replicas, "tp × replicas");
        let figures = &c["run"]["figures"];
        if replicas == 1 {
            assert_eq!(figures["capacity"], f64::from(slots), "{c}");
        }
        // Per accelerator, replicas change nothing: each serves slots / 0.3 s.
        let arithmetic = f64::from(slots) / SERVICE_SECS;
        let goodput = figures["goodput_per_accelerator"].as_f64().unwrap();
        assert!(
            (goodput / arithmetic - 1.0).abs() < 0.03,
            "{slots} slots × {replicas}: {goodput} good req/s per accelerator against {arithmetic}"
        );
    }
    ranked_by_slots(&report);
    let best = &tune["best"];
    assert!(
        best["name"].as_str().unwrap().starts_with("max_num_seqs=4"),
        "{best}"
    );
    let refused = named(&report, "max_num_seqs=0,replicas=1");
    assert_eq!(refused["run"]["failure"]["stage"], "config");
    assert!(
        refused["run"]["failure"]["reason"]
            .as_str()
            .unwrap()
            .contains("slots"),
        "{refused}"
    );
    assert!(refused.get("rank").is_none());
}

#[test]
fn repeated_runs_judge_the_margin() {
    let dir = tempfile::tempdir().unwrap();
    let report = tune(
        dir.path(),
        &["--grid", "max_num_seqs=2,4", "--repeats", "3"],
    );
    let best = &report["tune"]["best"];
    assert_eq!(best["name"], "max_num_seqs=4");
    let runs = named(&report, "max_num_seqs=4")["run"]["figures"]["rank_runs"].clone();
    assert_eq!(runs.as_array().unwrap().len(), 3, "{runs}");
    assert_eq!(best["significant"], true, "{best}");
    assert!(
        best["significance"]
            .as_str()
            .unwrap()
            .contains("Welch's t-test over 3 and 3 runs")
    );
}

#[test]
fn unknown_knobs_are_refused_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    fixed_configs(dir.path(), &[4]);
    let output = goodput()
        .args(["tune", "--virtual-time", "--sim-config"])
        .arg(dir.path().join("sim-4.json"))
        .args(["--grid", "max_num_batched_tokens=512", "--out"])
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no knob of the fixed-timing engine"),
        "{stderr}"
    );
    let output = goodput()
        .args(["tune", "--virtual-time", "--grid", "np=4", "--out"])
        .arg(dir.path().join("out"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("is not a simulator knob"));
}

#[test]
fn the_best_prediction_is_verified_live() {
    let dir = tempfile::tempdir().unwrap();
    fixed_configs(dir.path(), &[1, 2, 4]);
    let server = format!(
        "{} sim --config {}/sim-{{{{max_num_seqs}}}}.json --listen 127.0.0.1:{{{{port}}}} \
         --time-scale {TIME_SCALE}",
        assert_cmd::cargo::cargo_bin("goodput").display(),
        dir.path().display()
    );
    let report = tune(
        dir.path(),
        &[
            "--grid",
            "max_num_seqs=1,2,4",
            "--verify-top",
            "1",
            "--server-cmd",
            &server,
            "--time-scale",
            TIME_SCALE,
        ],
    );
    let checks = report["tune"]["verification"].as_array().unwrap();
    assert_eq!(checks.len(), 1);
    let check = &checks[0];
    assert_eq!(check["predicted_rank"], 1);
    let best = &report["tune"]["configurations"][check["configuration"].as_u64().unwrap() as usize];
    assert_eq!(best["name"], "max_num_seqs=4");
    assert_eq!(check["measured"]["figures"]["capacity"], 4.0, "{check}");
    let ratio = check["ratio"].as_f64().unwrap();
    assert!((0.8..1.05).contains(&ratio), "measured / predicted {ratio}");
    assert!(
        dir.path()
            .join("out")
            .join(check["measured"]["dir"].as_str().unwrap())
            .join("server.log")
            .exists()
    );
}

#[test]
fn a_sweep_takes_the_level_of_most_goodput_that_met_the_slo() {
    let dir = tempfile::tempdir().unwrap();
    // The capacity search's flags but the SLO, its attainment and the request shape.
    let base = [&BY_SLOTS[..2], &BY_SLOTS[4..6], &BY_SLOTS[8..]].concat();
    let sweep = [
        "--measure",
        "sweep",
        "--concurrency-steps",
        "1,2,4,8",
        "--requests",
        "80",
    ];
    let report = tune_with(
        dir.path(),
        &base,
        &[&["--grid", "max_num_seqs=2,4"][..], &sweep].concat(),
    );
    assert_eq!(report["tune"]["measure"], "sweep");
    for slots in [2u32, 4] {
        let figures = &named(&report, &format!("max_num_seqs={slots}"))["run"]["figures"];
        assert_eq!(figures["capacity"], f64::from(slots), "{figures}");
        let arithmetic = f64::from(slots) / SERVICE_SECS;
        let goodput = figures["goodput_per_accelerator"].as_f64().unwrap();
        assert!(
            (goodput / arithmetic - 1.0).abs() < 0.05,
            "{slots}: {goodput} against {arithmetic}"
        );
    }
    assert_eq!(report["tune"]["best"]["name"], "max_num_seqs=4");
}
