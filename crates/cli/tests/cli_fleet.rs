//! Correlation ids and model and adapter mixes against a minimal server written here, which
//! logs what each request carried: the correlation id a request was sent with is the id its
//! record holds (the server answers with its own id in the header and the body, derived from the
//! one it received, so each record's three ids must agree), the header's name is configurable
//! or the header left out; per-model and per-adapter counts equal what the server saw; wrong
//! uses exit 2.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::{BTreeMap, BTreeSet};

use support::fleet::{
    Seen, assert_summary_rows, csv_rows, journal, logging_server, mix_run, per_model, rebuilt_step,
    rows, run,
};
use support::{goodput, read_json, validate_against_schema};

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
    let cases: [&[&str]; 3] = [
        &["--request-id-header", "bad header"],
        &["--request-id-header", ""],
        &["--request-id-header", "Authorization"],
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

#[test]
fn virtual_time_sends_and_records_correlation_ids_as_a_live_run_does() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ids");
    support::ok(
        goodput()
            .args([
                "run",
                "--quiet",
                "--virtual-time",
                "--requests",
                "5",
                "--concurrency",
                "2",
            ])
            .args(["--request-id-header", "x-id", "--warmup", "0", "--out"])
            .arg(&out)
            .output()
            .unwrap(),
    );
    let records = journal(&out);
    assert_eq!(records.len(), 5);
    let mut ids: Vec<String> = records
        .iter()
        .map(|r| r["request_id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    let run = ids[0].split('-').next().unwrap().to_string();
    let expected: Vec<String> = (0..5).map(|i| format!("{run}-0-{i}")).collect();
    assert_eq!(ids, expected);
}

#[test]
fn per_model_counts_are_what_the_server_saw() {
    let (url, log) = logging_server("x-request-id");
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("models");
    let first = mix_run(&url, "7", "60", &out);
    let seen = per_model(&log);
    assert_eq!(seen.keys().collect::<Vec<_>>(), ["a", "b"], "{seen:?}");
    assert!(seen["a"] > seen["b"], "70% against 30%: {seen:?}");
    assert_summary_rows(&first.stdout, "By model", &seen);
    let report = read_json(&out.join("report.json"));
    validate_against_schema(&report);
    let step = &report["steps"][0];
    let expected: BTreeMap<String, (u64, u64)> =
        seen.iter().map(|(m, n)| (m.clone(), (*n, *n))).collect();
    assert_eq!(rows(step, "models"), expected);
    for row in step["models"].as_array().unwrap() {
        let requests = &row["requests"];
        assert_eq!(
            row["goodput"]["compliant"], requests["completed"],
            "e2e=10s: {row}"
        );
        assert_eq!(row["latency_ms"]["e2e"]["count"], requests["completed"]);
    }
    assert_eq!(report["run"]["model"], "a=70%,b=30%");
    assert!(step.get("adapters").is_none() && step.get("classes").is_none());
    // Every record names the model it asked for, and the journal rebuilds the rows.
    for record in journal(&out) {
        assert!(["a", "b"].contains(&record["model"].as_str().unwrap()));
    }
    assert_eq!(rebuilt_step(&out)["models"], step["models"]);
    // The same seed again: the same split.
    log.lock().unwrap().clear();
    mix_run(&url, "7", "60", &dir.path().join("again"));
    assert_eq!(per_model(&log), seen);
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
    let expected: BTreeMap<String, (u64, u64)> = seen
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
