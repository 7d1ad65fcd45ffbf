//! `--api http --stream-format sse|chunked` against a server written here that sleeps a fixed
//! time before each event: TTFT and ITL are at least those sleeps and within generous slack of
//! them; tokens come only from `--tokens-path`, items from `--items-path` over the final event.

#![allow(clippy::unwrap_used)]

mod support;

use std::io::{BufReader, Write};
use std::time::Duration;

use support::{goodput, validate_against_schema};

/// Sleep before the first event.
const FIRST_MS: u64 = 150;
/// Sleep before each later event.
const GAP_MS: u64 = 60;
/// Events per reply (the last carries the items).
const EVENTS: usize = 4;

/// Serves every POST with a chunked SSE reply: `EVENTS` events of one token each, the last one
/// also holding 3 items, then `[DONE]`; `sleep` before each event.
fn sse_server() -> String {
    let address = support::spawn_server(serve);
    format!("http://{address}/generate_stream")
}

fn serve(stream: std::net::TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        if support::read_request(&mut reader).is_none() {
            return;
        }
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        if writer.write_all(head.as_bytes()).is_err() {
            return;
        }
        for event in 0..EVENTS {
            let sleep = if event == 0 { FIRST_MS } else { GAP_MS };
            std::thread::sleep(Duration::from_millis(sleep));
            let data = if event + 1 == EVENTS {
                r#"{"token_ids": [7], "items": ["a", "b", "c"]}"#.to_string()
            } else {
                format!(r#"{{"token_ids": [{event}]}}"#)
            };
            if write_chunk(&mut writer, &format!("data: {data}\n\n")).is_err() {
                return;
            }
        }
        if write_chunk(&mut writer, "data: [DONE]\n\n").is_err()
            || writer.write_all(b"0\r\n\r\n").is_err()
        {
            return;
        }
    }
}

fn write_chunk(writer: &mut impl Write, text: &str) -> std::io::Result<()> {
    write!(writer, "{:x}\r\n{text}\r\n", text.len())?;
    writer.flush()
}

fn run(url: &str, template: &str, extra: &[&str]) -> std::process::Output {
    goodput()
        .args(["run", "--api", "http", "--target", url, "--json"])
        .args(["--request-template", template])
        .args(["--concurrency", "1", "--requests", "4", "--warmup", "0"])
        .args(extra)
        .output()
        .unwrap()
}

fn report(output: &std::process::Output) -> serde_json::Value {
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    validate_against_schema(&report);
    report
}

fn ms(step: &serde_json::Value, metric: &str, quantile: &str) -> f64 {
    step["latency_ms"][metric][quantile].as_f64().unwrap()
}

#[test]
fn sse_events_give_ttft_itl_and_counted_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let template = dir.path().join("t.json");
    std::fs::write(&template, r#"{"inputs": "{{prompt}}", "stream": true}"#).unwrap();
    let template = template.display().to_string();
    let url = sse_server();
    let output = run(
        &url,
        &template,
        &[
            "--stream-format",
            "sse",
            "--tokens-path",
            "$.token_ids",
            "--items-path",
            "$.items[*]",
        ],
    );
    let report = report(&output);
    assert_eq!(report["run"]["stream"], true, "{}", report["run"]);
    let step = &report["steps"][0];
    assert_eq!(step["requests"]["completed"], 4, "{step}");
    // TTFT: the server slept FIRST_MS before the first event; never less, within slack.
    assert!(ms(step, "ttft", "min") >= FIRST_MS as f64, "{step}");
    assert!(ms(step, "ttft", "p50") <= FIRST_MS as f64 + 250.0, "{step}");
    // ITL: one token per event, GAP_MS between events.
    let itl = ms(step, "itl", "p50");
    assert!(
        itl >= GAP_MS as f64 * 0.8 && itl <= GAP_MS as f64 + 150.0,
        "{step}"
    );
    // Tokens from --tokens-path only: EVENTS per request; items from the final event.
    let t = &step["throughput"];
    let per_request =
        |key: &str| t[key].as_f64().unwrap() / t["requests_per_sec"].as_f64().unwrap();
    assert!(
        (per_request("output_tokens_per_sec") - EVENTS as f64).abs() < 1e-6,
        "{t}"
    );
    assert!((per_request("items_per_sec") - 3.0).abs() < 1e-6, "{t}");
}

#[test]
fn chunked_pieces_give_ttft_without_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let template = dir.path().join("t.json");
    std::fs::write(&template, r#"{"inputs": "{{prompt}}"}"#).unwrap();
    let template = template.display().to_string();
    let url = sse_server();
    let report = report(&run(&url, &template, &["--stream-format", "chunked"]));
    let step = &report["steps"][0];
    assert_eq!(step["requests"]["completed"], 4, "{step}");
    assert!(ms(step, "ttft", "min") >= FIRST_MS as f64, "{step}");
    // E2E covers every sleep; no token was counted, so no ITL and no output tokens.
    let all = (FIRST_MS + GAP_MS * (EVENTS as u64 - 1)) as f64;
    assert!(ms(step, "e2e", "min") >= all, "{step}");
    assert_eq!(
        step["throughput"]["output_tokens_per_sec"]
            .as_f64()
            .unwrap(),
        0.0,
        "{step}"
    );
    // A tokens path no event has: a protocol failure, never zero tokens.
    let output = run(
        &url,
        &template,
        &["--stream-format", "sse", "--tokens-path", "$.tokens"],
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        report["steps"][0]["requests"]["failed_by_kind"]["protocol"],
        4
    );
}

#[test]
fn stream_flags_are_refused_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let template = dir.path().join("t.json");
    std::fs::write(&template, r#"{"inputs": "{{prompt}}"}"#).unwrap();
    let template = template.display().to_string();
    for (args, message) in [
        (
            vec!["run", "--api", "chat", "--stream-format", "sse"],
            "go with --api http",
        ),
        (
            vec![
                "run",
                "--api",
                "http",
                "--request-template",
                &template,
                "--tokens-path",
                "$.t",
            ],
            "needs --stream-format sse",
        ),
        (
            vec![
                "run",
                "--api",
                "http",
                "--request-template",
                &template,
                "--stream-format",
                "sse",
                "--tokens-path",
                "t",
            ],
            "must start with `$`",
        ),
    ] {
        let output = goodput()
            .args(args)
            .args(["--target", "http://127.0.0.1:9/x"])
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(message), "{stderr}");
    }
}
