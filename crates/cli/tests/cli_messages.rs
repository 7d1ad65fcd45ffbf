//! `--api messages` (Anthropic Messages) end to end through the binary: against a server
//! written here that answers every `/v1/messages` request with a fixed event stream (40 ms to
//! the first text delta, then three more 10 ms apart; usage 2 uncached + 3 written + 4 read
//! prompt tokens and 4 output tokens), and the checks of what goodput sent (`x-api-key`,
//! `anthropic-version`, `max_tokens`); the report validates against the schema. Refused
//! without `--target`.
#![allow(clippy::unwrap_used)]

mod support;

use std::io::{BufRead, BufReader, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use support::{EVENT_STREAM_HEAD, goodput, validate_against_schema};

/// What the server saw: (request line and headers, body) of every request.
type Seen = Arc<Mutex<Vec<(String, Value)>>>;

fn read_request(reader: &mut impl BufRead) -> Option<(String, Vec<u8>)> {
    let (mut head, mut length, mut line) = (String::new(), 0, String::new());
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = value.trim().parse().unwrap();
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    Some((head, body))
}

fn event(value: &Value) -> String {
    format!(
        "event: {}\ndata: {value}\n\n",
        value["type"].as_str().unwrap()
    )
}

/// Answers one request on `stream` with the scripted event stream (or 404 off `/v1/messages`).
fn answer(stream: std::net::TcpStream, seen: &Seen) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    let Some((head, body)) = read_request(&mut reader) else {
        return;
    };
    if !head.starts_with("POST /v1/messages ") {
        let _ = writer
            .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        return;
    }
    seen.lock()
        .unwrap()
        .push((head, serde_json::from_slice(&body).unwrap_or(Value::Null)));
    let start = json!({"type": "message_start", "message": {"id": "msg_t", "type": "message",
        "role": "assistant", "content": [], "usage": {"input_tokens": 2,
        "cache_creation_input_tokens": 3, "cache_read_input_tokens": 4, "output_tokens": 1}}});
    let block = json!({"type": "content_block_start", "index": 0,
                       "content_block": {"type": "text", "text": ""}});
    let mut out = format!("{EVENT_STREAM_HEAD}{}{}", event(&start), event(&block));
    if writer.write_all(out.as_bytes()).is_err() {
        return;
    }
    for (delay, piece) in [(40, "One"), (10, " two"), (10, " three"), (10, " four")] {
        std::thread::sleep(Duration::from_millis(delay));
        let delta = json!({"type": "content_block_delta", "index": 0,
                           "delta": {"type": "text_delta", "text": piece}});
        if writer.write_all(event(&delta).as_bytes()).is_err() {
            return;
        }
    }
    out = [
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
               "usage": {"output_tokens": 4}}),
        json!({"type": "message_stop"}),
    ]
    .iter()
    .map(event)
    .collect();
    let _ = writer.write_all(out.as_bytes());
}

fn messages_server() -> (String, Seen) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let seen: Seen = Arc::default();
    let log = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let log = Arc::clone(&log);
            std::thread::spawn(move || answer(stream, &log));
        }
    });
    (format!("http://{address}/v1"), seen)
}

/// Every request carried the key as `x-api-key`, the API version and `max_tokens`.
fn assert_sent_the_anthropic_way(seen: &Seen, requests: usize) {
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), requests);
    for (head, body) in seen.iter() {
        let head = head.to_ascii_lowercase();
        assert!(head.contains("x-api-key: sk-ant-test-key"), "{head}");
        assert!(head.contains("anthropic-version: 2023-06-01"), "{head}");
        assert!(!head.contains("authorization:"), "{head}");
        assert_eq!(body["max_tokens"], 4, "{body}");
        assert_eq!(body["model"], "claude-test");
        assert!(body.get("ignore_eos").is_none(), "{body}");
    }
}

#[test]
fn messages_are_sent_the_anthropic_way_and_timed_from_their_events() {
    let (url, seen) = messages_server();
    let args = format!(
        "run --json --warmup 0 --concurrency 1 --api messages --target {url} --model \
         claude-test --requests 3 --input-tokens 16 --output-tokens 4 --no-ignore-eos \
         --api-key sk-ant-test-key"
    );
    let output = goodput().args(args.split_whitespace()).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    validate_against_schema(&report);
    assert_eq!(report["run"]["api"], "messages");
    let step = &report["steps"][0];
    assert_eq!(step["requests"]["completed"], 3, "{step}");
    // Usage, not goodput's tokenizer: 2 + 3 + 4 prompt tokens and 4 output tokens each.
    assert_eq!(step["tokens"]["output_total"], 12, "{step}");
    assert_eq!(step["tokens"]["input_per_request"]["mean"], 9.0, "{step}");
    let text = report.to_string();
    assert!(
        !text.contains("sk-ant-test-key"),
        "the key leaked into the report"
    );
    // TTFT ≥ 40 ms (the server's sleep), TPOT ≥ 10 ms (its gaps); generous upper bounds for
    // a loaded machine.
    let ttft = step["latency_ms"]["ttft"]["p50"].as_f64().unwrap();
    let tpot = step["latency_ms"]["tpot"]["p50"].as_f64().unwrap();
    assert!((40.0..2000.0).contains(&ttft), "ttft {ttft}");
    assert!((10.0..2000.0).contains(&tpot), "tpot {tpot}");
    assert_sent_the_anthropic_way(&seen, 3);
}

#[test]
fn the_simulator_serves_messages_live_and_in_virtual_time() {
    // A fixed engine: first token at 40 ms, then 2 ms per token; 5 output tokens each.
    let dir = tempfile::tempdir().unwrap();
    let sim = dir.path().join("sim.json");
    std::fs::write(
        &sim,
        r#"{"engine": {"kind": "fixed", "ttft": 40, "itl": 2, "slots": 64}, "prompt_tokenizer": "words"}"#,
    )
    .unwrap();
    for virtual_time in [false, true] {
        let out = dir.path().join(format!("out-{virtual_time}"));
        let mut command = goodput();
        command
            .args([
                "run",
                "--warmup",
                "0",
                "--concurrency",
                "2",
                "--api",
                "messages",
            ])
            .args([
                "--requests",
                "6",
                "--input-tokens",
                "20",
                "--output-tokens",
                "5",
            ])
            .args([
                "--sim-config",
                sim.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ]);
        if virtual_time {
            command.arg("--virtual-time");
        }
        let output = command.output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{virtual_time}: {stderr}");
        let report = support::read_json(&out.join("report.json"));
        validate_against_schema(&report);
        let api = if virtual_time { "virtual" } else { "messages" };
        assert_eq!(report["run"]["api"], api);
        let step = &report["steps"][0];
        assert_eq!(step["requests"]["completed"], 6, "{step}");
        assert_eq!(step["tokens"]["output_total"], 30, "{step}");
        let ttft = step["latency_ms"]["ttft"]["min"].as_f64().unwrap();
        let tpot = step["latency_ms"]["tpot"]["p50"].as_f64().unwrap();
        assert!(ttft >= 40.0, "{virtual_time}: ttft {ttft}");
        if virtual_time {
            assert!((ttft - 40.0).abs() < 0.01, "ttft {ttft}");
            assert!((tpot - 2.0).abs() < 0.01, "tpot {tpot}");
        }
    }
}

#[test]
fn messages_without_max_tokens_are_refused_by_the_simulator() {
    // The simulator answers a Messages body without `max_tokens` with 400, as the API does.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let output = goodput()
        .args([
            "run",
            "--warmup",
            "0",
            "--api",
            "messages",
            "--requests",
            "2",
        ])
        .args([
            "--input-tokens",
            "20",
            "--extra-body",
            r#"{"max_tokens": "none"}"#,
        ])
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let report = support::read_json(&out.join("report.json"));
    let step = &report["steps"][0];
    assert_eq!(step["requests"]["completed"], 0, "{step}");
    let text = report.to_string();
    assert!(
        text.contains("max_tokens: field required"),
        "{}: {text}",
        String::from_utf8_lossy(&output.stderr)
    );
}
