//! SLO classes against an exact-timing server written here (each class judged against its own
//! SLO, attainment known by arithmetic), and `compare`, `gate` and `history` reading the rows
//! of a model mix by name.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};

use serde_json::Value;
use support::fleet::{journal, logging_server, mix_run, read_request, rebuilt_step};
use support::{goodput, ok, read_json, validate_against_schema};

/// Two model-mix runs of other seeds and sizes, `a` and `b`, under `dir`.
fn two_runs(dir: &Path) -> (PathBuf, PathBuf) {
    let (url, _log) = logging_server("x-request-id");
    let (a, b) = (dir.join("a"), dir.join("b"));
    mix_run(&url, "1", "30", &a);
    mix_run(&url, "2", "40", &b);
    (a, b)
}

/// The completed requests of `model`'s row in `run`'s report.
fn completed(run: &Path, model: &str) -> f64 {
    let report = read_json(&run.join("report.json"));
    let rows = report["steps"][0]["models"].as_array().unwrap().clone();
    let row = rows.iter().find(|r| r["name"] == model).unwrap().clone();
    row["requests"]["completed"].as_f64().unwrap()
}

#[test]
fn compare_puts_the_rows_of_one_model_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = two_runs(dir.path());
    let compared = ok(goodput()
        .args(["compare", "--format", "json"])
        .args([&a, &b])
        .output()
        .unwrap());
    let compared: Value = serde_json::from_slice(&compared.stdout).unwrap();
    let comparison = compared.as_array().map_or(&compared, |all| &all[0]);
    for model in ["a", "b"] {
        let path = format!("models[{model}].requests.completed");
        let row = comparison["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["path"] == path.as_str())
            .unwrap_or_else(|| panic!("no {path} in {comparison}"));
        assert_eq!(row["a"].as_f64(), Some(completed(&a, model)), "{row}");
        assert_eq!(row["b"].as_f64(), Some(completed(&b, model)), "{row}");
    }
}

#[test]
fn gate_and_history_name_the_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = two_runs(dir.path());
    let gate = |condition: String| {
        let mut command = goodput();
        command.args(["gate", "--condition", &condition]).arg(&b);
        command.output().unwrap().status.code()
    };
    let n = completed(&b, "b");
    assert_eq!(
        gate(format!("models[b].requests.completed == {n}")),
        Some(0)
    );
    assert_eq!(
        gate(format!("models[b].requests.completed != {n}")),
        Some(1)
    );
    assert_eq!(gate("models[c].requests.completed == 1".into()), Some(2));
    let store = dir.path().join("runs.db");
    let history = |args: &[&std::ffi::OsStr]| {
        ok(goodput()
            .arg("history")
            .arg("--store")
            .arg(&store)
            .args(args)
            .output()
            .unwrap())
    };
    let (ra, rb) = (a.join("report.json"), b.join("report.json"));
    history(&[
        "--add".as_ref(),
        ra.as_os_str(),
        "--add".as_ref(),
        rb.as_os_str(),
    ]);
    let shown = history(&["--metric".as_ref(), "models[a].requests.completed".as_ref()]);
    let text = String::from_utf8_lossy(&shown.stdout);
    for run in [&a, &b] {
        let value = completed(run, "a");
        assert!(text.contains(&format!("{value}")), "{value} in {text}");
    }
}

/// Serves streamed chat answers of 2 tokens whose first token comes 20 ms after the request
/// when the index in its correlation id (`<run>-<step>-<index>`) is even, 400 ms when odd; the
/// second 10 ms later.
fn serve_by_parity(stream: TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    let Some((path, headers, _)) = read_request(&mut reader) else {
        return;
    };
    if !path.ends_with("/chat/completions") {
        let _ = writer.write_all(support::other_reply(&path, "").as_bytes());
        return;
    }
    let index: u64 = headers
        .iter()
        .find(|(name, _)| name == "x-request-id")
        .and_then(|(_, id)| id.rsplit('-').next()?.parse().ok())
        .unwrap();
    let first = if index.is_multiple_of(2) { 20 } else { 400 };
    let _ = writer.write_all(support::EVENT_STREAM_HEAD.as_bytes());
    std::thread::sleep(std::time::Duration::from_millis(first));
    let _ = writer.write_all(support::token_event(None).as_bytes());
    let _ = writer.flush();
    std::thread::sleep(std::time::Duration::from_millis(10));
    let last = support::token_event(Some((4, 2)));
    let _ = writer.write_all(format!("{last}data: [DONE]\n\n").as_bytes());
}

/// A run of two SLO classes against the parity server, into `out`.
fn classes_run(out: &Path) {
    let address = support::spawn_server(serve_by_parity);
    let url = format!("http://{address}/v1");
    let run = [
        "run", "--quiet", "--target", &url, "--model", "m", "--seed", "3",
    ];
    ok(goodput()
        .args(run)
        .args(["--requests", "40", "--concurrency", "8", "--warmup", "0"])
        .args(["--input-tokens", "4", "--output-tokens", "2"])
        .args(["--slo", "ttft=200ms"])
        .args(["--class", "interactive=60%:ttft=200ms,tpot=100ms"])
        .args(["--class", "batch=40%:e2e=30s"])
        .arg("--out")
        .arg(out)
        .output()
        .unwrap());
}

/// By arithmetic: an interactive request meets its SLO exactly when its index is even (20 ms
/// against 400 ms to the first token, 200 ms allowed); every batch request meets 30 s. Per
/// class: (requests, meeting its SLO), from the journal's class of each index.
fn expected_attainment(out: &Path) -> BTreeMap<String, (u64, u64)> {
    let mut expected: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for record in journal(out) {
        let class = record["class"].as_str().unwrap().to_string();
        let even = record["index"].as_u64().unwrap().is_multiple_of(2);
        let entry = expected.entry(class.clone()).or_default();
        entry.0 += 1;
        entry.1 += u64::from(class == "batch" || even);
    }
    expected
}

#[test]
fn each_class_is_judged_against_its_own_slo() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("classes");
    classes_run(&out);
    let expected = expected_attainment(&out);
    let interactive = expected["interactive"];
    assert!(
        interactive.1 > 0 && interactive.1 < interactive.0,
        "{expected:?}"
    );
    let report = read_json(&out.join("report.json"));
    validate_against_schema(&report);
    let step = &report["steps"][0];
    let classes = step["classes"].as_array().unwrap();
    assert_eq!(classes.len(), 2, "{expected:?}");
    for class in classes {
        let name = class["name"].as_str().unwrap();
        let (n, met) = expected[name];
        assert_eq!(class["requests"]["completed"], n, "{class}");
        assert_eq!(class["goodput"]["compliant"], met, "{name}: {class}");
        let attained = class["goodput"]["attained_fraction"].as_f64().unwrap();
        assert!((attained - met as f64 / n as f64).abs() < 1e-9, "{name}");
        let own = if name == "batch" { "e2e" } else { "tpot" };
        assert!(class["slo"].as_str().unwrap().contains(own), "{class}");
    }
    // The step's --slo ttft=200ms holds for the even half of all requests.
    assert_eq!(step["goodput"]["compliant"], 20);
    assert_eq!(report["run"]["classes"][0]["name"], "interactive");
    assert_eq!(report["run"]["classes"][0]["share"], 0.6);
    // The journal and run.json rebuild the same classes.
    assert_eq!(rebuilt_step(&out)["classes"], step["classes"]);
}

#[test]
fn wrong_classes_exit_2() {
    let cases: [&[&str]; 4] = [
        &["--class", "a=60%:ttft=1s", "--class", "b=30%:e2e=1s"],
        &["--class", "a=100%"],
        &["--class", "a=100%:ttft=fast"],
        &["--class", "a=100%:"],
    ];
    for args in cases {
        let output = goodput()
            .args(["run", "--quiet", "--requests", "2"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("--class"), "{args:?}: {stderr}");
    }
}

#[test]
fn virtual_time_labels_the_requests_and_judges_the_classes() {
    let dir = tempfile::tempdir().unwrap();
    let sim = support::fixed_sim(dir.path(), "fixed", 100, 10);
    let output = ok(goodput()
        .args(["run", "--quiet", "--virtual-time", "--json", "--seed", "5"])
        .args(["--sim-config", sim.to_str().unwrap()])
        .args(["--requests", "40", "--concurrency", "4", "--warmup", "0"])
        .args(["--input-tokens", "8", "--output-tokens", "4"])
        .args(["--model", "a=50%,b=50%"])
        .args([
            "--class",
            "fast=50%:ttft=50ms",
            "--class",
            "slow=50%:ttft=1s",
        ])
        .output()
        .unwrap());
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    validate_against_schema(&report);
    let step = &report["steps"][0];
    let count = |key: &str| -> u64 {
        let rows = step[key].as_array().unwrap();
        rows.iter()
            .map(|r| r["requests"]["completed"].as_u64().unwrap())
            .sum()
    };
    assert_eq!((count("models"), count("classes")), (40, 40), "{step}");
    // A fixed 100 ms to the first token: no `fast` request meets 50 ms, every `slow` one 1 s.
    for class in step["classes"].as_array().unwrap() {
        let attained = class["goodput"]["attained_fraction"].as_f64().unwrap();
        let expected = if class["name"] == "fast" { 0.0 } else { 1.0 };
        assert_eq!(attained, expected, "{class}");
    }
}

/// A batch sweep keeps the mix: each batched request asks for the model and class of its first
/// prompt, so every step still splits by model and class (they were dropped before: no rows).
#[test]
fn a_batch_sweep_keeps_each_requests_model_and_class() {
    let output = ok(goodput()
        .args(["sweep", "--virtual-time", "--api", "completions", "--json"])
        .args(["--batch-steps", "1,2", "--requests", "8", "--warmup", "0"])
        .args(["--model", "a=50%,b=50%", "--class", "x=50%:e2e=5s"])
        .args(["--class", "y=50%:e2e=9s", "--output-tokens", "2"])
        .output()
        .unwrap());
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    validate_against_schema(&report);
    for step in report["steps"].as_array().unwrap() {
        let completed = step["requests"]["completed"].as_u64().unwrap();
        assert_eq!(completed, 8, "{step}");
        for rows in ["models", "classes"] {
            let rows = step[rows].as_array().unwrap();
            let count = |row: &Value| row["requests"]["completed"].as_u64().unwrap();
            assert_eq!(rows.len(), 2, "{rows:?}");
            assert_eq!(rows.iter().map(count).sum::<u64>(), completed, "{rows:?}");
        }
    }
}
