//! Shared helpers of the CLI tests that read finished runs: running goodput against a
//! fixed-timing simulator config, the JSON Schema check, and headless Chromium.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use assert_cmd::cargo::CommandCargoExt;

pub mod browser;
pub mod fleet;
pub mod layout;
pub mod median;
pub mod receiver;
pub mod sim_process;
pub mod step_server;
pub mod tune;
pub mod ui_server;
pub mod vision;
use serde_json::Value;

/// One HTTP/1.1 request from a test server's connection: its path and its body (by
/// `content-length`); `None` once the client closed the connection.
pub fn read_request(reader: &mut impl std::io::BufRead) -> Option<(String, Vec<u8>)> {
    let (mut length, mut path, mut line) = (0, String::new(), String::new());
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        if path.is_empty() {
            path = line.split(' ').nth(1).unwrap_or("").to_string();
        }
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = value.trim().parse().unwrap();
        }
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    Some((path, body))
}

/// The head of a streamed answer (the connection closes after it).
pub const EVENT_STREAM_HEAD: &str =
    "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";

/// A whole JSON answer with `status` (`200 OK`) and a content length.
pub fn json_response(status: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// A test server's answer to anything but a chat completion: `/v1/models` lists model `m`
/// (its card with `card_fields`, e.g. `,"max_model_len":2048`), anything else is 404.
pub fn other_reply(path: &str, card_fields: &str) -> String {
    if path.ends_with("/models") {
        let models =
            format!(r#"{{"object":"list","data":[{{"id":"m","object":"model"{card_fields}}}]}}"#);
        json_response("200 OK", &models)
    } else {
        "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n".to_string()
    }
}

/// The prompt of a chat request counted as its messages' words.
pub fn prompt_words(request: &Value) -> u64 {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"].as_str())
        .map(|c| c.split_whitespace().count() as u64)
        .sum()
}

/// One streamed chat token (`t `); the last (`usage`: prompt and answer tokens) finishes the
/// answer and carries its usage.
pub fn token_event(usage: Option<(u64, u64)>) -> String {
    let (finish, usage) = match usage {
        Some((prompt, answer)) => (
            "\"length\"",
            format!(
                r#","usage":{{"prompt_tokens":{prompt},"completion_tokens":{answer},"total_tokens":{}}}"#,
                prompt + answer
            ),
        ),
        None => ("null", String::new()),
    };
    format!(
        "data: {{\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"t \"}},\"finish_reason\":{finish}}}]{usage}}}\n\n"
    )
}

/// `goodput calibrate --json` on `url` (`--seed seed --repeats 1 --passes passes`), writing
/// the configuration to `out`: its JSON and what it printed on stderr.
pub fn calibrate_json(url: &str, (seed, passes): (&str, &str), out: &Path) -> (Value, String) {
    let output = ok(goodput()
        .args([
            "calibrate",
            "--target",
            url,
            "--seed",
            seed,
            "--repeats",
            "1",
        ])
        .args(["--passes", passes, "--json", "--out"])
        .arg(out)
        .output()
        .unwrap());
    assert!(out.exists(), "no configuration written");
    let log = String::from_utf8_lossy(&output.stderr).into_owned();
    (serde_json::from_slice(&output.stdout).unwrap(), log)
}

/// A capacity search's flags for an SLO on the median, by concurrency: attainment 0.5, at
/// confidence 0.5 (the calibration tests' capacity checks).
pub const MEDIAN_BY_CONCURRENCY: [&str; 6] = [
    "--dimension",
    "concurrency",
    "--attainment",
    "0.5",
    "--confidence",
    "0.5",
];

/// Starts a test server on a free loopback port, every connection handled by `handle` on a
/// thread of its own; its address.
pub fn spawn_server(
    handle: impl Fn(std::net::TcpStream) + Send + Sync + 'static,
) -> std::net::SocketAddr {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let handle = std::sync::Arc::new(handle);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let handle = std::sync::Arc::clone(&handle);
            std::thread::spawn(move || handle(stream));
        }
    });
    address
}

pub fn goodput() -> Command {
    Command::cargo_bin("goodput").unwrap()
}

/// A fixed-timing simulator config file (`slots` concurrent streams, exact TTFT and ITL).
pub fn fixed_sim(dir: &Path, name: &str, ttft_ms: u64, itl_ms: u64) -> PathBuf {
    let path = dir.join(format!("{name}.json"));
    let text = format!(
        r#"{{"engine": {{"kind": "fixed", "ttft": {ttft_ms}, "itl": {itl_ms}, "slots": 64}},
            "prompt_tokenizer": "words"}}"#
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// A fixed-timing simulator with 4 slots and a 300 ms service time for a 6-token answer
/// (200 ms TTFT + 5 × 20 ms): capacity 13.33 requests/s; `time_scale` speeds it up.
pub fn four_slot_sim(dir: &Path, time_scale: f64) -> PathBuf {
    let path = dir.join("four-slots.json");
    let text = format!(
        r#"{{"engine": {{"kind": "fixed", "ttft": 200, "itl": 20, "slots": 4}},
            "prompt_tokenizer": "words", "time_scale": {time_scale}}}"#
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// `output` after checking that the command succeeded (else panics with its output).
pub fn ok(output: Output) -> Output {
    assert!(
        output.status.success(),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Runs `goodput run --quiet` with `extra` arguments; panics with its output on failure.
pub fn run_ok(extra: &[&str]) -> Output {
    let output = goodput()
        .args(["run", "--quiet"])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "goodput run {extra:?} failed\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

pub fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

pub fn validate_against_schema(report: &Value) {
    let schema: Value =
        serde_json::from_str(include_str!("../../../../schema/report.v1.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(report)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "report.json does not match the schema:\n{}",
        errors.join("\n")
    );
}

/// The headless Chromium on this machine. Fails the test with a clear message when none is
/// installed (CI installs it in `.ci/run`).
pub fn chromium() -> &'static str {
    ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|name| {
            Command::new(name)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .unwrap_or_else(|| {
            panic!(
                "headless Chromium is needed to check report.html but none was found \
                 (tried chromium, chromium-browser, google-chrome); install it: \
                 apt-get install -y chromium (.ci/run does this)"
            )
        })
}

/// The DOM of `page` after its scripts ran, from headless Chromium with no network. Fails the
/// test with a clear message when Chromium is not installed (CI installs it in `.ci/run`).
pub fn rendered_dom(page: &Path) -> String {
    let chromium = chromium();
    let profile = tempfile::tempdir().unwrap();
    let output = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--disable-extensions",
            "--proxy-server=127.0.0.1:9",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.canonicalize().unwrap().display()))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// The value of `attribute` on the element with `id` in a dumped DOM.
pub fn attribute_of(dom: &str, id: &str, attribute: &str) -> Option<String> {
    let start = dom.find(&format!("id=\"{id}\""))?;
    let tag_start = dom[..start].rfind('<')?;
    let tag_end = start + dom[start..].find('>')?;
    let tag = &dom[tag_start..tag_end];
    let key = format!("{attribute}=\"");
    let value_start = tag.find(&key)? + key.len();
    let value_end = value_start + tag[value_start..].find('"')?;
    Some(tag[value_start..value_end].to_string())
}

/// `(title, points)` of every chart in a dumped DOM.
pub fn charts(dom: &str) -> Vec<(String, usize)> {
    dom.match_indices("<svg class=\"chart\"")
        .map(|(i, _)| {
            let tag = &dom[i..i + dom[i..].find('>').unwrap()];
            let attr = |name: &str| {
                let key = format!("{name}=\"");
                let start = tag.find(&key).map(|s| s + key.len()).unwrap_or(0);
                tag[start..start + tag[start..].find('"').unwrap_or(0)].to_string()
            };
            (attr("data-title"), attr("data-points").parse().unwrap_or(0))
        })
        .collect()
}
