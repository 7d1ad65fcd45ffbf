//! `--api embeddings|rerank` end to end against the embedded simulator (fixed engine: every
//! prefill takes its TTFT): items, the item unit and the per-item latency in report.json, the
//! terminal summary and the Markdown tables; `--batch-size` refused where a request carries one
//! conversation; `sweep --batch-steps` over an encoder API.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;

use support::{goodput, read_json, validate_against_schema};

fn fixed_sim(dir: &Path, ttft_ms: u64) -> String {
    let path = dir.join("sim.json");
    let text = format!(
        r#"{{"engine": {{"kind": "fixed", "ttft": {ttft_ms}, "itl": 2, "slots": 64}},
            "prompt_tokenizer": "words"}}"#
    );
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn embeddings_run_reports_inputs_per_second_and_latency_per_input() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let sim = fixed_sim(dir.path(), 40);
    let output = goodput()
        .args(["run", "--api", "embeddings", "--batch-size", "4"])
        .args(["--concurrency", "2", "--requests", "24", "--warmup", "0"])
        .args(["--input-tokens", "16", "--seed", "3", "--sim-config", &sim])
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("inputs/s · 4.00 inputs per request"),
        "{stdout}"
    );
    let report = read_json(&out.join("report.json"));
    validate_against_schema(&report);
    assert_eq!(report["run"]["api"], "embeddings");
    assert_eq!(report["run"]["item_unit"], "inputs");
    assert_eq!(report["run"]["stream"], false);
    assert_eq!(report["run"]["slo"], "e2e=2s");
    let step = &report["steps"][0];
    assert_eq!(step["requests"]["completed"], 24);
    let t = &step["throughput"];
    let ratio = t["items_per_sec"].as_f64().unwrap() / t["requests_per_sec"].as_f64().unwrap();
    assert!((ratio - 4.0).abs() < 1e-9, "{t}");
    assert_eq!(t["output_tokens_per_sec"], 0.0);
    // 4 inputs of 16 words each: the simulator's usage counts them.
    assert_eq!(step["tokens"]["input_per_request"]["mean"], 64.0);
    let e2e = step["latency_ms"]["e2e"]["p50"].as_f64().unwrap();
    let per_item = step["latency_ms"]["e2e_per_item"]["p50"].as_f64().unwrap();
    // The simulator holds every request for its 40 ms prefill.
    assert!(e2e >= 40.0, "{e2e}");
    assert!(
        (per_item * 4.0 - e2e).abs() <= 0.1 * e2e,
        "{per_item} vs {e2e}"
    );
    assert_eq!(step["goodput"]["attained_fraction"], 1.0);
    let journal = std::fs::read_to_string(out.join("requests.jsonl")).unwrap();
    let first: serde_json::Value = serde_json::from_str(journal.lines().next().unwrap()).unwrap();
    assert_eq!(first["items"], 4);
    assert!(first.get("requested_output_tokens").is_none(), "{first}");
    let markdown = goodput()
        .args(["report", out.to_str().unwrap(), "--format", "markdown"])
        .output()
        .unwrap();
    let markdown = String::from_utf8_lossy(&markdown.stdout);
    assert!(markdown.contains("| inputs/s |"), "{markdown}");
    assert!(markdown.contains("| E2E per item |"), "{markdown}");
}

#[test]
fn rerank_counts_documents_and_batch_size_is_refused_on_chat() {
    let dir = tempfile::tempdir().unwrap();
    let sim = fixed_sim(dir.path(), 10);
    let output = goodput()
        .args(["run", "--api", "rerank", "--batch-size", "5", "--json"])
        .args(["--concurrency", "1", "--requests", "6", "--warmup", "0"])
        .args(["--input-tokens", "8", "--sim-config", &sim])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["run"]["item_unit"], "documents");
    let tokens = report["steps"][0]["tokens"]["input_per_request"]["mean"]
        .as_f64()
        .unwrap();
    // Each of the 5 documents (8 words) is read with the query (the first 8 words).
    assert_eq!(tokens, 80.0);
    for (api, size) in [("chat", "2"), ("embeddings", "0")] {
        let refused = goodput()
            .args(["run", "--api", api, "--batch-size", size, "--requests", "2"])
            .args(["--sim-config", &sim])
            .output()
            .unwrap();
        assert!(!refused.status.success());
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(stderr.contains("--batch-size"), "{stderr}");
    }
}

#[test]
fn sweep_over_embedding_batch_sizes_grows_inputs_per_second() {
    let dir = tempfile::tempdir().unwrap();
    let sim = fixed_sim(dir.path(), 40);
    let output = goodput()
        .args([
            "sweep",
            "--api",
            "embeddings",
            "--batch-steps",
            "1,8",
            "--json",
        ])
        .args(["--requests", "12", "--warmup", "0", "--input-tokens", "8"])
        .args(["--sim-config", &sim])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let items = |i: usize| {
        report["steps"][i]["throughput"]["items_per_sec"]
            .as_f64()
            .unwrap()
    };
    // One request at a time, each held 40 ms whatever its size: 8 inputs per request carry
    // (nearly) 8 times the inputs per second.
    assert!(items(1) > 4.0 * items(0), "{} vs {}", items(1), items(0));
    assert_eq!(report["sweep"]["dimension"], "batch");
}

/// A loopback server answering every request with `body` after `delay_ms` (keep-alive).
fn json_server(body: &'static str, delay_ms: u64) -> String {
    use std::io::{BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut writer = stream;
                loop {
                    if support::read_request(&mut reader).is_none() {
                        return;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(delay_ms));
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if writer.write_all(response.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    format!("http://{address}/v2/models/m/infer")
}

#[test]
fn http_api_sends_the_template_and_counts_items_by_json_path() {
    let dir = tempfile::tempdir().unwrap();
    let template = dir.path().join("template.json");
    std::fs::write(
        &template,
        r#"{"inputs": [{"name": "text", "data": "{{prompts}}"}]}"#,
    )
    .unwrap();
    let url = json_server(r#"{"outputs": [{"data": [1, 2, 3, 4, 5, 6]}]}"#, 30);
    let template = template.display().to_string();
    let run = |path: &str| {
        goodput()
            .args(["run", "--api", "http", "--target", &url, "--json"])
            .args(["--request-template", &template, "--items-path", path])
            .args(["--batch-size", "6", "--concurrency", "1", "--requests", "5"])
            .args(["--warmup", "0"])
            .output()
            .unwrap()
    };
    let output = run("$.outputs[0].data[*]");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    validate_against_schema(&report);
    assert_eq!(report["run"]["api"], "http");
    let step = &report["steps"][0];
    assert_eq!(step["requests"]["completed"], 5);
    let t = &step["throughput"];
    let ratio = t["items_per_sec"].as_f64().unwrap() / t["requests_per_sec"].as_f64().unwrap();
    assert!((ratio - 6.0).abs() < 1e-9, "{t}");
    // The server sleeps 30 ms before every answer.
    assert!(step["latency_ms"]["e2e"]["min"].as_f64().unwrap() >= 30.0);
    // A path the reply does not have: every request fails as `protocol`, none counts zero.
    let output = run("$.predictions[*]");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        report["steps"][0]["requests"]["failed_by_kind"]["protocol"],
        5
    );
    // A template that does not parse, a path that does not: refused before the run.
    std::fs::write(dir.path().join("bad.json"), r#"{"a": "{{promt}}"}"#).unwrap();
    let bad = dir.path().join("bad.json").display().to_string();
    for (template, path, message) in [
        (bad.as_str(), "$.a", "unknown placeholder"),
        (template.as_str(), "outputs", "must start with `$`"),
    ] {
        let refused = goodput()
            .args(["run", "--api", "http", "--target", &url])
            .args(["--request-template", template, "--items-path", path])
            .output()
            .unwrap();
        assert_eq!(refused.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert!(stderr.contains(message), "{stderr}");
    }
}
