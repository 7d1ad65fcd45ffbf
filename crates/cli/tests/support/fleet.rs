//! A minimal OpenAI-compatible server for the fleet tests that logs what each request carried
//! (its correlation id header and its `model`), and readers of what a run wrote.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::{goodput, ok};

/// What the server saw of one chat request.
#[derive(Debug, Clone)]
pub struct Seen {
    /// The correlation header's value (`None`: not sent).
    pub id: Option<String>,
    /// The body's `model`.
    pub model: String,
}

pub type Log = Arc<Mutex<Vec<Seen>>>;

/// A request's headers: lower-case names and their values.
pub type Headers = Vec<(String, String)>;

/// One request of a connection: its path, its headers (lower-case names) and its body.
pub fn read_request(reader: &mut impl BufRead) -> Option<(String, Headers, Vec<u8>)> {
    let (mut path, mut headers, mut line) = (String::new(), Vec::new(), String::new());
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        if line == "\r\n" {
            break;
        }
        if path.is_empty() {
            path = line.split(' ').nth(1).unwrap_or("").to_string();
        } else if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
        }
    }
    let length = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .map_or(0, |(_, value)| value.parse().unwrap());
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    Some((path, headers, body))
}

/// Serves `/v1/models` and streamed chat answers of 3 tokens; logs each chat request's id
/// header (named `header`) and model. The answer's `x-request-id` header is `srv-<id>` and its
/// chunks' `id` is `resp-<id>` (`anonymous` without one).
pub fn serve(stream: TcpStream, header: &str, log: &Log) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    let Some((path, headers, body)) = read_request(&mut reader) else {
        return;
    };
    if !path.ends_with("/chat/completions") {
        let _ = writer.write_all(super::other_reply(&path, "").as_bytes());
        return;
    }
    let request: Value = serde_json::from_slice(&body).unwrap();
    let id = headers
        .iter()
        .find(|(name, _)| name == header)
        .map(|(_, value)| value.clone());
    let model = request["model"].as_str().unwrap_or("").to_string();
    log.lock().unwrap().push(Seen {
        id: id.clone(),
        model,
    });
    let own = id.unwrap_or_else(|| "anonymous".into());
    let mut reply = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nx-request-id: srv-{own}\r\n\
         connection: close\r\n\r\n"
    );
    for token in 0..3 {
        let tail = if token == 2 {
            r#","usage":{"prompt_tokens":4,"completion_tokens":3,"total_tokens":7}"#
        } else {
            ""
        };
        let finish = if token == 2 { "\"length\"" } else { "null" };
        reply.push_str(&format!(
            "data: {{\"id\":\"resp-{own}\",\"object\":\"chat.completion.chunk\",\"choices\":\
             [{{\"index\":0,\"delta\":{{\"content\":\"t \"}},\"finish_reason\":{finish}}}]{tail}}}\n\n"
        ));
    }
    reply.push_str("data: [DONE]\n\n");
    let _ = writer.write_all(reply.as_bytes());
}

/// A logging server whose correlation header is `header`; its URL and log.
pub fn logging_server(header: &'static str) -> (String, Log) {
    let log = Log::default();
    let shared = Arc::clone(&log);
    let address = super::spawn_server(move |stream| serve(stream, header, &shared));
    (format!("http://{address}/v1"), log)
}

/// `goodput run` of `requests` requests against `url`, with `extra` flags, into `out`.
pub fn run(url: &str, requests: &str, extra: &[&str], out: &Path) {
    ok(goodput()
        .args(["run", "--quiet", "--target", url, "--model", "m"])
        .args([
            "--requests",
            requests,
            "--concurrency",
            "4",
            "--warmup",
            "0",
        ])
        .args(["--input-tokens", "4", "--output-tokens", "3", "--seed", "7"])
        .args(extra)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap());
}

/// The journal's records.
pub fn journal(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out.join("requests.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// `requests.csv`'s rows as column → cell maps.
pub fn csv_rows(out: &Path) -> Vec<std::collections::BTreeMap<String, String>> {
    let text = std::fs::read_to_string(out.join("requests.csv")).unwrap();
    let mut lines = text.lines();
    let columns: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines
        .map(|line| {
            columns
                .iter()
                .zip(line.split(','))
                .map(|(c, v)| ((*c).to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

/// How many requests the server saw per model.
pub fn per_model(log: &Log) -> std::collections::BTreeMap<String, u64> {
    let mut counts = std::collections::BTreeMap::new();
    for seen in log.lock().unwrap().iter() {
        *counts.entry(seen.model.clone()).or_insert(0) += 1;
    }
    counts
}

/// A breakdown's rows as name → (scheduled, completed).
pub fn rows(step: &Value, key: &str) -> std::collections::BTreeMap<String, (u64, u64)> {
    step[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in {step}"))
        .iter()
        .map(|row| {
            let requests = &row["requests"];
            (
                row["name"].as_str().unwrap().to_string(),
                (
                    requests["scheduled"].as_u64().unwrap(),
                    requests["completed"].as_u64().unwrap(),
                ),
            )
        })
        .collect()
}

/// A model-mix run of `requests` requests with `seed` against `url`, into `out`.
pub fn mix_run(url: &str, seed: &str, requests: &str, out: &Path) -> std::process::Output {
    ok(goodput()
        .args(["run", "--quiet", "--target", url, "--requests", requests])
        .args(["--concurrency", "4", "--warmup", "0", "--seed", seed])
        .args(["--input-tokens", "4", "--output-tokens", "3"])
        .args(["--model", "a=70%,b=30%", "--slo", "e2e=10s"])
        .arg("--out")
        .arg(out)
        .output()
        .unwrap())
}

/// Checks that the summary's `section` ("By model") has a row per name of `counts` with its
/// request count.
pub fn assert_summary_rows(stdout: &[u8], section: &str, counts: &BTreeMap<String, u64>) {
    let summary = String::from_utf8_lossy(stdout);
    let rows = summary
        .split(section)
        .nth(1)
        .unwrap_or_else(|| panic!("no {section} in {summary}"));
    for (name, n) in counts {
        let line = rows
            .lines()
            .find(|line| line.trim_start().starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no row {name} in {summary}"));
        let count = line.split_whitespace().nth(1);
        assert_eq!(count, Some(n.to_string().as_str()), "{line}");
    }
}

/// The first step of the report `goodput report DIR` rebuilds from the journal.
pub fn rebuilt_step(out: &Path) -> Value {
    let rebuilt = goodput()
        .args(["report", out.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let rebuilt: Value = serde_json::from_slice(&ok(rebuilt).stdout).unwrap();
    rebuilt["steps"][0].clone()
}
