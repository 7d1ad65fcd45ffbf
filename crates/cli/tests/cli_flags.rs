//! Flags that were once silently dropped are honoured or refused with exit status 2:
//! `capacity --arrival` shapes every probe, `--tp` (and `--gpu-memory-utilization`) without
//! `--model-spec`/`--gpu` describe the embedded simulator, and open-loop shaping flags are
//! refused for a closed loop.
#![allow(clippy::unwrap_used)]

mod support;

use serde_json::Value;
use support::{four_slot_sim, goodput, ok, read_json};

#[test]
fn capacity_probes_use_the_arrival_process_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let sim = four_slot_sim(dir.path(), 20.0);
    let out = dir.path().join("out");
    ok(goodput()
        .args(["capacity", "--quiet", "--arrival", "constant"])
        .args(["--slo", "ttft=2s", "--start", "4", "--max-probes", "1"])
        .args(["--probe-requests", "20", "--probe-warmup", "1s"])
        .args([
            "--probe-min-duration",
            "2s",
            "--output-tokens",
            "6",
            "--seed",
            "1",
        ])
        .arg("--sim-config")
        .arg(&sim)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap());
    let manifest = read_json(&out.join("run.json"));
    let steps = manifest["steps"].as_array().expect("steps in run.json");
    assert!(!steps.is_empty(), "{manifest}");
    for step in steps {
        assert_eq!(
            step["arrival"]["kind"], "constant",
            "every probe uses --arrival constant: {step}"
        );
    }
}

fn run_json(args: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    ok(goodput()
        .args([
            "run",
            "--quiet",
            "--no-live",
            "--requests",
            "4",
            "--rate",
            "40",
        ])
        .args([
            "--input-tokens",
            "64",
            "--output-tokens",
            "4",
            "--seed",
            "3",
        ])
        .args(["--time-scale", "20"])
        .args(args)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap());
    read_json(&out.join("run.json"))
}

#[test]
fn tp_sets_the_embedded_simulators_tensor_parallelism() {
    let one = run_json(&["--sim-model", "llama-3.1-8b"]);
    let two = run_json(&["--sim-model", "llama-3.1-8b", "--tp", "2"]);
    let target = |v: &Value| v["run"]["target"].as_str().unwrap().to_string();
    assert!(target(&one).contains("1×"), "{}", target(&one));
    assert!(target(&two).contains("2×"), "{}", target(&two));
    let same = run_json(&["--sim-model", "llama-3.1-8b", "--tp", "2", "--sim-tp", "2"]);
    assert_eq!(target(&same), target(&two));
}

#[test]
fn contradictions_and_inapplicable_flags_exit_2() {
    let refused = |args: &[&str], says: &str| {
        let output = goodput()
            .args(["run", "--quiet", "--no-live", "--requests", "2"])
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    };
    refused(&["--tp", "2", "--sim-tp", "4"], "disagree");
    refused(
        &["--concurrency", "4", "--arrival", "constant"],
        "closed loop",
    );
    refused(
        &["--concurrency", "4", "--burstiness", "0.5"],
        "closed loop",
    );
    let dir = tempfile::tempdir().unwrap();
    let sim = four_slot_sim(dir.path(), 20.0);
    let sim = sim.to_str().unwrap();
    refused(
        &["--sim-config", sim, "--gpu-memory-utilization", "0.5"],
        "fixed engine",
    );
}
