//! Throughput checked by arithmetic from the journal against a server written in the test: when
//! every measured request was sent before any completed, the interval runs from the first
//! scheduled send to the last end and holds every life whole (`docs/metrics.md`, §4), so
//! requests/s is exactly n ÷ (last end − first scheduled) — not cut short by the 10 ms buckets
//! the interval's edges fall into.
#![allow(clippy::unwrap_used)]

mod support;

use std::io::{BufReader, Write};
use std::sync::{Arc, Barrier};
use std::thread::sleep;
use std::time::Duration;

use serde_json::Value;
use support::{EVENT_STREAM_HEAD, goodput, ok, other_reply, read_json, read_request, token_event};

/// A chat server that answers nothing until `n` chat requests have arrived (so nothing
/// completes before the last is sent), then 3 tokens 7 ms apart after 23 ms; its `/v1` URL.
fn all_at_once(n: usize) -> String {
    let barrier = Arc::new(Barrier::new(n));
    let address = support::spawn_server(move |stream| {
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut stream = stream;
        while let Some((path, _)) = read_request(&mut reader) {
            if !path.ends_with("/chat/completions") {
                stream.write_all(other_reply(&path, "").as_bytes()).unwrap();
                continue;
            }
            barrier.wait();
            sleep(Duration::from_millis(23));
            stream.write_all(EVENT_STREAM_HEAD.as_bytes()).unwrap();
            for i in 1..=3u64 {
                let usage = (i == 3).then_some((4, 3));
                stream.write_all(token_event(usage).as_bytes()).unwrap();
                stream.flush().unwrap();
                sleep(Duration::from_millis(7));
            }
            stream.write_all(b"data: [DONE]\n\n").unwrap();
            return;
        }
    });
    format!("http://{address}/v1")
}

/// The measured records of a run's journal.
fn journal(dir: &std::path::Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("requests.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

#[test]
fn requests_sent_before_any_completed_count_whole_over_first_send_to_last_end() {
    let dir = tempfile::tempdir().unwrap();
    for n in [1usize, 3] {
        let out = dir.path().join(format!("c{n}"));
        let count = n.to_string();
        ok(goodput()
            .args(["run", "--quiet", "--no-live", "--target", &all_at_once(n)])
            .args([
                "--concurrency",
                &count,
                "--requests",
                &count,
                "--warmup",
                "0",
            ])
            .args(["--input-tokens", "4", "--output-tokens", "3", "--out"])
            .arg(&out)
            .output()
            .unwrap());
        let records = journal(&out);
        assert_eq!(records.len(), n);
        let us = |r: &Value, key: &str| r[key].as_u64().unwrap() as f64;
        let first = records
            .iter()
            .map(|r| us(r, "scheduled_us"))
            .fold(f64::MAX, f64::min);
        let last = records.iter().map(|r| us(r, "end_us")).fold(0.0, f64::max);
        let expected = n as f64 / ((last - first) / 1e6);
        let step = &read_json(&out.join("report.json"))["steps"][0];
        let measured = step["throughput"]["requests_per_sec"].as_f64().unwrap();
        assert!(
            close(measured, expected),
            "{n}: {measured} ≠ {expected} req/s"
        );
        let tokens = step["throughput"]["output_tokens_per_sec"]
            .as_f64()
            .unwrap();
        assert!(close(tokens, 3.0 * expected), "{n}: {tokens} tok/s");
        let goodput = step["goodput"]["requests_per_sec"].as_f64().unwrap();
        assert!(close(goodput, expected), "{n}: goodput {goodput}");
    }
}
