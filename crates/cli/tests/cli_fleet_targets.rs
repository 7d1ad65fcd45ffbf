//! A fleet of targets in one run, against replicas written here: each answers after its own
//! fixed service time (as many requests at once as come), names itself in `x-served-by`,
//! counts what it served and says so on `/metrics`. Round-robin and weighted routing split
//! the requests exactly; least-outstanding favours the fast replica; every per-target and
//! per-replica row equals what that replica served, on its own count and on its `/metrics`.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::Value;
use support::fleet::{read_request, rows};
use support::{goodput, ok, spawn_server};

/// One replica: its name, its URL and how many chat requests it answered.
struct Replica {
    name: &'static str,
    url: String,
    served: Arc<AtomicU64>,
}

/// A replica answering every chat request after `service_ms` with 3 streamed tokens.
fn replica(name: &'static str, service_ms: u64) -> Replica {
    let served = Arc::new(AtomicU64::new(0));
    let count = Arc::clone(&served);
    let address = spawn_server(move |stream| serve(stream, name, service_ms, &count));
    Replica {
        name,
        url: format!("http://{address}/v1"),
        served,
    }
}

fn serve(stream: TcpStream, name: &str, service_ms: u64, served: &AtomicU64) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    let Some((path, _, _)) = read_request(&mut reader) else {
        return;
    };
    if path.ends_with("/metrics") {
        let n = served.load(Ordering::SeqCst);
        let body = format!(
            "vllm:request_success_total{{model_name=\"m\",finished_reason=\"length\"}} {n}\n\
             vllm:generation_tokens_total{{model_name=\"m\"}} {}\n\
             vllm:num_requests_running{{model_name=\"m\"}} 0\n",
            3 * n
        );
        let _ = write!(
            writer,
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n{body}",
            body.len()
        );
        return;
    }
    if !path.ends_with("/chat/completions") {
        let _ = writer.write_all(support::other_reply(&path, "").as_bytes());
        return;
    }
    std::thread::sleep(Duration::from_millis(service_ms));
    let mut reply = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nx-served-by: {name}\r\n\
         connection: close\r\n\r\n"
    );
    for token in 0..3 {
        let (finish, usage) = if token == 2 {
            (
                "\"length\"",
                r#","usage":{"prompt_tokens":4,"completion_tokens":3,"total_tokens":7}"#,
            )
        } else {
            ("null", "")
        };
        reply.push_str(&format!(
            "data: {{\"object\":\"chat.completion.chunk\",\"choices\":[{{\"index\":0,\
             \"delta\":{{\"content\":\"t \"}},\"finish_reason\":{finish}}}]{usage}}}\n\n"
        ));
    }
    reply.push_str("data: [DONE]\n\n");
    // Counted before the answer goes out: a client that has read it finds it counted.
    served.fetch_add(1, Ordering::SeqCst);
    let _ = writer.write_all(reply.as_bytes());
}

/// Three replicas: fast (5 ms), medium (20 ms) and slow (80 ms).
fn three() -> Vec<Replica> {
    vec![
        replica("fast", 5),
        replica("medium", 20),
        replica("slow", 80),
    ]
}

/// `goodput run` of `requests` over `replicas` (each `--target NAME=URL`) with `extra` flags;
/// its report.
fn fleet_run(replicas: &[Replica], requests: u32, extra: &[&str]) -> Value {
    let out = tempfile::tempdir().unwrap();
    let mut command = goodput();
    command.args(["run", "--quiet", "--model", "m", "--json"]);
    for r in replicas {
        command.args(["--target", &format!("{}={}", r.name, r.url)]);
    }
    let output = ok(command
        .args(["--requests", &requests.to_string(), "--concurrency", "6"])
        .args([
            "--warmup",
            "0",
            "--input-tokens",
            "4",
            "--output-tokens",
            "3",
        ])
        .args(["--seed", "3", "--slo", "e2e=30s"])
        .args(extra)
        .arg("--out")
        .arg(out.path())
        .output()
        .unwrap());
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    support::validate_against_schema(&report);
    // The journal names each request's target, and rebuilding the report keeps the rows and
    // each target's own counts.
    let rebuilt = support::fleet::rebuilt_step(out.path());
    let step = &report["steps"][0];
    assert_eq!(rows(&rebuilt, "targets"), rows(step, "targets"));
    for (was, again) in step["targets"]
        .as_array()
        .unwrap()
        .iter()
        .zip(rebuilt["targets"].as_array().unwrap())
    {
        assert_eq!(was["server"], again["server"]);
    }
    report
}

/// Requests each replica answered (and zeroes its count for the next run).
fn served(replicas: &[Replica]) -> BTreeMap<String, u64> {
    replicas
        .iter()
        .map(|r| (r.name.to_string(), r.served.swap(0, Ordering::SeqCst)))
        .collect()
}

/// Each target's own `/metrics` count of `counter` over the step, by name.
fn own_counts(step: &Value, counter: &str) -> BTreeMap<String, u64> {
    step["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            let count = row["server"][counter].as_f64();
            let count = count.unwrap_or_else(|| panic!("no server.{counter} in {row}"));
            (row["name"].as_str().unwrap().to_string(), count as u64)
        })
        .collect()
}

/// A breakdown's rows as name → completed requests.
fn completed(step: &Value, key: &str) -> BTreeMap<String, u64> {
    rows(step, key)
        .into_iter()
        .map(|(name, (_, done))| (name, done))
        .collect()
}

#[test]
fn round_robin_and_weighted_split_exactly_and_rows_match_each_replica() {
    let replicas = three();
    let report = fleet_run(&replicas, 60, &[]);
    let step = &report["steps"][0];
    let counts = served(&replicas);
    let expected: BTreeMap<String, u64> = ["fast", "medium", "slow"]
        .into_iter()
        .map(|name| (name.to_string(), 20))
        .collect();
    assert_eq!(counts, expected, "round-robin: 60 requests, 20 each");
    assert_eq!(completed(step, "targets"), counts);
    assert!(step.get("replicas").is_none(), "no --replica-header");
    assert_eq!(own_counts(step, "requests_finished"), counts);
    let tokens: BTreeMap<String, u64> = counts.iter().map(|(k, v)| (k.clone(), 3 * v)).collect();
    assert_eq!(own_counts(step, "generation_tokens"), tokens);
    assert!(
        step["server"].is_null(),
        "a fleet has no single server section"
    );
    assert!(
        report["run"]["target"]
            .as_str()
            .unwrap()
            .starts_with("fleet of 3 targets (round-robin)"),
        "{}",
        report["run"]["target"]
    );

    let report = fleet_run(
        &replicas,
        100,
        &[
            "--route",
            "weighted:3,1,1",
            "--replica-header",
            "x-served-by",
        ],
    );
    let step = &report["steps"][0];
    let counts = served(&replicas);
    assert_eq!(
        counts.values().copied().collect::<Vec<_>>(),
        [60, 20, 20],
        "{counts:?}"
    );
    assert_eq!(completed(step, "targets"), counts);
    assert_eq!(completed(step, "replicas"), counts, "the header names each");
}

#[test]
fn least_outstanding_favours_the_fast_replica() {
    let replicas = three();
    let report = fleet_run(&replicas, 120, &["--route", "least-outstanding"]);
    let counts = served(&replicas);
    assert_eq!(completed(&report["steps"][0], "targets"), counts);
    let (fast, medium, slow) = (counts["fast"], counts["medium"], counts["slow"]);
    assert_eq!(fast + medium + slow, 120);
    // Six clients, about two in flight on each replica: the fast one (5 ms) answers 4× as
    // often as the medium (20 ms) and 16× as the slow (80 ms) — round-robin would give 40 each.
    eprintln!("least-outstanding over 5/20/80 ms replicas: {counts:?}");
    assert!(fast > medium && medium > slow, "{counts:?}");
    assert!(fast >= 60, "{counts:?}");
}

#[test]
fn bad_fleets_are_refused_with_exit_2() {
    let replicas = three();
    let target = |r: &Replica| format!("{}={}", r.name, r.url);
    let (a, b) = (target(&replicas[0]), target(&replicas[1]));
    let cases: [(Vec<&str>, &str); 4] = [
        (
            vec!["--target", &a, "--route", "least-outstanding"],
            "give --target more than once",
        ),
        (
            vec!["--target", &a, "--target", &b, "--route", "weighted:1,2,3"],
            "3 weights for 2 targets",
        ),
        (
            vec!["--target", &a, "--target", &a],
            "two targets are named",
        ),
        (
            vec!["--target", &a, "--target", &b, "--route", "random"],
            "round-robin, least-outstanding or weighted",
        ),
    ];
    for (args, message) in cases {
        let output = goodput()
            .args(["run", "--quiet", "--requests", "2", "--model", "m"])
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
    let output = goodput()
        .args(["run", "--quiet", "--virtual-time", "--requests", "2"])
        .args(["--replica-header", "x-served-by"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--replica-header"));
}

/// A gateway in front of two replicas: it answers itself, naming `r1` and `r2` in turn.
fn gateway() -> (String, Arc<[AtomicU64; 2]>) {
    let served = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    let turn = Arc::new(AtomicU64::new(0));
    let counts = Arc::clone(&served);
    let address = spawn_server(move |stream| {
        let k = (turn.fetch_add(1, Ordering::SeqCst) % 2) as usize;
        let name = ["r1", "r2"][k];
        let inner = AtomicU64::new(0);
        serve(stream, name, 2, &inner);
        counts[k].fetch_add(inner.load(Ordering::SeqCst), Ordering::SeqCst);
    });
    (format!("http://{address}/v1"), served)
}

#[test]
fn a_gateway_s_replicas_are_told_apart_by_the_header_it_names() {
    let (url, served) = gateway();
    let out = tempfile::tempdir().unwrap();
    let output = ok(goodput()
        .args(["run", "--quiet", "--model", "m", "--json", "--target", &url])
        .args(["--replica-header", "X-Served-By", "--requests", "30"])
        .args(["--concurrency", "3", "--warmup", "0", "--input-tokens", "4"])
        .args(["--output-tokens", "3", "--no-metrics", "--out"])
        .arg(out.path())
        .output()
        .unwrap());
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let step = &report["steps"][0];
    let expected: BTreeMap<String, u64> = [
        ("r1".to_string(), served[0].load(Ordering::SeqCst)),
        ("r2".to_string(), served[1].load(Ordering::SeqCst)),
    ]
    .into();
    assert_eq!(expected.values().sum::<u64>(), 30);
    assert_eq!(completed(step, "replicas"), expected);
    // One target: no per-target rows, and the journal names each request's replica.
    assert!(step.get("targets").is_none());
    let journal = support::fleet::journal(out.path());
    let named = journal.iter().filter(|r| r["replica"] == "r1").count() as u64;
    assert_eq!(named, expected["r1"]);
    let csv = support::fleet::csv_rows(out.path());
    assert!(
        csv.iter()
            .all(|row| row["replica"] == "r1" || row["replica"] == "r2")
    );
}

#[test]
fn a_targets_file_and_a_sweep_give_each_step_its_own_rows_and_counts() {
    let replicas = three();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fleet.txt");
    let lines: Vec<String> = replicas
        .iter()
        .map(|r| format!("{}={}   # {} replica", r.name, r.url, r.name))
        .collect();
    std::fs::write(&file, format!("# the fleet\n{}\n", lines.join("\n"))).unwrap();
    let out = dir.path().join("out");
    let output = ok(goodput()
        .args(["sweep", "--quiet", "--model", "m", "--json", "--targets"])
        .arg(&file)
        .args([
            "--concurrency-steps",
            "3,6",
            "--requests",
            "30",
            "--warmup",
            "0",
        ])
        .args(["--input-tokens", "4", "--output-tokens", "3", "--out"])
        .arg(&out)
        .output()
        .unwrap());
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let steps = report["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    for step in steps {
        // Round-robin over 30 requests: 10 each, and each target's /metrics says so.
        let each: BTreeMap<String, u64> = ["fast", "medium", "slow"]
            .into_iter()
            .map(|n| (n.to_string(), 10))
            .collect();
        assert_eq!(completed(step, "targets"), each);
        assert_eq!(own_counts(step, "requests_finished"), each);
    }
    let lines = std::fs::read_to_string(out.join("fleet_metrics.jsonl")).unwrap();
    assert_eq!(lines.lines().count(), 6, "three targets × two steps");
}

#[test]
fn a_gate_reads_a_target_s_row_by_name() {
    let replicas = three();
    let report = fleet_run(&replicas, 30, &[]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.json");
    std::fs::write(&path, report.to_string()).unwrap();
    let gate = |condition: &str| {
        goodput()
            .args(["gate"])
            .arg(&path)
            .args(["--condition", condition])
            .output()
            .unwrap()
    };
    let passed = gate("steps[0].targets[slow].requests.completed >= 10");
    assert!(
        passed.status.success(),
        "{}",
        String::from_utf8_lossy(&passed.stdout)
    );
    let failed = gate("steps[0].targets[slow].latency_ms.e2e.p50 < 50");
    assert_eq!(
        failed.status.code(),
        Some(1),
        "the slow replica answers in 80 ms"
    );
}

#[test]
fn compare_sets_each_target_s_row_beside_the_other_run_s() {
    let replicas = three();
    let dir = tempfile::tempdir().unwrap();
    let paths: Vec<_> = [&[][..], &["--route", "weighted:4,1,1"][..]]
        .iter()
        .enumerate()
        .map(|(i, extra)| {
            let report = fleet_run(&replicas, 60, extra);
            let path = dir.path().join(format!("{i}.json"));
            std::fs::write(&path, report.to_string()).unwrap();
            path
        })
        .collect();
    for format in ["text", "markdown"] {
        let output = ok(goodput()
            .arg("compare")
            .args(&paths)
            .args(["--format", format])
            .output()
            .unwrap());
        let text = String::from_utf8_lossy(&output.stdout);
        let section = text
            .split("By target")
            .nth(1)
            .unwrap_or_else(|| panic!("{text}"));
        let fast = section.lines().find(|l| l.contains("fast")).unwrap();
        // Round-robin gave the fast replica 20 of 60, weighted 4:1:1 gave it 40.
        assert!(fast.contains("20 → 40"), "{format}: {fast}");
        let slow = section.lines().find(|l| l.contains("slow")).unwrap();
        assert!(slow.contains("20 → 10"), "{format}: {slow}");
    }
}

#[test]
fn history_follows_one_target_s_figure_across_runs() {
    let replicas = three();
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("history.db");
    for route in ["weighted:1,1,1", "weighted:3,1,1"] {
        fleet_run(
            &replicas,
            50,
            &["--route", route, "--store", store.to_str().unwrap()],
        );
        served(&replicas);
    }
    let output = ok(goodput()
        .args(["history", "--store", store.to_str().unwrap()])
        .args(["--metric", "targets[fast].requests.completed"])
        .output()
        .unwrap());
    let text = String::from_utf8_lossy(&output.stdout);
    // 50 requests weighted 1:1:1 give the fast target 17 (first in turn), 3:1:1 give it 30.
    let values: Vec<&str> = text
        .lines()
        .filter_map(|l| {
            l.split_whitespace()
                .find(|w| *w == "17.00" || *w == "30.00")
        })
        .collect();
    assert_eq!(values, ["17.00", "30.00"], "{text}");
}

/// A decode instance of a disaggregated deployment: answers after 5 ms, and its `/metrics`
/// says two requests always await their KV and every answer took one 4 ms NIXL transfer.
fn decode_instance() -> String {
    let served = Arc::new(AtomicU64::new(0));
    let address = spawn_server(move |stream| {
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let Some((path, _, _)) = read_request(&mut reader) else {
            return;
        };
        let mut writer = stream;
        if !path.ends_with("/metrics") {
            served.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(5));
            let body = "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\
                \"delta\":{\"content\":\"t \"},\"finish_reason\":\"length\"}],\"usage\":\
                {\"prompt_tokens\":4,\"completion_tokens\":1,\"total_tokens\":5}}\n\ndata: [DONE]\n\n";
            let _ = write!(
                writer,
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{body}"
            );
            return;
        }
        let n = served.load(Ordering::SeqCst);
        let body = format!(
            "sglang:num_decode_transfer_queue_reqs 2\n\
             sglang:num_decode_prealloc_queue_reqs 0\n\
             vllm:nixl_xfer_time_seconds_bucket{{le=\"0.005\"}} {n}\n\
             vllm:nixl_xfer_time_seconds_bucket{{le=\"+Inf\"}} {n}\n\
             vllm:nixl_xfer_time_seconds_count {n}\n\
             vllm:nixl_xfer_time_seconds_sum {}\n\
             vllm:nixl_num_failed_transfers_total 0\n",
            0.004 * n as f64
        );
        let _ = write!(
            writer,
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n{body}",
            body.len()
        );
    });
    format!("http://{address}/v1")
}

#[test]
fn a_disaggregated_server_s_queues_and_kv_transfers_stand_in_the_server_section() {
    let url = decode_instance();
    let output = ok(goodput()
        .args(["run", "--quiet", "--model", "m", "--json", "--target", &url])
        .args(["--rate", "40", "--duration", "3s", "--warmup", "0"])
        .args(["--input-tokens", "4", "--output-tokens", "1"])
        .args(["--metrics-interval", "250ms"])
        .output()
        .unwrap());
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    support::validate_against_schema(&report);
    let d = &report["steps"][0]["server"]["measurement"]["disaggregation"];
    assert_eq!(d["decode_transfer_queue"]["mean"], 2.0, "{d}");
    assert_eq!(d["decode_prealloc_queue"]["max"], 0.0);
    assert_eq!(
        d["prefill_inflight_queue"]["samples"], 0,
        "a decode instance"
    );
    let mean = d["kv_transfer_ms"]["mean"].as_f64().unwrap();
    assert!(
        (mean - 4.0).abs() < 1e-6,
        "every transfer took 4 ms: {mean}"
    );
    assert!(d["kv_transfer_ms"]["count"].as_f64().unwrap() > 10.0);
    assert_eq!(d["kv_transfer_failures"], 0.0);
    let text = ok(goodput()
        .args([
            "run",
            "--model",
            "m",
            "--target",
            &url,
            "--details",
            "--no-live",
        ])
        .args(["--rate", "40", "--duration", "1s", "--warmup", "0"])
        .args(["--input-tokens", "4", "--output-tokens", "1"])
        .args(["--metrics-interval", "250ms"])
        .output()
        .unwrap())
    .stdout;
    let text = String::from_utf8_lossy(&text);
    assert!(text.contains("disaggregated prefill/decode"), "{text}");
    assert!(text.contains("decode: awaiting KV"), "{text}");
    assert!(
        text.contains("mean 4 ms") || text.contains("mean 4.0"),
        "{text}"
    );
}
