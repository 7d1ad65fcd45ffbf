//! `goodput run` with production-like workloads against the embedded simulator: length
//! distributions, the committed sample datasets and traces, multi-turn sessions, shared
//! prefixes; reports valid against the schema and rebuilt exactly from the journal; bad
//! workload input refused with exit status 2 and a message naming what to fix.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::{goodput, validate_against_schema};

fn samples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples")
}

fn sample(name: &str) -> String {
    samples().join(name).display().to_string()
}

/// A fixed-timing simulator config (10 ms TTFT, 1 ms ITL, 64 slots).
fn fixed_sim(dir: &Path) -> String {
    let path = dir.join("sim.json");
    let text = r#"{"engine": {"kind": "fixed", "ttft": 10, "itl": 1, "slots": 64, "max_model_len": 1000000},
        "prompt_tokenizer": "words"}"#;
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

/// Runs `goodput run` with `args` into `dir/out`; returns the report after checking that it
/// matches the schema and that `goodput report` rebuilds the same steps from the journal.
fn run(dir: &Path, args: &[&str]) -> Value {
    let out = dir.join("out");
    let sim = fixed_sim(dir);
    let output = goodput()
        .args([
            "run",
            "--quiet",
            "--details",
            "--seed",
            "5",
            "--sim-config",
            &sim,
        ])
        .args(["--out", out.to_str().unwrap()])
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{args:?}\nstdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("By prompt length"), "{stdout}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    validate_against_schema(&report);
    let rebuilt = goodput()
        .args(["report", out.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(rebuilt.status.success());
    let rebuilt: Value = serde_json::from_slice(&rebuilt.stdout).unwrap();
    assert_eq!(
        rebuilt["steps"], report["steps"],
        "rebuilt from the journal"
    );
    report
}

#[test]
fn distributions_and_buckets_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let report = run(
        dir.path(),
        &[
            "--rate",
            "200",
            "--requests",
            "120",
            "--warmup",
            "0",
            "--input-tokens",
            "mix:60%=50,40%=300..400",
            "--output-tokens",
            "uniform:2..6",
            "--length-buckets",
            "short<100,long",
        ],
    );
    let workload = &report["run"]["workload"];
    assert_eq!(workload["input_tokens"], "mix:60%=50,40%=300..400");
    assert_eq!(workload["length_buckets"], "short<100,long");
    let step = &report["steps"][0];
    let buckets = step["buckets"].as_array().unwrap();
    assert_eq!(buckets.len(), 2);
    let short = buckets[0]["requests"]["completed"].as_u64().unwrap();
    let long = buckets[1]["requests"]["completed"].as_u64().unwrap();
    assert_eq!(short + long, 120);
    assert!((50..90).contains(&short), "{short}");
    let stats = &step["workload_stats"];
    assert_eq!(stats["requests"], 120);
    assert_eq!(stats["output_tokens"]["min"], 2);
    assert_eq!(stats["output_tokens"]["max"], 6);
    assert_eq!(stats["input_tokens"]["min"], 50);
}

#[test]
fn the_sample_prompts_dataset_runs_with_its_lengths() {
    let dir = tempfile::tempdir().unwrap();
    let report = run(
        dir.path(),
        &[
            "--concurrency",
            "4",
            "--requests",
            "32",
            "--warmup",
            "0",
            "--dataset",
            &sample("prompts.jsonl"),
            "--output-tokens",
            "10",
        ],
    );
    assert_eq!(report["run"]["workload"]["kind"], "dataset");
    assert_eq!(report["run"]["workload"]["records"], 16);
    let stats = &report["steps"][0]["workload_stats"];
    assert_eq!(
        stats["output_tokens"]["min"], 10,
        "records without a length use --output-tokens"
    );
    assert_eq!(stats["output_tokens"]["max"], 160);
}

#[test]
fn sharegpt_conversations_are_played_as_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let report = run(
        dir.path(),
        &[
            "--concurrency",
            "2",
            "--requests",
            "24",
            "--warmup",
            "0",
            "--dataset",
            &sample("sharegpt.json"),
            "--think-time",
            "20ms",
        ],
    );
    assert_eq!(report["run"]["workload"]["kind"], "sharegpt");
    let step = &report["steps"][0];
    let turns = step["turns"].as_array().unwrap();
    assert!(turns.len() >= 2, "{turns:?}");
    let input = |t: usize| {
        turns[t]["tokens"]["input_per_request"]["mean"]
            .as_f64()
            .unwrap()
    };
    assert!(input(1) > input(0), "later turns carry longer context");
    assert!(step["workload_stats"]["sessions"].as_u64().unwrap() >= 4);
    assert_eq!(step["requests"]["completed"], 24);
}

#[test]
fn synthetic_sessions_with_a_shared_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let report = run(
        dir.path(),
        &[
            "--rate",
            "20",
            "--requests",
            "30",
            "--warmup",
            "0",
            "--turns",
            "3",
            "--input-tokens",
            "40",
            "--output-tokens",
            "5",
            "--shared-prefix",
            "groups=2,tokens=100",
        ],
    );
    let workload = &report["run"]["workload"];
    assert_eq!(workload["kind"], "synthetic_sessions");
    assert_eq!(workload["shared_prefix"]["tokens"], 100);
    let turns = report["steps"][0]["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 3);
    // Turn 0: 100 + 40 prompt tokens plus two messages' template (3 + 1 + 3 + 1 + 3).
    assert_eq!(turns[0]["tokens"]["input_per_request"]["min"], 151);
}

#[test]
fn every_sample_trace_replays() {
    for (name, scale) in [
        ("trace_goodput.csv", "20"),
        ("trace_azure.csv", "20"),
        ("trace_burstgpt.csv", "20"),
        ("trace_mooncake.jsonl", "20"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let report = run(
            dir.path(),
            &[
                "--trace",
                &sample(name),
                "--trace-time-scale",
                scale,
                "--warmup",
                "0",
            ],
        );
        let step = &report["steps"][0];
        assert_eq!(step["load"]["mode"], "replay", "{name}");
        let rows = report["run"]["workload"]["rows"].as_u64().unwrap();
        assert_eq!(
            step["requests"]["completed"].as_u64().unwrap(),
            rows,
            "{name}"
        );
    }
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

#[test]
fn bad_workload_input_exits_2_and_says_what_to_fix() {
    let dir = tempfile::tempdir().unwrap();
    let bad_dataset = write(
        dir.path(),
        "bad.jsonl",
        "{\"prompt\": \"ok\"}\n{\"prompt\": \"x\", \"output_tokens\": -2}\n",
    );
    let bad_trace = write(
        dir.path(),
        "bad.csv",
        "timestamp_ms,input_tokens,output_tokens,tenant\n0,5,5,a\n",
    );
    let empty = write(dir.path(), "empty.jsonl", "");
    let missing = dir.path().join("nope.jsonl").display().to_string();
    let (trace, prompts) = (sample("trace_goodput.csv"), sample("prompts.jsonl"));
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--input-tokens", "lognorm:median=5"],
            "lognormal:median=512,sigma=0.8",
        ),
        (vec!["--output-tokens", "-5"], "negative"),
        (
            vec!["--dataset", &bad_dataset],
            "bad.jsonl:2: field `output_tokens`",
        ),
        (
            vec!["--trace", &bad_trace],
            "bad.csv:1: field `tenant`: unknown column",
        ),
        (vec!["--dataset", &empty], "no records"),
        (vec!["--dataset", &missing], "nope.jsonl"),
        (
            vec!["--trace", &trace, "--rate", "5"],
            "--trace sets every arrival",
        ),
        (
            vec!["--dataset", &prompts, "--input-tokens", "5"],
            "--input-tokens does not apply",
        ),
        (vec!["--think-time", "1s"], "--think-time applies"),
        (vec!["--shared-prefix", "8x2000"], "--shared-prefix"),
        (vec!["--length-buckets", "a<10,b<5,c"], "--length-buckets"),
        (
            vec!["--tokenizer", "server:nope"],
            "unknown /tokenize dialect",
        ),
    ];
    for (args, needle) in cases {
        let output = goodput()
            .args(["run", "--quiet", "--requests", "2"])
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

#[test]
fn skip_invalid_counts_what_it_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = write(
        dir.path(),
        "mixed.jsonl",
        "{\"prompt\": \"one two\"}\n{\"prompt\": 3}\n{oops\n{\"prompt\": \"three four\"}\n",
    );
    let out = dir.path().join("out");
    let output = goodput()
        .args([
            "run",
            "--quiet",
            "--json",
            "--requests",
            "4",
            "--warmup",
            "0",
            "--concurrency",
            "1",
        ])
        .args([
            "--dataset",
            &dataset,
            "--skip-invalid",
            "--sim-config",
            &fixed_sim(dir.path()),
        ])
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("skipped 2 invalid record(s)"), "{stderr}");
    assert!(stderr.contains("mixed.jsonl:2: field `prompt`"), "{stderr}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["run"]["workload"]["skipped_invalid"], 2);
    assert_eq!(report["run"]["workload"]["records"], 2);
}
