//! `--api v2` (KServe v2 / Open Inference Protocol) end to end: against a server written here
//! that checks every request's path and tensor and answers after a fixed 30 ms (rows, refusals
//! with 400 `{"error"}`, short answers), and against the embedded simulator live and in
//! virtual time (items = batch rows, `sweep --batch-steps`); flags refused where they make no
//! sense. Also `--api rerank --query` (the same server answers rerank bodies).
#![allow(clippy::unwrap_used)]

mod support;

use std::io::{BufReader, Write};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use support::{goodput, read_json, validate_against_schema};

/// What the server saw: (path, body) of every request with a body.
type Seen = Arc<Mutex<Vec<(String, Value)>>>;

/// A v2 server: 30 ms per request; rows = the first input's first dimension; more than
/// `max_batch` rows → 400 `{"error"}`; `short` answers one row fewer than sent.
fn v2_server(max_batch: u64, short: bool) -> (String, Seen) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let seen: Seen = Arc::default();
    let log = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut writer = stream;
                loop {
                    let Some((path, request)) = support::read_request(&mut reader) else {
                        return;
                    };
                    let body: Value = serde_json::from_slice(&request).unwrap_or(Value::Null);
                    let rows = body["inputs"][0]["shape"][0].as_u64().unwrap_or(0);
                    let documents = body["documents"].as_array().map(Vec::len);
                    if !request.is_empty() {
                        // POSTs only (goodput also scrapes GET /metrics).
                        log.lock().unwrap().push((path, body));
                    }
                    std::thread::sleep(std::time::Duration::from_millis(30));
                    let (status, answer) = match documents {
                        // No metrics here.
                        _ if request.is_empty() => ("404 Not Found", json!({})),
                        Some(documents) => ("200 OK", rerank_answer(documents)),
                        None => answer(rows, max_batch, short),
                    };
                    let answer = answer.to_string();
                    let response = support::json_response(status, &answer);
                    if writer.write_all(response.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (format!("http://{address}"), seen)
}

/// The answer to a batch of `rows`.
fn answer(rows: u64, max_batch: u64, short: bool) -> (&'static str, Value) {
    if rows > max_batch {
        let message = format!("batch of {rows} exceeds the model's {max_batch}");
        return ("400 Bad Request", json!({ "error": message }));
    }
    let rows = if short { rows - 1 } else { rows };
    let data = vec![0.5; rows as usize * 2];
    let output = json!({"name": "p", "shape": [rows, 2], "datatype": "FP32", "data": data});
    ("200 OK", json!({"model_name": "m", "outputs": [output]}))
}

/// A rerank answer scoring `documents` documents.
fn rerank_answer(documents: usize) -> Value {
    let results: Vec<Value> = (0..documents)
        .map(|index| json!({"index": index, "relevance_score": 0.5}))
        .collect();
    json!({ "results": results })
}

fn run_json(args: &[&str]) -> (std::process::Output, Value) {
    let output = goodput()
        .args(["run", "--json", "--warmup", "0", "--concurrency", "1"])
        .args(args)
        .output()
        .unwrap();
    let report = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (output, report)
}

#[test]
fn v2_sends_tensors_and_counts_rows_against_a_server() {
    let (url, seen) = v2_server(8, false);
    let (output, report) = run_json(&[
        "--api",
        "v2",
        "--target",
        &url,
        "--model",
        "m",
        "--requests",
        "6",
        "--tensor-shape",
        "1x3x4",
        "--tensor-dtype",
        "INT64",
        "--tensor-name",
        "pixels",
        "--batch-size",
        "4",
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    validate_against_schema(&report);
    assert_eq!(report["run"]["api"], "v2");
    assert_eq!(report["run"]["item_unit"], "rows");
    let step = &report["steps"][0];
    assert_eq!(step["requests"]["completed"], 6);
    let t = &step["throughput"];
    let ratio = t["items_per_sec"].as_f64().unwrap() / t["requests_per_sec"].as_f64().unwrap();
    assert!((ratio - 4.0).abs() < 1e-9, "{t}");
    // The server sleeps 30 ms per batch: per-batch E2E ≥ 30 ms, per row ≥ 7.5 ms.
    let latency = &step["latency_ms"];
    assert!(latency["e2e"]["min"].as_f64().unwrap() >= 30.0, "{latency}");
    assert!(
        latency["e2e_per_item"]["min"].as_f64().unwrap() >= 7.5,
        "{latency}"
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 6);
    for (path, body) in seen.iter() {
        assert_eq!(path, "/v2/models/m/infer");
        let input = &body["inputs"][0];
        assert_eq!(input["name"], "pixels");
        assert_eq!(input["datatype"], "INT64");
        assert_eq!(input["shape"], json!([4, 3, 4]));
        assert_eq!(input["data"].as_array().unwrap().len(), 48);
    }
}

#[test]
fn refused_shapes_and_short_answers_are_counted_failures() {
    let (url, _) = v2_server(2, false);
    let (output, report) = run_json(&[
        "--api",
        "v2",
        "--target",
        &url,
        "--model",
        "m",
        "--requests",
        "3",
        "--tensor-shape",
        "4x2",
    ]);
    // Every request failed: the run says so (exit 1) and counts them.
    assert_eq!(
        output.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let requests = &report["steps"][0]["requests"];
    assert_eq!(requests["failed_by_status"]["400"], 3, "{requests}");
    assert_eq!(requests["completed"], 0, "{requests}");
    let journal = serde_json::to_string(&report).unwrap();
    assert!(
        journal.contains("batch of 4 exceeds the model's 2"),
        "{journal}"
    );
    let (url, _) = v2_server(8, true);
    let (_, report) = run_json(&[
        "--api",
        "v2",
        "--target",
        &url,
        "--model",
        "m",
        "--requests",
        "2",
        "--tensor-shape",
        "3x2",
    ]);
    let requests = &report["steps"][0]["requests"];
    assert_eq!(requests["failed_by_kind"]["protocol"], 2, "{requests}");
}

#[test]
fn tensor_files_are_sent_in_turn() {
    let (url, seen) = v2_server(8, false);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tensors.jsonl");
    std::fs::write(
        &file,
        "{\"inputs\":[{\"name\":\"a\",\"shape\":[2,1],\"datatype\":\"INT64\",\"data\":[1,2]}]}\n\
         [{\"name\":\"a\",\"shape\":[5,1],\"datatype\":\"INT64\",\"data\":[1,2,3,4,5]}]\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let (output, report) = run_json(&[
        "--api",
        "v2",
        "--target",
        &url,
        "--model",
        "m",
        "--requests",
        "4",
        "--tensor-file",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_no_input_tokens(&out, &report);
    let records = std::fs::read_to_string(out.join("requests.jsonl")).unwrap();
    let mut items: Vec<(u64, u64)> = records
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter_map(|r| Some((r["index"].as_u64()?, r["items"].as_u64()?)))
        .collect();
    items.sort_unstable();
    assert_eq!(items, [(0, 2), (1, 5), (2, 2), (3, 5)]);
    let rows: Vec<u64> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|(_, body)| body["inputs"][0]["shape"][0].as_u64().unwrap())
        .collect();
    assert_eq!(rows, [2, 5, 2, 5]);
}

#[test]
fn bytes_tensors_keep_their_prompts_token_counts() {
    let (url, seen) = v2_server(8, false);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let (output, report) = run_json(&[
        "--api",
        "v2",
        "--target",
        &url,
        "--model",
        "m",
        "--requests",
        "3",
        "--tensor-dtype",
        "BYTES",
        "--tensor-shape",
        "1",
        "--input-tokens",
        "12",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    // The prompts went as the tensor's strings; their counts are the input tokens.
    assert!(seen.lock().unwrap()[0].1["inputs"][0]["data"][0].is_string());
    let records = std::fs::read_to_string(out.join("requests.jsonl")).unwrap();
    for line in records.lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        assert_eq!(record["input_tokens"], 12, "{record}");
        assert_eq!(record["input_tokens_source"], "workload", "{record}");
    }
    assert_eq!(report["steps"][0]["tokens"]["input_total"], 36);
    assert_eq!(report["run"]["workload"].get("tensor_input_tokens"), None);
}

#[test]
fn flags_that_need_v2_are_refused_elsewhere() {
    for args in [
        &["--api", "chat", "--tensor-shape", "1x3"][..],
        &["--api", "embeddings", "--tensor-dtype", "FP32"],
        &["--api", "v2", "--tensor-shape", "0x3"],
        &["--api", "v2", "--tensor-dtype", "FLOAT"],
        &[
            "--api",
            "v2",
            "--target",
            "http://127.0.0.1:9",
            "--tensor-shape",
            "2x2",
        ],
        &["--api", "v2", "--tensor-file", "/nonexistent.jsonl"],
    ] {
        let output = goodput()
            .args(["run", "--requests", "1"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
    }
}

fn fixed_sim(dir: &std::path::Path) -> String {
    let path = dir.join("sim.json");
    std::fs::write(
        &path,
        r#"{"engine": {"kind": "fixed", "ttft": 40, "itl": 2, "slots": 64}, "prompt_tokenizer": "words"}"#,
    )
    .unwrap();
    path.display().to_string()
}

#[test]
fn the_simulator_serves_v2_live_and_in_virtual_time() {
    let dir = tempfile::tempdir().unwrap();
    let sim = fixed_sim(dir.path());
    for virtual_time in [false, true] {
        let out = dir.path().join(format!("out-{virtual_time}"));
        let mut args = vec![
            "--api",
            "v2",
            "--tensor-shape",
            "4x3x32x32",
            "--requests",
            "10",
            "--sim-config",
            &sim,
            "--out",
            out.to_str().unwrap(),
        ];
        if virtual_time {
            args.push("--virtual-time");
        }
        let (output, _) = run_json(&args);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let report = read_json(&out.join("report.json"));
        let step = &report["steps"][0];
        assert_eq!(step["requests"]["completed"], 10);
        let t = &step["throughput"];
        let ratio = t["items_per_sec"].as_f64().unwrap() / t["requests_per_sec"].as_f64().unwrap();
        assert!((ratio - 4.0).abs() < 1e-9, "{t}");
        // The fixed engine finishes every prefill in its 40 ms TTFT.
        let e2e = step["latency_ms"]["e2e"]["min"].as_f64().unwrap();
        assert!(e2e >= 40.0, "{virtual_time}: {e2e}");
        if virtual_time {
            assert!((e2e - 40.0).abs() < 0.01, "{e2e}");
        }
        // Numeric tensors are not text: no input tokens, live or in virtual time (where the
        // simulator charges its prefill by elements, a figure no v2 server reports), and the
        // run says why.
        assert_no_input_tokens(&out, &report);
    }
}

/// A v2 run of numeric tensors: every record without input tokens (source `none`), none
/// in the report, and `run.workload.tensor_input_tokens` saying why.
fn assert_no_input_tokens(out: &std::path::Path, report: &Value) {
    let records = std::fs::read_to_string(out.join("requests.jsonl")).unwrap();
    for line in records.lines() {
        let record: Value = serde_json::from_str(line).unwrap();
        assert_eq!(record["input_tokens"], Value::Null, "{record}");
        assert_eq!(record["input_tokens_source"], "none", "{record}");
        assert_eq!(record.get("expected_input_tokens"), None, "{record}");
    }
    let step = &report["steps"][0];
    assert_eq!(step["tokens"]["input_total"], 0, "{step}");
    assert_eq!(step["throughput"]["input_tokens_per_sec"], 0.0, "{step}");
    let note = report["run"]["workload"]["tensor_input_tokens"]
        .as_str()
        .unwrap();
    assert!(note.contains("not text"), "{note}");
}

#[test]
fn sweep_over_v2_batch_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let sim = fixed_sim(dir.path());
    let out = dir.path().join("sweep");
    let output = goodput()
        .args([
            "sweep",
            "--api",
            "v2",
            "--tensor-shape",
            "1x64",
            "--batch-steps",
            "1..8x8",
        ])
        .args([
            "--requests",
            "6",
            "--warmup",
            "0",
            "--virtual-time",
            "--quiet",
        ])
        .args(["--sim-config", &sim, "--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = read_json(&out.join("report.json"));
    let per_request = |i: usize| {
        let t = &report["steps"][i]["throughput"];
        t["items_per_sec"].as_f64().unwrap() / t["requests_per_sec"].as_f64().unwrap()
    };
    assert_eq!((per_request(0), per_request(1)), (1.0, 8.0));
}

#[test]
fn rerank_sends_the_query_given() {
    let (url, seen) = v2_server(8, false);
    let target = format!("{url}/v1");
    let (output, report) = run_json(&[
        "--api",
        "rerank",
        "--target",
        &target,
        "--model",
        "m",
        "--requests",
        "3",
        "--batch-size",
        "5",
        "--query",
        "which cat sat",
    ]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(report["steps"][0]["requests"]["completed"], 3);
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3);
    for (path, body) in seen.iter() {
        assert_eq!(path, "/v1/rerank");
        assert_eq!(body["query"], "which cat sat");
        assert_eq!(body["documents"].as_array().unwrap().len(), 5);
    }
    let refused = goodput()
        .args([
            "run",
            "--api",
            "embeddings",
            "--query",
            "x",
            "--requests",
            "1",
        ])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
}
