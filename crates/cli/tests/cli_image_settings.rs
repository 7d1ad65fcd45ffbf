//! `--api images` by size and steps within one run (`--image-size`, `--image-steps`): every
//! request asks for its combination in turn, its record journals it, and the report splits the
//! step by it (`steps[].image_settings[]`). Against a server written here that takes exactly
//! 1 ms per step per image per 256² pixels of the size it was asked for (so each row's
//! latency per image is known from first principles) and reads the steps under the key
//! given; against the embedded simulator in virtual time (each row's E2E the diffusion cost
//! model's, computed here from its published constant); and the flags' refusals.
#![allow(clippy::unwrap_used)]

mod support;

use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use support::{goodput, ok, read_json, validate_against_schema};

/// The bodies the server received.
type Seen = Arc<Mutex<Vec<Value>>>;

/// The server's time for a request: `n` images × steps × (W·H / 256²) ms.
fn cost_ms(n: u64, (w, h): (u64, u64), steps: u64) -> u64 {
    n * steps * w * h / (256 * 256)
}

/// A server answering `/v1/images/generations` after [`cost_ms`] of the size and the steps
/// (under `steps_key`) each body asked for.
fn server(steps_key: &'static str) -> (String, Seen) {
    let seen: Seen = Arc::default();
    let log = Arc::clone(&seen);
    let address = support::spawn_server(move |stream| serve(stream, steps_key, &log));
    (format!("http://{address}/v1"), seen)
}

/// One connection of [`server`]: every image request answered after its cost, anything else
/// 404.
fn serve(stream: TcpStream, steps_key: &str, log: &Seen) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    while let Some((path, body)) = support::read_request(&mut reader) {
        let response = if path == "/v1/images/generations" {
            let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            let n = body["n"].as_u64().unwrap_or(1);
            let size = body["size"].as_str().unwrap_or("256x256");
            let (w, h) = size.split_once('x').unwrap();
            let size = (w.parse().unwrap(), h.parse().unwrap());
            let steps = body[steps_key].as_u64().unwrap_or(50);
            log.lock().unwrap().push(body);
            std::thread::sleep(Duration::from_millis(cost_ms(n, size, steps)));
            let data: Vec<Value> = (0..n)
                .map(|_| json!({"b64_json": "iVBORw0KGgo="}))
                .collect();
            support::json_response("200 OK", &json!({"created": 1, "data": data}).to_string())
        } else {
            support::json_response("404 Not Found", "{}")
        };
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

fn ms(value: &Value) -> f64 {
    value.as_f64().unwrap()
}

/// The rows (size, steps) in the report's order: fewest pixels, then fewest steps.
const ROWS: [((u64, u64), u64); 4] = [
    ((256, 256), 10),
    ((256, 256), 20),
    ((512, 512), 10),
    ((512, 512), 20),
];

/// Room for a loaded machine above what the server sleeps (never below it), per image.
const SLACK_MS: f64 = 500.0;

#[test]
fn one_run_reports_each_size_and_step_count_on_its_own() {
    let (url, seen) = server("steps");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = goodput()
        .args(["run", "--api", "images", "--target", &url, "--model", "sd"])
        .args(["--image-size", "512x512,256x256", "--image-steps", "10,20"])
        .args(["--image-steps-key", "steps", "--batch-size", "2"])
        .args(["--concurrency", "1", "--requests", "16", "--warmup", "0"])
        .args(["--slo", "e2e=10s", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let output = ok(output);
    check_asked(&seen.lock().unwrap(), &out);
    let report = read_json(&out.join("report.json"));
    validate_against_schema(&report);
    assert_eq!(
        report["run"]["workload"]["image_sizes"],
        json!(["512x512", "256x256"])
    );
    assert_eq!(report["run"]["workload"]["image_steps"], json!([10, 20]));
    let rows = report["steps"][0]["image_settings"].as_array().unwrap();
    check_rows(rows);
    let rate = |i: usize| ms(&rows[i]["throughput"]["requests_per_sec"]);
    let total: f64 = (0..4).map(rate).sum();
    let step_rate = ms(&report["steps"][0]["throughput"]["requests_per_sec"]);
    assert!(
        (total - step_rate).abs() < 1e-6 * step_rate,
        "{total} vs {step_rate}"
    );
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(summary.contains("By image size and steps"), "{summary}");
    assert!(
        summary.contains("| 0 | 512x512 | 20 | 4 | 0 | 8 |"),
        "{summary}"
    );
    assert_eq!(rebuilt(&out)["steps"][0]["image_settings"], json!(rows));
    let dom = support::rendered_dom(&out.join("report.html"));
    assert!(
        dom.contains("By image size and steps"),
        "report.html lacks the section"
    );
    assert!(
        dom.contains("512x512, 20 steps (8 images, "),
        "report.html lacks the row"
    );
    let terminal = String::from_utf8_lossy(&output.stdout);
    assert!(terminal.contains("By image size and steps"), "{terminal}");
    assert!(terminal.contains("256x256, 10 steps"), "{terminal}");
}

/// Request i asked for combination i mod 4, the sizes varying fastest: the server got exactly
/// that (one client: in index order) and the journal records it.
fn check_asked(seen: &[Value], out: &Path) {
    let asked = |i: usize| {
        let size = ["512x512", "256x256"][i % 2];
        (size.to_string(), [10, 20][(i / 2) % 2])
    };
    assert_eq!(seen.len(), 16);
    for (i, body) in seen.iter().enumerate() {
        let got = (
            body["size"].as_str().unwrap().to_string(),
            body["steps"].as_u64().unwrap(),
        );
        assert_eq!(got, asked(i), "{body}");
        assert_eq!(body.get("num_inference_steps"), None, "{body}");
    }
    let journal = std::fs::read_to_string(out.join("requests.jsonl")).unwrap();
    for line in journal.lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        let i = record["index"].as_u64().unwrap() as usize;
        let (size, steps) = asked(i);
        assert_eq!(record["generation"], json!({"size": size, "steps": steps}));
    }
    let csv = std::fs::read_to_string(out.join("requests.csv")).unwrap();
    let mut rows = csv.lines();
    assert!(rows.next().unwrap().ends_with(",image_size,image_steps"));
    for row in rows {
        let cells: Vec<&str> = row.split(',').collect();
        let (size, steps) = asked(cells[0].parse().unwrap());
        let steps = steps.to_string();
        assert_eq!(
            cells[cells.len() - 2..],
            [size.as_str(), steps.as_str()],
            "{row}"
        );
    }
}

/// Each row of the exact server's run: its combination, 4 requests of 2 images, a latency per
/// image at least the server's sleep (never below it), items/s twice its requests/s.
fn check_rows(rows: &[Value]) {
    assert_eq!(rows.len(), ROWS.len(), "{rows:?}");
    for (row, &((w, h), steps)) in rows.iter().zip(&ROWS) {
        assert_eq!(row["size"], format!("{w}x{h}"), "{row}");
        assert_eq!(row["steps"], steps, "{row}");
        assert_eq!(row["requests"]["completed"], 4, "{row}");
        assert_eq!(row["images"], 8, "{row}");
        let per_image = cost_ms(1, (w, h), steps) as f64;
        let latency = &row["latency_ms"];
        let (min, max) = (
            ms(&latency["e2e_per_item"]["min"]),
            ms(&latency["e2e_per_item"]["max"]),
        );
        assert!(
            min >= per_image && max < per_image + SLACK_MS,
            "{w}x{h} {steps} steps: {min}–{max} ms an image, {per_image} slept"
        );
        assert!(
            (ms(&latency["e2e"]["min"]) / 2.0 - min).abs() < 0.01,
            "{row}"
        );
        let t = &row["throughput"];
        assert!((ms(&t["items_per_sec"]) / ms(&t["requests_per_sec"]) - 2.0).abs() < 1e-9);
    }
}

fn rebuilt(out: &Path) -> Value {
    let output = goodput()
        .args(["report", out.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let output = ok(output);
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The simulator's cost of one request of `n` images of `w`×`h` in `steps` steps, ms, from
/// first principles: SDXL's 8.43 steps/s at 1024² (128² latent pixels) on an A100, scaled by
/// latent pixels and images.
fn sim_cost_ms(n: u32, (w, h): (u32, u32), steps: u32) -> f64 {
    let latent = f64::from(w / 8) * f64::from(h / 8);
    1000.0 * f64::from(steps) * f64::from(n) * latent / (128.0 * 128.0 * 8.43)
}

#[test]
fn the_simulator_charges_each_size_and_step_count_its_own_cost_in_virtual_time() {
    let output = goodput()
        .args(["run", "--api", "images", "--virtual-time", "--json"])
        .args(["--image-size", "256x256,512x256", "--image-steps", "8,40"])
        .args(["--batch-size", "3", "--concurrency", "1", "--requests", "8"])
        .args(["--warmup", "0", "--slo", "e2e=60s"])
        .output()
        .unwrap();
    let output = ok(output);
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    validate_against_schema(&report);
    let rows = report["steps"][0]["image_settings"].as_array().unwrap();
    let expected = [
        ((256, 256), 8),
        ((256, 256), 40),
        ((512, 256), 8),
        ((512, 256), 40),
    ];
    assert_eq!(rows.len(), expected.len(), "{rows:?}");
    for (row, &(size, steps)) in rows.iter().zip(&expected) {
        assert_eq!(row["size"], format!("{}x{}", size.0, size.1), "{row}");
        assert_eq!(row["steps"], steps, "{row}");
        assert_eq!(row["requests"]["completed"], 2, "{row}");
        // One request at a time: each exactly its own cost, to the virtual clock's µs.
        let cost = sim_cost_ms(3, size, steps);
        for key in ["min", "max"] {
            let e2e = ms(&row["latency_ms"]["e2e"][key]);
            assert!((e2e - cost).abs() < 1e-3, "{row}: {key} {e2e} vs {cost}");
        }
        let per_image = ms(&row["latency_ms"]["e2e_per_item"]["p50"]);
        assert!(
            (per_image - cost / 3.0).abs() < 1e-3,
            "{per_image} vs {cost}"
        );
    }
}

/// `goodput run --api … ARGS` against nothing: the exit status and stderr.
fn refused(args: &[&str]) -> (Option<i32>, String) {
    let output = goodput()
        .args(["run", "--virtual-time", "--requests", "1"])
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    (output.status.code(), stderr)
}

#[test]
fn the_flags_are_refused_where_they_cannot_be_honoured() {
    let cases: [(&[&str], &str); 5] = [
        (&["--image-size", "512x512"], "--api images"),
        (&["--api", "images", "--image-size", "512"], "--image-size"),
        (&["--api", "images", "--image-steps", "0"], "--image-steps"),
        (
            &["--api", "images", "--image-steps-key", "steps"],
            "--image-steps too",
        ),
        (
            &[
                "--api",
                "images",
                "--image-size",
                "64x64",
                "--extra-body",
                r#"{"size":"64x64"}"#,
            ],
            "--extra-body sets \"size\"",
        ),
    ];
    for (args, expected) in cases {
        let (code, stderr) = refused(args);
        assert_eq!(code, Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}
