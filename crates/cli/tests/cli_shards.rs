//! Sharded runs as separate processes on loopback: four `goodput run --shards 4` processes
//! against one `goodput sim` merge into the report one process computes from the union of
//! their records, and together send exactly the single-process schedule; a shard killed
//! mid-run (or left out) is named in the merged report with what it lost; shards of different
//! runs refuse to merge; bad shard flags exit 2.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use goodput_core::config::Arrival;
use goodput_core::schedule::ArrivalSchedule;
use serde_json::Value;
use support::sim_process::Sim;
use support::{fixed_sim, goodput, ok, read_json};

/// A start time `secs` from now, as Unix seconds.
fn start_in(secs: f64) -> String {
    let at = SystemTime::now() + Duration::from_secs_f64(secs);
    format!(
        "{:.3}",
        at.duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
    )
}

/// Spawns shard `k` of 4 with `load` flags; its output goes to `dir/shard-k`.
fn spawn_shard(sim: &Sim, dir: &Path, k: u32, start: &str, load: &[&str]) -> Child {
    goodput()
        .args(["run", "--quiet", "--target", &sim.url, "--seed", "11"])
        .args(["--shards", "4", "--start-at", start, "--warmup", "0"])
        .args(["--output-tokens", "4", "--input-tokens", "16"])
        .args(load)
        .arg("--out")
        .arg(shard_dir(dir, k))
        .env("JOB_COMPLETION_INDEX", k.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn shard_dir(dir: &Path, k: u32) -> PathBuf {
    dir.join(format!("shard-{k}"))
}

fn merge(dirs: &[PathBuf], out: &Path) -> std::process::Output {
    goodput()
        .args(["merge", "--json", "--out"])
        .arg(out)
        .args(dirs)
        .output()
        .unwrap()
}

fn without_shard_warnings(report: &Value) -> Vec<Value> {
    let warnings = report["warnings"].as_array().unwrap();
    warnings
        .iter()
        .filter(|w| !w["code"].as_str().unwrap().starts_with("shard_"))
        .cloned()
        .collect()
}

/// `goodput report` over `records` under `shard_dir`'s manifest without its shard.
fn report_of(shard_dir: &Path, records: &[Value], dir: &Path) -> Value {
    std::fs::create_dir_all(dir).unwrap();
    let mut manifest = read_json(&shard_dir.join("run.json"));
    manifest.as_object_mut().unwrap().remove("shard");
    std::fs::write(dir.join("run.json"), manifest.to_string()).unwrap();
    for name in ["analysis.json", "server_metrics.jsonl"] {
        if shard_dir.join(name).exists() {
            std::fs::copy(shard_dir.join(name), dir.join(name)).unwrap();
        }
    }
    let journal: String = records.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(dir.join("requests.jsonl"), journal).unwrap();
    let output = ok(goodput()
        .args(["report", "--json"])
        .arg(dir)
        .output()
        .unwrap());
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Equal, numbers within `tolerance` relative (naming the first difference).
#[track_caller]
fn assert_close(a: &Value, b: &Value, path: &str, tolerance: f64) {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!(
                (x - y).abs() <= tolerance * x.abs().max(y.abs()),
                "{path}: {x} vs {y}"
            );
        }
        (Value::Array(x), Value::Array(y)) => {
            assert_eq!(x.len(), y.len(), "{path}");
            for (i, (x, y)) in x.iter().zip(y).enumerate() {
                assert_close(x, y, &format!("{path}[{i}]"), tolerance);
            }
        }
        (Value::Object(x), Value::Object(y)) => {
            assert_eq!(x.len(), y.len(), "{path}");
            for (key, value) in x {
                assert_close(value, &y[key], &format!("{path}.{key}"), tolerance);
            }
        }
        _ => assert_eq!(a, b, "{path}"),
    }
}

/// The records of `dirs[k]` for each `k` of `order`, as JSON.
fn records(dirs: &[PathBuf], order: &[usize]) -> Vec<Value> {
    order
        .iter()
        .flat_map(|k| journal(&dirs[*k].join("requests.jsonl")))
        .collect()
}

fn journal(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .collect()
}

/// The merged report equals `goodput report` over the union of the shards' records journaled
/// in completion order, as one process writes them, and, in any other order, up to
/// floating-point summation order.
fn assert_is_the_union_report(merged: &Value, dirs: &[PathBuf], work: &Path) {
    let mut completion_order = records(dirs, &[0, 1, 2, 3]);
    completion_order.sort_by_key(|r| (r["end_us"].as_u64(), r["index"].as_u64()));
    let single = report_of(&dirs[0], &completion_order, &work.join("single"));
    assert_close(&merged["steps"], &single["steps"], "steps", 0.0);
    assert_eq!(merged["client"], single["client"]);
    assert_eq!(
        without_shard_warnings(merged),
        without_shard_warnings(&single)
    );
    let shuffled = report_of(
        &dirs[0],
        &records(dirs, &[3, 1, 2, 0]),
        &work.join("shuffled"),
    );
    assert_close(&merged["steps"], &shuffled["steps"], "steps", 1e-9);
}

/// The merged journal's sends are exactly the single-process schedule: every index once, at
/// its offset.
fn assert_is_the_schedule(merged_journal: &Path, rate: f64, seed: u64, requests: usize) {
    let schedule = ArrivalSchedule::new(rate, Arrival::Poisson, seed).take(requests);
    let mut sent: Vec<(u64, u64)> = journal(merged_journal)
        .iter()
        .map(|r| {
            (
                r["index"].as_u64().unwrap(),
                r["scheduled_us"].as_u64().unwrap(),
            )
        })
        .collect();
    sent.sort_unstable();
    assert_eq!(sent.len(), requests);
    for ((index, at), (want_index, offset)) in sent.iter().zip((0u64..).zip(schedule)) {
        let want_at = offset.as_micros() as u64;
        assert_eq!(*index, want_index);
        assert!(
            at.abs_diff(want_at) <= 1,
            "request {index}: {at} vs {want_at} µs"
        );
    }
}

#[test]
fn four_shard_processes_merge_into_the_single_process_report() {
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::start(&fixed_sim(dir.path(), "sim", 40, 4), &[]);
    let start = start_in(4.0);
    let load = ["--rate", "40", "--requests", "120"];
    let shards: Vec<Child> = (0..4)
        .map(|k| spawn_shard(&sim, dir.path(), k, &start, &load))
        .collect();
    for shard in shards {
        ok(shard.wait_with_output().unwrap());
    }
    let dirs: Vec<PathBuf> = (0..4).map(|k| shard_dir(dir.path(), k)).collect();
    let merged_dir = dir.path().join("merged");
    let merged: Value = serde_json::from_slice(&ok(merge(&dirs, &merged_dir)).stdout).unwrap();
    support::validate_against_schema(&merged);
    assert_is_the_union_report(&merged, &dirs, dir.path());
    assert_is_the_schedule(&merged_dir.join("requests.jsonl"), 40.0, 11, 120);
    let shards = &merged["shards"];
    assert_eq!(shards["count"], 4);
    for shard in shards["shards"].as_array().unwrap() {
        assert_eq!(shard["end_reason"], "completed", "{shard}");
        assert_eq!(shard["records"], 30);
        assert!(
            shard["client"]["dispatch_lag_ms"]["count"]
                .as_u64()
                .unwrap()
                > 0
        );
        assert!(
            shard["clock_offset_ms"]["samples"].as_u64().unwrap() > 0,
            "{shard}"
        );
    }
    // `goodput report` on the merged directory gives the merged figures again.
    let again = goodput()
        .args(["report", "--json"])
        .arg(&merged_dir)
        .output();
    let again: Value = serde_json::from_slice(&ok(again.unwrap()).stdout).unwrap();
    assert_eq!(again["steps"], merged["steps"]);
}

#[test]
fn a_killed_or_missing_shard_is_named_with_what_it_lost() {
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::start(&fixed_sim(dir.path(), "sim", 40, 4), &[]);
    let start = start_in(3.0);
    let load = ["--rate", "40", "--duration", "6s"];
    let mut shards: Vec<Child> = (0..4)
        .map(|k| spawn_shard(&sim, dir.path(), k, &start, &load))
        .collect();
    std::thread::sleep(Duration::from_secs(6));
    shards[2].kill().unwrap();
    for shard in shards {
        let _ = shard.wait_with_output().unwrap();
    }
    let dirs: Vec<PathBuf> = (0..4).map(|k| shard_dir(dir.path(), k)).collect();
    let output = merge(&dirs, &dir.path().join("merged"));
    assert_eq!(output.status.code(), Some(1), "an incomplete merge exits 1");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    support::validate_against_schema(&report);
    let killed = &report["shards"]["shards"][2];
    assert_eq!(killed["end_reason"], "unfinished", "{killed}");
    // Its quarter of 6 s at 40/s is about 60 requests; it was killed about 3 s in.
    let lost = killed["lost"]["requests"].as_u64().unwrap();
    let recorded = killed["records"].as_u64().unwrap();
    let own = ArrivalSchedule::new(40.0, Arrival::Poisson, 11)
        .take_while(|d| *d < Duration::from_secs(6))
        .enumerate()
        .filter(|(i, _)| i % 4 == 2)
        .count() as u64;
    assert_eq!(
        lost + recorded,
        own,
        "lost = its schedule minus its records"
    );
    assert!(lost > 0 && recorded > 0, "lost {lost}, recorded {recorded}");
    let warning = report["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["code"] == "shard_incomplete")
        .expect("a shard_incomplete warning");
    let message = warning["message"].as_str().unwrap();
    assert!(message.contains("shard 2 of 4") && message.contains(&format!("{lost} requests")));

    // Left out altogether: missing, and everything of its part lost.
    let three = [dirs[0].clone(), dirs[1].clone(), dirs[3].clone()];
    let output = merge(&three, &dir.path().join("merged3"));
    assert_eq!(output.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["shards"]["missing"], serde_json::json!([2]));
    assert_eq!(report["shards"]["shards"][2]["lost"]["requests"], own);
    assert!(report["warnings"].to_string().contains("shard_missing"));
}

#[test]
fn shards_of_different_runs_refuse_to_merge() {
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::start(&fixed_sim(dir.path(), "sim", 40, 4), &[]);
    let start = start_in(0.0);
    let mut dirs = Vec::new();
    for (k, seed) in [(0, "1"), (1, "2")] {
        let out = dir.path().join(format!("s{k}"));
        ok(goodput()
            .args(["run", "--quiet", "--target", &sim.url, "--seed", seed])
            .args(["--shards", "2", "--shard-index", &k.to_string()])
            .args([
                "--start-at",
                &start,
                "--requests",
                "4",
                "--output-tokens",
                "2",
            ])
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap());
        dirs.push(out);
    }
    let output = merge(&dirs, &dir.path().join("merged"));
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("not shards of one run") && stderr.contains("seeds"),
        "{stderr}"
    );
    let same = merge(&[dirs[0].clone(), dirs[0].clone()], &dir.path().join("m2"));
    assert_eq!(same.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&same.stderr).contains("given twice"));
}

#[test]
fn bad_shard_flags_exit_2() {
    let start = start_in(60.0);
    let old = "2020-01-01T00:00:00Z";
    let cases: [(&[&str], &str); 7] = [
        (&["--shards", "4", "--shard-index", "4"], "must be below"),
        (
            &["--shards", "4", "--shard-index", "1", "--seed", "1"],
            "--start-at",
        ),
        (
            &["--shards", "4", "--shard-index", "1", "--start-at", &start],
            "--seed",
        ),
        (&["--shards", "0"], "at least 1"),
        (&["--start-at", "next tuesday"], "RFC 3339"),
        (&["--start-at", old], "minutes ago"),
        (
            &[
                "--shards",
                "4",
                "--shard-index",
                "0",
                "--start-at",
                &start,
                "--seed",
                "1",
                "--out",
                "x",
                "--concurrency",
                "2",
            ],
            "--concurrency 2",
        ),
    ];
    for (flags, message) in cases {
        let output = goodput()
            .args(["run", "--quiet", "--requests", "1"])
            .args(flags)
            .env_remove("JOB_COMPLETION_INDEX")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains(message), "{flags:?}: {stderr}");
    }
}

#[test]
fn virtual_capacity_refuses_shards_and_an_index_is_needed() {
    let output = goodput()
        .args([
            "capacity",
            "--quiet",
            "--virtual-time",
            "--shards",
            "2",
            "--shard-index",
            "0",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("drop --shards"));
    let no_index = goodput()
        .args(["run", "--quiet", "--shards", "2"])
        .env_remove("JOB_COMPLETION_INDEX")
        .output()
        .unwrap();
    assert_eq!(no_index.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&no_index.stderr).contains("JOB_COMPLETION_INDEX"));
}

#[test]
fn sharded_capacity_probes_are_judged_on_every_shards_records() {
    let dir = tempfile::tempdir().unwrap();
    let sim = Sim::start(&support::four_slot_sim(dir.path(), 20.0), &[]);
    let url = sim.url.clone();
    let start = start_in(3.0);
    let shards: Vec<Child> = (0..2)
        .map(|k| {
            goodput()
                .args(["capacity", "--quiet", "--target", &url])
                .args(["--time-scale", "20", "--seed", "3", "--shards", "2"])
                .args(["--shard-index", &k.to_string(), "--start-at", &start])
                .args(["--slo", "ttft=2s", "--start", "4", "--max-probes", "2"])
                .args(["--probe-requests", "20", "--probe-warmup", "1s"])
                .args(["--probe-min-duration", "2s", "--output-tokens", "6"])
                .args(["--request-timeout", "20s"])
                .arg("--out")
                .arg(dir.path().join(format!("cap-{k}")))
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for shard in shards {
        ok(shard.wait_with_output().unwrap());
    }
    drop(sim);
    let reports: Vec<Value> = (0..2)
        .map(|k| read_json(&dir.path().join(format!("cap-{k}/report.json"))))
        .collect();
    let probes = |r: &Value| -> Vec<(Value, Value)> {
        r["capacity"]["probes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p["load"].clone(), p["outcome"].clone()))
            .collect()
    };
    assert!(!probes(&reports[0]).is_empty());
    assert_eq!(
        probes(&reports[0]),
        probes(&reports[1]),
        "both shards judged alike"
    );
    let dirs: Vec<PathBuf> = (0..2)
        .map(|k| dir.path().join(format!("cap-{k}")))
        .collect();
    let merged: Value =
        serde_json::from_slice(&ok(merge(&dirs, &dir.path().join("merged"))).stdout).unwrap();
    assert_eq!(
        probes(&merged),
        probes(&reports[0]),
        "the merge judges as the shards did"
    );
}
