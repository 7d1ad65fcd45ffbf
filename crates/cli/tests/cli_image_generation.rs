//! `--api images` (`/v1/images/generations`) end to end through the binary, against a server
//! written here that takes exactly 60 ms per image asked (`n`) and answers `n` `b64_json`
//! entries — or one fewer for a prompt containing "short": images/s is items/s, a request of
//! `n` images takes at least `n` × 60 ms, a short answer is a counted `protocol` failure. The
//! report validates against the schema. Refused without `--target`.
#![allow(clippy::unwrap_used)]

mod support;

use std::io::{BufReader, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use support::{goodput, validate_against_schema};

/// The bodies the server received.
type Seen = Arc<Mutex<Vec<Value>>>;

const MS_PER_IMAGE: u64 = 60;

fn images_server(short: bool) -> (String, Seen) {
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
                while let Some((path, body)) = support::read_request(&mut reader) {
                    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let n = body["n"].as_u64().unwrap_or(1);
                    let (status, answer) = if path == "/v1/images/generations" {
                        log.lock().unwrap().push(body);
                        std::thread::sleep(Duration::from_millis(MS_PER_IMAGE * n));
                        let returned = if short { n - 1 } else { n };
                        let data: Vec<Value> = (0..returned)
                            .map(|_| json!({"b64_json": "iVBORw0KGgo="}))
                            .collect();
                        ("200 OK", json!({"created": 1, "data": data}))
                    } else {
                        ("404 Not Found", json!({}))
                    };
                    let answer = answer.to_string();
                    let response = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
                        answer.len()
                    );
                    if writer.write_all(response.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (format!("http://{address}/v1"), seen)
}

fn run(url: &str, extra: &str) -> (std::process::Output, Value) {
    let args = format!(
        "run --json --warmup 0 --concurrency 1 --api images --target {url} --model sd \
         --requests 4 --slo e2e=10s {extra}"
    );
    let output = goodput().args(args.split_whitespace()).output().unwrap();
    let report = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (output, report)
}

#[test]
fn images_per_second_and_latency_per_image_against_a_server() {
    let (url, seen) = images_server(false);
    let (output, report) = run(&url, "--batch-size 3");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    validate_against_schema(&report);
    assert_eq!(report["run"]["api"], "images");
    assert_eq!(report["run"]["item_unit"], "images");
    let step = &report["steps"][0];
    assert_eq!(step["requests"]["completed"], 4, "{step}");
    let t = &step["throughput"];
    let ratio = t["items_per_sec"].as_f64().unwrap() / t["requests_per_sec"].as_f64().unwrap();
    assert!((ratio - 3.0).abs() < 1e-9, "{t}");
    // 3 images at 60 ms each: at least 180 ms per request; generous bound for a loaded host.
    let e2e = step["latency_ms"]["e2e"]["min"].as_f64().unwrap();
    assert!((180.0..5000.0).contains(&e2e), "e2e {e2e}");
    let per_image = step["latency_ms"]["e2e_per_item"]["min"].as_f64().unwrap();
    assert!(
        (e2e / 3.0 - per_image).abs() < 0.01,
        "{per_image} per image of {e2e}"
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 4);
    for body in seen.iter() {
        assert_eq!(body["n"], 3, "{body}");
        assert_eq!(body["model"], "sd");
        assert_eq!(body["response_format"], "b64_json");
        assert!(
            body["prompt"].as_str().is_some_and(|p| !p.is_empty()),
            "{body}"
        );
    }
}

#[test]
fn fewer_images_than_asked_are_protocol_failures() {
    let (url, _) = images_server(true);
    let (_, report) = run(&url, "--batch-size 2");
    let step = &report["steps"][0];
    assert_eq!(step["requests"]["completed"], 0, "{step}");
    assert!(
        report.to_string().contains("1 data entries for 2 inputs"),
        "{report}"
    );
}

#[test]
fn images_without_a_target_are_refused() {
    let output = goodput()
        .args(["run", "--api", "images", "--requests", "1"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--api images needs --target"), "{stderr}");
}
