//! A live report and the report `goodput report` rebuilds from its journal come from one
//! function (`goodput_core::assemble`): they agree on every figure, byte for byte, except the
//! few the journal cannot hold — the client's CPU use, and how the run ended (`run.json` is
//! written when the run starts) — and, for multi-step runs, the server's `Server` header,
//! which only `goodput run` collects live.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;

use serde_json::Value;
use support::{four_slot_sim, goodput, ok, read_json, run_ok};

/// Removes what only the live run knows; panics if a field is missing (the test would then
/// compare less than it says).
fn without_live_only_fields(mut report: Value, multi_step: bool) -> Value {
    let run = report["run"].as_object_mut().unwrap();
    run.remove("end_reason").unwrap();
    if multi_step {
        let server_info = run["server_info"].as_object_mut().unwrap();
        server_info.remove("headers").unwrap();
    }
    let client = report["client"].as_object_mut().unwrap();
    for key in [
        "includes_simulator",
        "cpu_utilization",
        "wall_secs",
        "cpu_secs",
        "cpu_ms_per_1000_chunks",
    ] {
        client.remove(key).unwrap();
    }
    report
}

fn rebuilt(out: &Path) -> Value {
    let output = ok(goodput()
        .arg("report")
        .arg(out)
        .arg("--json")
        .output()
        .unwrap());
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn a_run_and_its_journal_rebuild_agree_on_every_figure() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let sim = four_slot_sim(dir.path(), 10.0);
    run_ok(&[
        "--rate",
        "40",
        "--requests",
        "60",
        "--warmup",
        "5",
        "--input-tokens",
        "16",
        "--output-tokens",
        "8",
        "--seed",
        "3",
        "--sim-config",
        sim.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let live = read_json(&out.join("report.json"));
    let again = rebuilt(&out);
    assert_eq!(
        again["run"]["end_reason"].as_str().unwrap().get(..7),
        Some("unknown")
    );
    assert_eq!(
        without_live_only_fields(again, false),
        without_live_only_fields(live, false)
    );
}

#[test]
fn a_sweep_and_its_journal_rebuild_agree_on_every_figure() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let sim = four_slot_sim(dir.path(), 10.0);
    ok(goodput()
        .args(["sweep", "--quiet", "--concurrency-steps", "1,2,4,8"])
        .args([
            "--requests",
            "40",
            "--input-tokens",
            "16",
            "--output-tokens",
            "6",
        ])
        .args(["--seed", "4", "--sim-config", sim.to_str().unwrap()])
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap());
    let live = read_json(&out.join("report.json"));
    assert_eq!(live["steps"].as_array().unwrap().len(), 4);
    assert_eq!(
        without_live_only_fields(rebuilt(&out), true),
        without_live_only_fields(live, true)
    );
}
