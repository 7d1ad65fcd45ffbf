//! The exports to other tools, each against a receiver written in the test that parses what
//! arrives: `--push-gateway` (the Prometheus text exposition PUT to the run's group), `--otlp`
//! (OTLP/HTTP JSON metrics POSTed to `/v1/metrics`), and a
//! receiver that is down (the report is kept, the run exits 1).
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;
use support::receiver::Receiver;
use support::{goodput, read_json};

/// A short virtual-time run with an SLO and a tag, written to `out`, with `extra` flags.
fn run(out: &Path, extra: &[&str]) -> std::process::Output {
    goodput()
        .args(["run", "--quiet", "--virtual-time", "--requests", "40"])
        .args([
            "--concurrency",
            "4",
            "--slo",
            "ttft=60ms",
            "--tag",
            "team.name=infra",
        ])
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .unwrap()
}

/// One parsed sample of the text exposition: name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

/// Parses the samples of a text exposition (families checked for HELP and TYPE gauge).
fn parse_exposition(text: &str) -> Vec<Sample> {
    let mut typed = Vec::new();
    let mut samples = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert_eq!(kind, "gauge");
            typed.push(name.to_string());
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let (name, rest) = line.split_once('{').unwrap();
        let (labels, value) = rest.rsplit_once("} ").unwrap();
        assert_eq!(typed.last().map(String::as_str), Some(name), "{line}");
        let labels = labels
            .split("\",")
            .map(|pair| {
                let (key, value) = pair.split_once("=\"").unwrap();
                (key.to_string(), value.trim_end_matches('"').to_string())
            })
            .collect();
        samples.push((name.to_string(), labels, value.parse().unwrap()));
    }
    samples
}

fn find<'a>(samples: &'a [Sample], name: &str, labels: &[(&str, &str)]) -> Option<&'a Sample> {
    samples.iter().find(|(n, l, _)| {
        n == name
            && labels
                .iter()
                .all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v))
    })
}

#[test]
fn push_gateway_receives_the_reports_headline_figures() {
    let receiver = Receiver::start(|_| (200, String::new()));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = run(
        &out,
        &["--push-gateway", &format!("{}/base/", receiver.url)],
    );
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = read_json(&out.join("report.json"));
    let requests = receiver.requests();
    assert_eq!(requests.len(), 1);
    let push = &requests[0];
    assert_eq!(push.method, "PUT");
    assert!(push.content_type.starts_with("text/plain; version=0.0.4"));
    let run_id = report["run"]["started_at"].as_str().unwrap();
    let encoded = push
        .path
        .strip_prefix("/base/metrics/job/goodput/run_id@base64/")
        .unwrap();
    assert_eq!(decode_base64url(encoded), run_id.as_bytes());
    check_samples(&parse_exposition(&push.text()), &report);
}

/// Every headline figure of step 0 is a sample with `report`'s value and the run's labels.
fn check_samples(samples: &[Sample], report: &Value) {
    let step = &report["steps"][0];
    let figure = |name: &str, labels: &[(&str, &str)]| {
        let (_, found, value) =
            find(samples, name, labels).unwrap_or_else(|| panic!("{name} {labels:?} missing"));
        assert_eq!(found["model"], report["run"]["model"].as_str().unwrap());
        assert_eq!(found["target"], report["run"]["target"].as_str().unwrap());
        assert_eq!(found["tag_team_name"], "infra");
        assert_eq!(found["step"], "0");
        *value
    };
    let num = |v: &Value| v.as_f64().unwrap();
    let throughput = &step["throughput"];
    assert_eq!(
        figure("goodput_requests_per_second", &[]),
        num(&throughput["requests_per_sec"])
    );
    assert_eq!(
        figure("goodput_output_tokens_per_second", &[]),
        num(&throughput["output_tokens_per_sec"])
    );
    assert_eq!(
        figure("goodput_input_tokens_per_second", &[]),
        num(&throughput["input_tokens_per_sec"])
    );
    let goodput = &step["goodput"];
    assert_eq!(
        figure("goodput_goodput_requests_per_second", &[]),
        num(&goodput["requests_per_sec"])
    );
    assert_eq!(
        figure("goodput_slo_attained_ratio", &[]),
        num(&goodput["attained_fraction"])
    );
    for latency in ["ttft", "tpot", "itl", "e2e"] {
        for (quantile, stat) in [("0.5", "p50"), ("0.95", "p95"), ("0.99", "p99")] {
            let ms = num(&step["latency_ms"][latency][stat]);
            let name = format!("goodput_{latency}_seconds");
            assert_eq!(
                figure(&name, &[("quantile", quantile)]),
                ms / 1000.0,
                "{name}"
            );
        }
    }
    for outcome in ["scheduled", "completed", "failed"] {
        let count = num(&step["requests"][outcome]);
        assert_eq!(figure("goodput_requests", &[("outcome", outcome)]), count);
    }
    assert!(num(&step["requests"]["completed"]) > 0.0);
}

#[test]
fn an_unreachable_receiver_keeps_the_report_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let out = dir.path().join("run");
    let output = run(&out, &["--push-gateway", &url]);
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--push-gateway") && stderr.contains("the report is kept"),
        "{stderr}"
    );
    assert!(
        read_json(&out.join("report.json"))["steps"][0]["requests"]["completed"].as_u64() > Some(0)
    );
}

#[test]
fn a_receiver_that_refuses_the_push_is_an_error() {
    let receiver = Receiver::start(|_| (400, r#"{"error":"bad"}"#.to_string()));
    let dir = tempfile::tempdir().unwrap();
    let output = run(&dir.path().join("run"), &["--push-gateway", &receiver.url]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("HTTP 400"));
}

#[test]
fn a_receiver_url_that_is_not_http_is_refused_before_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = run(&out, &["--push-gateway", "localhost:9091"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--push-gateway localhost:9091"));
    assert!(!out.join("report.json").exists());
}

fn decode_base64url(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'-' => 62,
        _ => 63,
    };
    let digits: Vec<u8> = text.bytes().filter(|&c| c != b'=').map(value).collect();
    let mut out = Vec::new();
    for chunk in digits.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &d)| n | (u32::from(d) << (18 - 6 * i)));
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}

/// The value of metric `name`'s data point of step 0 whose attributes include `labels`.
fn otlp_point(request: &Value, name: &str, labels: &[(&str, &str)]) -> f64 {
    let metrics = request["resourceMetrics"][0]["scopeMetrics"][0]["metrics"]
        .as_array()
        .unwrap();
    let metric = metrics.iter().find(|m| m["name"] == name).unwrap();
    let has = |point: &Value, key: &str, value: &str| {
        point["attributes"].as_array().unwrap().iter().any(|a| {
            a["key"] == key
                && (a["value"]["stringValue"] == value || a["value"]["intValue"] == value)
        })
    };
    let points: Vec<&Value> = metric["gauge"]["dataPoints"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| has(p, "step", "0") && labels.iter().all(|(k, v)| has(p, k, v)))
        .collect();
    assert_eq!(points.len(), 1, "{name} {labels:?}");
    assert!(
        points[0]["timeUnixNano"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > 0
    );
    points[0]["asDouble"].as_f64().unwrap()
}

#[test]
fn an_otlp_collector_receives_the_reports_headline_figures() {
    let receiver = Receiver::start(|_| (200, "{}".to_string()));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let output = run(&out, &["--otlp", &receiver.url]);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report = read_json(&out.join("report.json"));
    let requests = receiver.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        (requests[0].method.as_str(), requests[0].path.as_str()),
        ("POST", "/v1/metrics")
    );
    assert_eq!(requests[0].content_type, "application/json");
    let body = requests[0].json();
    let resource = body["resourceMetrics"][0]["resource"]["attributes"]
        .as_array()
        .unwrap();
    let attribute = |key: &str| {
        resource.iter().find(|a| a["key"] == key).unwrap()["value"]["stringValue"].clone()
    };
    assert_eq!(attribute("service.name"), "goodput");
    assert_eq!(attribute("goodput.run_id"), report["run"]["started_at"]);
    assert_eq!(attribute("goodput.model"), report["run"]["model"]);
    assert_eq!(attribute("goodput.tag.team.name"), "infra");
    let step = &report["steps"][0];
    let num = |v: &Value| v.as_f64().unwrap();
    let rate = otlp_point(&body, "goodput.requests_per_second", &[]);
    assert_eq!(rate, num(&step["throughput"]["requests_per_sec"]));
    let goodput = otlp_point(&body, "goodput.goodput_requests_per_second", &[]);
    assert_eq!(goodput, num(&step["goodput"]["requests_per_sec"]));
    for latency in ["ttft", "tpot", "itl", "e2e"] {
        for (quantile, stat) in [("0.5", "p50"), ("0.95", "p95"), ("0.99", "p99")] {
            let value = otlp_point(
                &body,
                &format!("goodput.{latency}"),
                &[("quantile", quantile)],
            );
            assert_eq!(
                value,
                num(&step["latency_ms"][latency][stat]),
                "{latency} {stat}"
            );
        }
    }
    let failed = otlp_point(&body, "goodput.requests", &[("outcome", "failed")]);
    assert_eq!(failed, num(&step["requests"]["failed"]));
}

#[test]
fn goodput_report_pushes_a_finished_run_again_to_the_same_group() {
    let receiver = Receiver::start(|_| (200, String::new()));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let first = run(&out, &["--push-gateway", &receiver.url]);
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let again = goodput()
        .args(["report", "--push-gateway", &receiver.url])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let pushes = receiver.requests();
    assert_eq!(pushes.len(), 2);
    assert_eq!(pushes[0].path, pushes[1].path);
    check_samples(
        &parse_exposition(&pushes[1].text()),
        &read_json(&out.join("report.json")),
    );
}
