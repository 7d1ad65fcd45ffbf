//! `goodput tune` against the real llama.cpp server: a grid over its slots (`-np 1` and
//! `-np 4`), each server started by tune from the template on a free port, readied at
//! `/health`, swept at four clients for a few seconds and stopped. Four slots decode the four
//! clients' answers in one batch, one slot one after the other, so `-np 4` must serve more per
//! accelerator under the SLO and be named the best; no server may be left running. The small
//! model (169 MB): its decode steps stream the weights from memory, which a batch shares. The
//! tiny one (9 MB) stays in a CPU's cache, its decode bound by arithmetic: on a 2-core Xeon VM
//! (2026-12-07) four slots served 1.07–1.15 times one slot with it, 1.8–2.0 times with this.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;

use support::tune::left_running;
use support::{goodput, read_json, validate_against_schema};

const HOW_TO: &str = "this test runs against a real llama-server: `eval \"$(scripts/llama-server.sh \
     env)\"`, then `cargo test -p goodput --features llama-server --test llama_tune`";

/// A path named by an environment variable that must exist.
fn required(variable: &str) -> PathBuf {
    let path = PathBuf::from(
        std::env::var_os(variable).unwrap_or_else(|| panic!("{variable} is not set; {HOW_TO}")),
    );
    assert!(
        path.exists(),
        "{variable}={} does not exist; {HOW_TO}",
        path.display()
    );
    path
}

/// `goodput tune` over `-np 1` and `-np 4`, a sweep at four clients, into `out`.
fn tune(out: &Path, marker: &Path) -> Output {
    let binary = required("GOODPUT_LLAMA_SERVER");
    let model = required("GOODPUT_LLAMA_MODEL_SMALL");
    let server = format!(
        "{} -m {} --host 127.0.0.1 --port {{{{port}}}} -c 4096 -t 2 -np {{{{np}}}} --metrics",
        binary.display(),
        model.display()
    );
    let output = goodput()
        .args([
            "tune",
            "--quiet",
            "--server-cmd",
            &server,
            "--grid",
            "np=1,4",
        ])
        .args([
            "--measure",
            "sweep",
            "--concurrency-steps",
            "4",
            "--duration",
            "8s",
        ])
        .args([
            "--input-tokens",
            "64",
            "--output-tokens",
            "32",
            "--seed",
            "3",
        ])
        .args(["--slo", "e2e=60s", "--ready-timeout", "120s"])
        .arg("--out")
        .arg(out)
        .env(support::tune::MARKER, marker.display().to_string())
        .env_remove("GOODPUT_TARGET")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// The figures of configuration `np={np}`, which must have been measured.
fn figures(tune: &Value, np: &str) -> Value {
    let c = tune["configurations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == format!("np={np}"))
        .unwrap();
    assert!(c["run"]["failure"].is_null(), "{c}");
    assert!(c["run"]["startup_secs"].as_f64().unwrap() > 0.0);
    c["run"]["figures"].clone()
}

#[test]
fn tune_ranks_four_slots_above_one_on_llama_server() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let output = tune(&out, dir.path());
    let left = left_running(&dir.path().display().to_string());
    assert!(left.is_empty(), "left running: {left:#?}");
    let report = read_json(&out.join("report.json"));
    validate_against_schema(&report);
    let tune = &report["tune"];
    let (one, four) = (figures(tune, "1"), figures(tune, "4"));
    let goodput = |f: &Value| f["goodput_per_accelerator"].as_f64().unwrap();
    println!(
        "llama-server at 4 clients: -np 1 {:.2} good req/s, -np 4 {:.2} (margin {})",
        goodput(&one),
        goodput(&four),
        tune["best"]["margin"]
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(tune["best"]["name"], "np=4", "{stdout}");
    assert!(goodput(&four) > 1.3 * goodput(&one), "{one} against {four}");
    for (index, np) in [(1, "1"), (2, "4")] {
        let log = out.join(format!("configs/{index}-np={np}/server.log"));
        let log = std::fs::read_to_string(log).unwrap();
        assert!(log.contains("slot"), "the server's log was kept: {log}");
    }
}
