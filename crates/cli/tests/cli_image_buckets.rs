//! Vision prompts reported by resolution bucket, against independent references: a server
//! written in the tests (`support::vision`) that waits a known time per image pixel before
//! the first token, so each bucket's TTFT and E2E are known to within the machine's slack;
//! the embedded simulator in virtual time (each image charged ⌈⌈w/14⌉·⌈h/14⌉/4⌉ prompt
//! tokens: bigger images, longer prefill); and `--turns` sessions, where every user turn
//! carries its own images and re-sends the earlier ones.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use support::vision::{STREAM_GAP, Seen, instant, server};
use support::{goodput, read_json, validate_against_schema};

/// The server's wait before the first token: 1 ms per 512 pixels (64×64: 8 ms, 256×256:
/// 128 ms).
fn per_pixel(sizes: &[(u32, u32)]) -> Duration {
    let pixels: u64 = sizes
        .iter()
        .map(|&(w, h)| u64::from(w) * u64::from(h))
        .sum();
    Duration::from_millis(pixels / 512)
}

/// Room for a loaded machine above what the server waits (never below it).
const SLACK_MS: f64 = 1000.0;

fn ok(output: &std::process::Output) {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn ms(value: &Value) -> f64 {
    value.as_f64().unwrap()
}

#[test]
fn each_resolution_bucket_reports_its_own_counts_latency_and_throughput() {
    let seen: Seen = Arc::default();
    let url = server(Arc::clone(&seen), per_pixel);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = goodput()
        .args(["run", "--target", &url, "--model", "m", "--out"])
        .arg(&out)
        .args(["--image-resolution", "64x64,256x256"])
        .args(["--concurrency", "1", "--requests", "8", "--warmup", "0"])
        .output()
        .unwrap();
    ok(&output);
    let report = read_json(&out.join("report.json"));
    validate_against_schema(&report);
    let step = &report["steps"][0];
    let buckets = step["image_buckets"].as_array().unwrap();
    let names: Vec<&str> = buckets
        .iter()
        .map(|b| b["resolution"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["64x64", "256x256"]);
    for (bucket, wait) in buckets.iter().zip([8.0, 128.0]) {
        assert_bucket(bucket, wait);
    }
    // The buckets split the step: their throughputs add up to its own.
    let sum: f64 = buckets
        .iter()
        .map(|b| ms(&b["throughput"]["requests_per_sec"]))
        .sum();
    let step_rate = ms(&step["throughput"]["requests_per_sec"]);
    assert!(
        (sum - step_rate).abs() < 1e-6 * step_rate,
        "{sum} vs {step_rate}"
    );
    // Bigger images, later first token: the server's 120 ms difference shows.
    let p50 = |i: usize| ms(&buckets[i]["latency_ms"]["ttft"]["p50"]);
    assert!(p50(1) - p50(0) >= 60.0, "{} vs {}", p50(1), p50(0));
    assert_journal_and_exports(&out, step, &output.stdout);
    assert!(seen.lock().unwrap().len() == 8);
}

/// Every record names its image (request `i`: size `i mod 2`); the journal rebuilds the same
/// buckets; the terminal (`stdout`), summary.md, requests.csv and report.html show them.
fn assert_journal_and_exports(out: &Path, step: &Value, stdout: &[u8]) {
    let journal = std::fs::read_to_string(out.join("requests.jsonl")).unwrap();
    for line in journal.lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        let size = if record["index"].as_u64().unwrap().is_multiple_of(2) {
            "64x64"
        } else {
            "256x256"
        };
        assert_eq!(record["images"], serde_json::json!([size]), "{record}");
    }
    assert_eq!(
        rebuilt(out)["steps"][0]["image_buckets"],
        step["image_buckets"]
    );
    // The terminal, summary.md, requests.csv and report.html show them.
    let terminal = String::from_utf8_lossy(stdout);
    assert!(terminal.contains("By image resolution"), "{terminal}");
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(summary.contains("| 0 | 256x256 | 4 | 0 | 4 |"), "{summary}");
    let csv = std::fs::read_to_string(out.join("requests.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let column = header.iter().position(|c| *c == "images").unwrap();
    assert!(csv.lines().skip(1).all(|l| {
        let cell = l.split(',').nth(column).unwrap_or_default();
        cell == "64x64" || cell == "256x256"
    }));
    let dom = support::rendered_dom(&out.join("report.html"));
    assert!(
        dom.contains("By image resolution"),
        "report.html lacks the section"
    );
    assert!(
        dom.contains("256x256 (4 images, "),
        "report.html lacks the bucket"
    );
}

/// A bucket of 4 single-image requests whose first token came `wait` ms after the send.
fn assert_bucket(bucket: &Value, wait: f64) {
    let gap = STREAM_GAP.as_secs_f64() * 1e3;
    assert_eq!(bucket["requests"]["completed"], 4, "{bucket}");
    assert_eq!(bucket["requests"]["failed"], 0, "{bucket}");
    assert_eq!(bucket["images"], 4, "{bucket}");
    let latency = &bucket["latency_ms"];
    for p in ["p50", "p99"] {
        let ttft = ms(&latency["ttft"][p]);
        assert!(
            (wait..wait + SLACK_MS).contains(&ttft),
            "TTFT {p}: {latency}"
        );
        let e2e = ms(&latency["e2e"][p]);
        assert!(
            (wait + gap..wait + gap + SLACK_MS).contains(&e2e),
            "E2E {p}: {latency}"
        );
    }
    // One image a request: images/s is requests/s.
    let rate = ms(&bucket["throughput"]["requests_per_sec"]);
    assert!(rate > 0.0);
    assert!(
        (ms(&bucket["images_per_sec"]) - rate).abs() < 1e-9,
        "{bucket}"
    );
}

/// `goodput report DIR --json`.
fn rebuilt(out: &Path) -> Value {
    let output = goodput()
        .args(["report", out.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    ok(&output);
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn a_run_without_images_has_no_image_section() {
    let output = goodput()
        .args(["run", "--virtual-time", "--requests", "4", "--json"])
        .args(["--input-tokens", "16", "--output-tokens", "2"])
        .output()
        .unwrap();
    ok(&output);
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["steps"][0].get("image_buckets"), None);
}

/// The TTFT p50 (ms) of each resolution bucket of a virtual-time run.
fn virtual_ttft(extra: &[&str]) -> Vec<(String, u64, f64)> {
    let output = goodput()
        .args(["run", "--virtual-time", "--json", "--seed", "5"])
        .args(["--requests", "20", "--concurrency", "1", "--warmup", "0"])
        .args(["--input-tokens", "32", "--output-tokens", "4"])
        .args(extra)
        .output()
        .unwrap();
    ok(&output);
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    validate_against_schema(&report);
    report["steps"][0]["image_buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["resolution"].as_str().unwrap().to_string(),
                b["requests"]["completed"].as_u64().unwrap(),
                ms(&b["latency_ms"]["ttft"]["p50"]),
            )
        })
        .collect()
}

#[test]
fn in_virtual_time_bigger_images_take_longer_to_first_token() {
    // 224×224: 64 image tokens; 672×672: 576; 1120×1120: 1,600 (⌈⌈w/14⌉·⌈h/14⌉/4⌉).
    let rows = virtual_ttft(&["--image-resolution", "224x224,672x672,1120x1120"]);
    let names: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(names, ["224x224", "672x672", "1120x1120"]);
    let counts: Vec<u64> = rows.iter().map(|r| r.1).collect();
    assert_eq!(counts, [7, 7, 6]);
    assert!(rows[0].2 < rows[1].2 && rows[1].2 < rows[2].2, "{rows:?}");
    // Two images a request, both sizes in each: one mixed bucket.
    let mixed = virtual_ttft(&[
        "--image-resolution",
        "896x896,224x224",
        "--images-per-request",
        "2",
    ]);
    assert_eq!(mixed.len(), 1, "{mixed:?}");
    assert_eq!((mixed[0].0.as_str(), mixed[0].1), ("224x224+896x896", 20));
}

#[test]
fn every_turn_of_a_session_carries_its_images() {
    let seen: Seen = Arc::default();
    let url = server(Arc::clone(&seen), instant);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = goodput()
        .args([
            "run",
            "--target",
            &url,
            "--model",
            "m",
            "--no-stream",
            "--out",
        ])
        .arg(&out)
        .args(["--turns", "3", "--image-resolution", "32x32,16x8"])
        .args(["--input-tokens", "16", "--output-tokens", "2"])
        .args(["--concurrency", "1", "--requests", "6", "--warmup", "0"])
        .output()
        .unwrap();
    ok(&output);
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 6);
    let sizes = [(32, 32), (16, 8)];
    for (index, request) in seen.iter().enumerate() {
        // Turn t re-sends turns 0…t−1 with their images and adds its own (request i: image
        // i mod 2, as single requests take them).
        let users: Vec<&Vec<(u32, u32)>> = request
            .iter()
            .filter(|(role, _)| role == "user")
            .map(|(_, images)| images)
            .collect();
        let turn = index % 3;
        assert_eq!(users.len(), turn + 1, "{request:?}");
        for (k, images) in users.iter().enumerate() {
            let sent_as = index - turn + k;
            assert_eq!(images.as_slice(), [sizes[sent_as % 2]], "request {index}");
        }
        assert!(
            request
                .iter()
                .all(|(role, images)| role == "user" || images.is_empty())
        );
    }
    // The records count every image a turn carried.
    let journal = std::fs::read_to_string(out.join("requests.jsonl")).unwrap();
    let mut carried: Vec<(u64, usize)> = journal
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .map(|r| {
            let images = r["images"].as_array().map_or(0, Vec::len);
            (r["index"].as_u64().unwrap(), images)
        })
        .collect();
    carried.sort_unstable();
    assert_eq!(carried, [(0, 1), (1, 2), (2, 3), (3, 1), (4, 2), (5, 3)]);
}

/// `(index, images carried, input tokens)` of each record of a virtual-time session run.
fn virtual_session_records(dir: &Path, extra: &[&str]) -> Vec<(u64, usize, u64)> {
    let out = dir.join(format!("sessions{}", extra.len()));
    let output = goodput()
        .args(["run", "--virtual-time", "--quiet", "--seed", "9", "--out"])
        .arg(&out)
        .args([
            "--turns",
            "3",
            "--input-tokens",
            "16",
            "--output-tokens",
            "4",
        ])
        .args(["--concurrency", "1", "--requests", "6", "--warmup", "0"])
        .args(extra)
        .output()
        .unwrap();
    ok(&output);
    let journal = std::fs::read_to_string(out.join("requests.jsonl")).unwrap();
    let mut records: Vec<(u64, usize, u64)> = journal
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .map(|r| {
            let images = r["images"].as_array().map_or(0, Vec::len);
            let input = r["input_tokens"].as_u64().unwrap();
            (r["index"].as_u64().unwrap(), images, input)
        })
        .collect();
    records.sort_unstable();
    records
}

#[test]
fn in_virtual_time_each_turn_pays_for_every_image_it_carries() {
    let dir = tempfile::tempdir().unwrap();
    let plain = virtual_session_records(dir.path(), &[]);
    let with = virtual_session_records(dir.path(), &["--image-resolution", "224x224"]);
    let carried: Vec<usize> = with.iter().map(|r| r.1).collect();
    assert_eq!(carried, [1, 2, 3, 1, 2, 3]);
    // Each 224×224 image costs the simulator 64 prompt tokens, history images included.
    let extra: Vec<u64> = with.iter().zip(&plain).map(|(w, p)| w.2 - p.2).collect();
    assert_eq!(extra, [64, 128, 192, 64, 128, 192]);
}
