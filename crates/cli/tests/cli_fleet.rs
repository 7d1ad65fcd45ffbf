//! Fleet figures against a minimal server written here, which logs what each request carried:
//! the correlation id a request was sent with is the id its record holds (the server answers
//! with its own id in the header and the body, derived from the one it received, so each
//! record's three ids must agree); the header's name is configurable or the header left out;
//! wrong uses exit 2.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use support::{goodput, ok, read_json, validate_against_schema};

/// What the server saw of one chat request.
#[derive(Debug, Clone)]
struct Seen {
    /// The correlation header's value (`None`: not sent).
    id: Option<String>,
    /// The body's `model`.
    model: String,
}

type Log = Arc<Mutex<Vec<Seen>>>;

/// One request of a connection: its path, its headers (lower-case names) and its body.
fn read_request(reader: &mut impl BufRead) -> Option<(String, Vec<(String, String)>, Vec<u8>)> {
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
fn serve(stream: TcpStream, header: &str, log: &Log) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    let Some((path, headers, body)) = read_request(&mut reader) else {
        return;
    };
    if !path.ends_with("/chat/completions") {
        let _ = writer.write_all(support::other_reply(&path, "").as_bytes());
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
fn logging_server(header: &'static str) -> (String, Log) {
    let log = Log::default();
    let shared = Arc::clone(&log);
    let address = support::spawn_server(move |stream| serve(stream, header, &shared));
    (format!("http://{address}/v1"), log)
}

/// `goodput run` of `requests` requests against `url`, with `extra` flags, into `out`.
fn run(url: &str, requests: &str, extra: &[&str], out: &Path) {
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
fn journal(out: &Path) -> Vec<Value> {
    std::fs::read_to_string(out.join("requests.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// `requests.csv`'s rows as column → cell maps.
fn csv_rows(out: &Path) -> Vec<std::collections::BTreeMap<String, String>> {
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

#[test]
fn every_request_carries_the_id_its_record_holds() {
    let (url, log) = logging_server("x-request-id");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    run(&url, "24", &[], &out);
    let seen = log.lock().unwrap().clone();
    assert_eq!(seen.len(), 24);
    let sent: BTreeSet<String> = seen.iter().map(|s| s.id.clone().unwrap()).collect();
    assert_eq!(sent.len(), 24, "ids are unique within the run: {sent:?}");
    let records = journal(&out);
    let recorded: BTreeSet<String> = records
        .iter()
        .map(|r| r["request_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(recorded, sent, "the ids recorded are the ids received");
    for record in &records {
        let id = record["request_id"].as_str().unwrap();
        assert!(id.ends_with(&format!("-0-{}", record["index"])), "{id}");
        // The server's answer to *this* id came back on *this* record.
        assert_eq!(record["server_request_id"], format!("srv-{id}"));
        assert_eq!(record["response_id"], format!("resp-{id}"));
    }
    for row in csv_rows(&out) {
        let id = &row["request_id"];
        assert!(sent.contains(id), "{row:?}");
        assert_eq!(row["server_request_id"], format!("srv-{id}"));
        assert_eq!(row["response_id"], format!("resp-{id}"));
    }
    validate_against_schema(&read_json(&out.join("report.json")));
}

#[test]
fn the_id_header_is_named_by_the_user_or_left_out() {
    let (url, log) = logging_server("x-correlation-id");
    let dir = tempfile::tempdir().unwrap();
    let named = dir.path().join("named");
    run(
        &url,
        "6",
        &["--request-id-header", "X-Correlation-Id"],
        &named,
    );
    let seen: Vec<Seen> = log.lock().unwrap().drain(..).collect();
    let sent: BTreeSet<String> = seen.iter().map(|s| s.id.clone().unwrap()).collect();
    let recorded: BTreeSet<String> = journal(&named)
        .iter()
        .map(|r| r["request_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!((sent.len(), recorded), (6, sent));
    // The server's `x-request-id` is not the header named: no server id is recorded.
    assert!(
        journal(&named)
            .iter()
            .all(|r| r.get("server_request_id").is_none())
    );

    let (url, log) = logging_server("x-request-id");
    let off = dir.path().join("off");
    run(&url, "6", &["--no-request-id"], &off);
    assert!(log.lock().unwrap().iter().all(|s| s.id.is_none()));
    for record in journal(&off) {
        assert!(record.get("request_id").is_none(), "{record}");
        assert_eq!(record["response_id"], "resp-anonymous");
    }
}

#[test]
fn wrong_request_id_flags_exit_2() {
    let cases: [&[&str]; 4] = [
        &["--request-id-header", "bad header"],
        &["--request-id-header", ""],
        &["--request-id-header", "Authorization"],
        &["--virtual-time", "--request-id-header", "x-id"],
    ];
    for args in cases {
        let output = goodput()
            .args(["run", "--quiet", "--requests", "2"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("--request-id-header"), "{args:?}: {stderr}");
    }
}

/// How many requests the server saw per model.
fn per_model(log: &Log) -> std::collections::BTreeMap<String, u64> {
    let mut counts = std::collections::BTreeMap::new();
    for seen in log.lock().unwrap().iter() {
        *counts.entry(seen.model.clone()).or_insert(0) += 1;
    }
    counts
}

/// A breakdown's rows as name → (scheduled, completed).
fn rows(step: &Value, key: &str) -> std::collections::BTreeMap<String, (u64, u64)> {
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

#[test]
fn per_model_counts_are_what_the_server_saw() {
    let (url, log) = logging_server("x-request-id");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("models");
    let args = ["--model", "a=70%,b=30%", "--slo", "e2e=10s"];
    let first = ok(goodput()
        .args(["run", "--quiet", "--target", &url, "--requests", "60"])
        .args(["--concurrency", "4", "--warmup", "0", "--seed", "7"])
        .args(["--input-tokens", "4", "--output-tokens", "3"])
        .args(args)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap());
    let seen = per_model(&log);
    assert_eq!(seen.keys().collect::<Vec<_>>(), ["a", "b"], "{seen:?}");
    // The terminal summary has a row per model with its request count.
    let summary = String::from_utf8_lossy(&first.stdout);
    let by_model = summary
        .split("By model")
        .nth(1)
        .expect("a By model section");
    for (model, n) in &seen {
        let line = by_model
            .lines()
            .find(|line| line.trim_start().starts_with(&format!("{model} ")))
            .unwrap_or_else(|| panic!("no row {model} in {summary}"));
        assert_eq!(
            line.split_whitespace().nth(1),
            Some(n.to_string().as_str()),
            "{line}"
        );
    }
    let report = read_json(&out.join("report.json"));
    validate_against_schema(&report);
    let step = &report["steps"][0];
    let rows = rows(step, "models");
    let expected: std::collections::BTreeMap<String, (u64, u64)> =
        seen.iter().map(|(m, n)| (m.clone(), (*n, *n))).collect();
    assert_eq!(rows, expected);
    assert!(seen["a"] > seen["b"], "70% against 30%: {seen:?}");
    for row in step["models"].as_array().unwrap() {
        let (completed, compliant) = (
            row["requests"]["completed"].as_u64().unwrap(),
            row["goodput"]["compliant"].as_u64().unwrap(),
        );
        assert_eq!(completed, compliant, "every request meets e2e=10s: {row}");
        assert_eq!(
            row["latency_ms"]["e2e"]["count"],
            row["requests"]["completed"]
        );
    }
    assert_eq!(report["run"]["model"], "a=70%,b=30%");
    assert!(step.get("adapters").is_none() && step.get("classes").is_none());
    // Every record names the model the server saw it ask for.
    for record in journal(&out) {
        assert!(["a", "b"].contains(&record["model"].as_str().unwrap()));
    }
    // The same draw again: the same split, request by request.
    let again = dir.path().join("again");
    log.lock().unwrap().clear();
    ok(goodput()
        .args(["run", "--quiet", "--target", &url, "--requests", "60"])
        .args(["--concurrency", "4", "--warmup", "0", "--seed", "7"])
        .args(["--input-tokens", "4", "--output-tokens", "3"])
        .args(args)
        .arg("--out")
        .arg(&again)
        .output()
        .unwrap());
    assert_eq!(per_model(&log), seen);
    // The rebuilt report has the same breakdown.
    let rebuilt = goodput()
        .args(["report", out.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let rebuilt: Value = serde_json::from_slice(&ok(rebuilt).stdout).unwrap();
    assert_eq!(rebuilt["steps"][0]["models"], step["models"]);
}

#[test]
fn per_adapter_counts_are_what_the_server_saw() {
    let (url, log) = logging_server("x-request-id");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("adapters");
    run(&url, "80", &["--lora", "sql=30%,chat=20%"], &out);
    let seen = per_model(&log);
    let report = read_json(&out.join("report.json"));
    validate_against_schema(&report);
    let step = &report["steps"][0];
    let rows = rows(step, "adapters");
    // The adapters are asked for by name; the rest of the requests go to the base model `m`.
    let expected: std::collections::BTreeMap<String, (u64, u64)> = seen
        .iter()
        .map(|(m, n)| (if m == "m" { "base" } else { m }.to_string(), (*n, *n)))
        .collect();
    assert_eq!(rows, expected, "{seen:?}");
    assert_eq!(rows.len(), 3, "{seen:?}");
    let order: Vec<&str> = step["adapters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| row["name"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["chat", "sql", "base"]);
    assert!(step.get("models").is_none());
    // The page has the section, one row per adapter with its completed count.
    let dom = support::rendered_dom(&out.join("report.html"));
    let section = dom
        .split("id=\"adapters\"")
        .nth(1)
        .expect("an adapters section");
    let section = section.split("</section>").next().unwrap();
    for (name, (_, completed)) in &rows {
        let cell = format!("<td>{name}</td><td class=\"opt\">{completed}</td>");
        assert!(section.contains(&cell), "{cell} in {section}");
    }
}

#[test]
fn wrong_mixes_exit_2() {
    let cases: [(&[&str], &str); 6] = [
        (&["--model", "a=70%,b=20%"], "--model"),
        (&["--model", "a=70,b=30"], "--model"),
        (&["--lora", "x=80%,y=30%"], "--lora"),
        (&["--lora", "base=10%"], "--lora"),
        (&["--model", "a=50%,b=50%", "--lora", "x=10%"], "--lora"),
        (&["--model", "a=50%,b=50%", "--turns", "2"], "--model"),
    ];
    for (args, named) in cases {
        let output = goodput()
            .args(["run", "--quiet", "--requests", "2"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(named), "{args:?}: {stderr}");
    }
}

/// A model-mix run of `requests` requests with `seed` against `url`, into `out`.
fn mix_run(url: &str, seed: &str, requests: &str, out: &Path) {
    ok(goodput()
        .args(["run", "--quiet", "--target", url, "--requests", requests])
        .args(["--concurrency", "4", "--warmup", "0", "--seed", seed])
        .args(["--input-tokens", "4", "--output-tokens", "3"])
        .args(["--model", "a=70%,b=30%", "--slo", "e2e=10s"])
        .arg("--out")
        .arg(out)
        .output()
        .unwrap());
}

#[test]
fn compare_gate_and_history_read_the_rows_by_name() {
    let (url, _log) = logging_server("x-request-id");
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    mix_run(&url, "1", "30", &a);
    mix_run(&url, "2", "40", &b);
    let completed = |run: &Path, model: &str| {
        let report = read_json(&run.join("report.json"));
        let rows = report["steps"][0]["models"].as_array().unwrap().clone();
        let row = rows.iter().find(|r| r["name"] == model).unwrap().clone();
        row["requests"]["completed"].as_f64().unwrap()
    };
    let compared = ok(goodput()
        .args(["compare", "--format", "json"])
        .args([&a, &b])
        .output()
        .unwrap());
    let compared: Value = serde_json::from_slice(&compared.stdout).unwrap();
    let comparison = compared.as_array().map_or(&compared, |all| &all[0]);
    for model in ["a", "b"] {
        let path = format!("models[{model}].requests.completed");
        let row = comparison["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["path"] == path.as_str())
            .unwrap_or_else(|| panic!("no {path} in {comparison}"));
        assert_eq!(row["a"].as_f64(), Some(completed(&a, model)), "{row}");
        assert_eq!(row["b"].as_f64(), Some(completed(&b, model)), "{row}");
    }
    let gate = |condition: &str| {
        goodput()
            .args(["gate", "--condition", condition])
            .arg(&b)
            .output()
            .unwrap()
            .status
            .code()
    };
    let n = completed(&b, "b");
    assert_eq!(
        gate(&format!("models[b].requests.completed == {n}")),
        Some(0)
    );
    assert_eq!(
        gate(&format!("models[b].requests.completed != {n}")),
        Some(1)
    );
    assert_eq!(gate("models[c].requests.completed == 1"), Some(2));
    let store = dir.path().join("runs.db");
    ok(goodput()
        .args(["history", "--store"])
        .arg(&store)
        .arg("--add")
        .arg(a.join("report.json"))
        .arg("--add")
        .arg(b.join("report.json"))
        .output()
        .unwrap());
    let history = ok(goodput()
        .args(["history", "--store"])
        .arg(&store)
        .args(["--metric", "models[a].requests.completed"])
        .output()
        .unwrap());
    let text = String::from_utf8_lossy(&history.stdout);
    for run in [&a, &b] {
        let value = completed(run, "a");
        assert!(text.contains(&format!("{value}")), "{value} in {text}");
    }
}

/// Serves streamed chat answers of 2 tokens whose first token comes 20 ms after the request
/// when the index in its correlation id (`<run>-<step>-<index>`) is even, 400 ms when odd; the
/// second 10 ms later.
fn serve_by_parity(stream: TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    let Some((path, headers, _)) = read_request(&mut reader) else {
        return;
    };
    if !path.ends_with("/chat/completions") {
        let _ = writer.write_all(support::other_reply(&path, "").as_bytes());
        return;
    }
    let index: u64 = headers
        .iter()
        .find(|(name, _)| name == "x-request-id")
        .and_then(|(_, id)| id.rsplit('-').next()?.parse().ok())
        .unwrap();
    let first = if index % 2 == 0 { 20 } else { 400 };
    let _ = writer.write_all(support::EVENT_STREAM_HEAD.as_bytes());
    std::thread::sleep(std::time::Duration::from_millis(first));
    let _ = writer.write_all(support::token_event(None).as_bytes());
    let _ = writer.flush();
    std::thread::sleep(std::time::Duration::from_millis(10));
    let last = support::token_event(Some((4, 2)));
    let _ = writer.write_all(format!("{last}data: [DONE]\n\n").as_bytes());
}

#[test]
fn each_class_is_judged_against_its_own_slo() {
    let address = support::spawn_server(serve_by_parity);
    let url = format!("http://{address}/v1");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("classes");
    ok(goodput()
        .args(["run", "--quiet", "--target", &url, "--model", "m"])
        .args([
            "--requests",
            "40",
            "--concurrency",
            "8",
            "--warmup",
            "0",
            "--seed",
            "3",
        ])
        .args([
            "--input-tokens",
            "4",
            "--output-tokens",
            "2",
            "--slo",
            "ttft=200ms",
        ])
        .args(["--class", "interactive=60%:ttft=200ms,tpot=100ms"])
        .args(["--class", "batch=40%:e2e=30s"])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap());
    // By arithmetic: an interactive request meets its SLO exactly when its index is even
    // (20 ms against 400 ms to the first token, 200 ms allowed); every batch request meets
    // 30 s; the step's --slo ttft=200ms holds for the even half of all requests.
    let mut expected: std::collections::BTreeMap<String, (u64, u64)> = Default::default();
    for record in journal(&out) {
        let class = record["class"].as_str().unwrap().to_string();
        let even = record["index"].as_u64().unwrap() % 2 == 0;
        let entry = expected.entry(class.clone()).or_default();
        entry.0 += 1;
        entry.1 += u64::from(class == "batch" || even);
    }
    assert_eq!(expected.len(), 2, "{expected:?}");
    let report = read_json(&out.join("report.json"));
    validate_against_schema(&report);
    let step = &report["steps"][0];
    let classes = step["classes"].as_array().unwrap();
    for class in classes {
        let name = class["name"].as_str().unwrap();
        let (n, met) = expected[name];
        assert_eq!(class["requests"]["completed"], n, "{class}");
        assert_eq!(class["goodput"]["compliant"], met, "{name}: {class}");
        let attained = class["goodput"]["attained_fraction"].as_f64().unwrap();
        assert!(
            (attained - met as f64 / n as f64).abs() < 1e-9,
            "{name}: {attained}"
        );
        let slo = class["slo"].as_str().unwrap();
        assert!(
            slo.contains(if name == "batch" { "e2e" } else { "tpot" }),
            "{slo}"
        );
    }
    let interactive = expected["interactive"];
    assert!(
        interactive.1 > 0 && interactive.1 < interactive.0,
        "{interactive:?}"
    );
    assert_eq!(
        step["goodput"]["compliant"], 20,
        "the step's SLO: the even half"
    );
    assert_eq!(report["run"]["classes"][0]["name"], "interactive");
    assert_eq!(report["run"]["classes"][0]["share"], 0.6);
    // The journal and run.json rebuild the same classes.
    let rebuilt = goodput()
        .args(["report", out.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let rebuilt: Value = serde_json::from_slice(&ok(rebuilt).stdout).unwrap();
    assert_eq!(rebuilt["steps"][0]["classes"], step["classes"]);
}

#[test]
fn wrong_classes_exit_2() {
    let cases: [&[&str]; 4] = [
        &["--class", "a=60%:ttft=1s", "--class", "b=30%:e2e=1s"],
        &["--class", "a=100%"],
        &["--class", "a=100%:ttft=fast"],
        &["--class", "a=100%:"],
    ];
    for args in cases {
        let output = goodput()
            .args(["run", "--quiet", "--requests", "2"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("--class"), "{args:?}: {stderr}");
    }
}
