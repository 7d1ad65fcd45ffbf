//! `goodput run --virtual-time`: every workload a live run accepts, driven through the
//! embedded simulator in virtual time. Checked against arithmetic (a fixed-timing engine's exact
//! TTFT and ITL, a trace's own timestamps) and against the same run made live.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::{fixed_sim, goodput, ok, validate_against_schema};

fn samples(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../samples")
        .join(name)
}

fn journal(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("requests.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn report(dir: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap()
}

fn run(dir: &Path, extra: &[&str]) -> Value {
    ok(goodput()
        .args(["run", "--quiet", "--out"])
        .arg(dir)
        .args(extra)
        .output()
        .unwrap());
    report(dir)
}

#[test]
fn a_trace_is_replayed_at_its_own_timestamps_and_lengths() {
    let dir = tempfile::tempdir().unwrap();
    let sim = fixed_sim(dir.path(), "fixed", 100, 10);
    let trace = samples("trace_goodput.csv");
    let out = dir.path().join("run");
    let report = run(
        &out,
        &[
            "--virtual-time",
            "--trace",
            trace.to_str().unwrap(),
            "--warmup",
            "0",
            "--sim-config",
            sim.to_str().unwrap(),
        ],
    );
    validate_against_schema(&report);
    let rows: Vec<(f64, u64)> = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .skip(1)
        .map(|line| {
            let fields: Vec<&str> = line.split(',').collect();
            (fields[0].parse().unwrap(), fields[2].parse().unwrap())
        })
        .collect();
    let first = rows[0].0;
    let mut records = journal(&out);
    records.sort_by_key(|r| r["index"].as_u64().unwrap());
    assert_eq!(records.len(), rows.len());
    for (record, (at_ms, output)) in records.iter().zip(&rows) {
        let scheduled = record["scheduled_us"].as_u64().unwrap();
        let expected = ((at_ms - first) * 1000.0).round() as u64;
        assert!(scheduled.abs_diff(expected) <= 1, "{record} vs {at_ms}");
        assert_eq!(record["output_tokens"].as_u64().unwrap(), *output);
        // 64 slots: no queueing, TTFT 100 ms and 10 ms per further token.
        let e2e = record["end_us"].as_u64().unwrap() - scheduled;
        assert_eq!(e2e, 100_000 + 10_000 * (output - 1), "{record}");
    }
    assert_eq!(report["steps"][0]["load"]["mode"], "replay");
    assert!(
        report["run"]["target"]
            .as_str()
            .unwrap()
            .contains("in virtual time")
    );
}

/// Three-turn sessions, 50 ms think time, varied user messages, 8-token answers.
fn session_args(sim: &Path, out: &Path) -> Vec<String> {
    [
        "--sim-config",
        sim.to_str().unwrap(),
        "--turns",
        "3",
        "--think-time",
        "50ms",
        "--input-tokens",
        "uniform:10..40",
        "--output-tokens",
        "8",
        "--concurrency",
        "3",
        "--requests",
        "18",
        "--warmup",
        "0",
        "--seed",
        "9",
        "--out",
        out.to_str().unwrap(),
    ]
    .iter()
    .map(|a| a.to_string())
    .collect()
}

#[test]
fn virtual_time_agrees_with_the_live_embedded_simulator_on_sessions() {
    let dir = tempfile::tempdir().unwrap();
    let sim = fixed_sim(dir.path(), "fixed", 40, 4);
    let args = |out: &Path| session_args(&sim, out);
    let live = dir.path().join("live");
    let virtual_run = dir.path().join("virtual");
    ok(goodput()
        .args(["run", "--quiet"])
        .args(args(&live))
        .output()
        .unwrap());
    ok(goodput()
        .args(["run", "--quiet", "--virtual-time"])
        .args(args(&virtual_run))
        .output()
        .unwrap());
    let (live_report, virtual_report) = (report(&live), report(&virtual_run));
    let step = |r: &Value| r["steps"][0].clone();
    let (l, v) = (step(&live_report), step(&virtual_report));
    assert_eq!(l["requests"]["completed"], 18);
    assert_eq!(v["requests"]["completed"], 18);
    // The same requests reach the same front end: identical prompt token counts.
    let inputs = |dir: &Path| {
        let mut counts: Vec<(u64, u64)> = journal(dir)
            .iter()
            .map(|r| {
                (
                    r["index"].as_u64().unwrap(),
                    r["input_tokens"].as_u64().unwrap(),
                )
            })
            .collect();
        counts.sort_unstable();
        counts
    };
    let (live_inputs, virtual_inputs) = (inputs(&live), inputs(&virtual_run));
    let total = |counts: &[(u64, u64)]| counts.iter().map(|c| c.1).sum::<u64>();
    assert_eq!(total(&live_inputs), total(&virtual_inputs));
    // Virtual time is exact (40 ms + 7 × 4 ms); the live client adds only its own overhead.
    let e2e = |s: &Value| s["latency_ms"]["e2e"]["p50"].as_f64().unwrap();
    assert!((e2e(&v) - 68.0).abs() < 1e-6, "{v}");
    assert!(
        e2e(&l) >= 68.0 && e2e(&l) < 68.0 + 25.0,
        "live {} vs 68",
        e2e(&l)
    );
}

#[test]
fn replicas_behind_a_balancer_serve_a_dataset_in_parallel() {
    let dir = tempfile::tempdir().unwrap();
    let sim = dir.path().join("one-slot.json");
    std::fs::write(
        &sim,
        r#"{"engine": {"kind": "fixed", "ttft": 100, "itl": 10, "slots": 1},
            "prompt_tokenizer": "words"}"#,
    )
    .unwrap();
    let dataset = samples("prompts.jsonl");
    let throughput = |replicas: &str, routing: &str| {
        let out = dir.path().join(format!("r{replicas}-{routing}"));
        let report = run(
            &out,
            &[
                "--virtual-time",
                "--dataset",
                dataset.to_str().unwrap(),
                "--concurrency",
                "4",
                "--requests",
                "200",
                "--sim-replicas",
                replicas,
                "--sim-routing",
                routing,
                "--sim-config",
                sim.to_str().unwrap(),
            ],
        );
        assert!(
            report["run"]["target"]
                .as_str()
                .unwrap()
                .contains(&format!("{replicas} replicas, {routing} routing"))
        );
        report["steps"][0]["throughput"]["requests_per_sec"]
            .as_f64()
            .unwrap()
    };
    // Four workers on four one-slot replicas: a least-loaded balancer keeps every replica busy.
    let one = throughput("2", "least-loaded") / 2.0;
    let four = throughput("4", "least-loaded");
    assert!(
        (four / one - 4.0).abs() < 0.2,
        "1 replica {one}, 4 replicas {four}"
    );
    // Round robin ignores how busy a replica is: with answers of different lengths, a request
    // waits behind a long one while another replica idles.
    let round_robin = throughput("4", "round-robin");
    assert!(
        round_robin < four * 0.95,
        "round robin {round_robin} vs {four}"
    );
}

#[test]
fn flags_that_need_a_server_are_refused_in_virtual_time() {
    for (flag, value) in [
        ("--metrics-url", Some("http://127.0.0.1:1/metrics")),
        ("--header", Some("x-a: b")),
        ("--time-scale", Some("2")),
        ("--tokenizer", Some("server")),
        ("--api", Some("responses")),
    ] {
        let output = goodput()
            .args(["run", "--quiet", "--virtual-time", "--requests", "4", flag])
            .args(value)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{flag}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("virtual time"), "{flag}: {stderr}");
    }
}

#[test]
fn a_virtual_sweep_finds_the_slots_as_its_knee_with_exact_throughput() {
    let dir = tempfile::tempdir().unwrap();
    let sim = dir.path().join("four-slots.json");
    std::fs::write(
        &sim,
        r#"{"engine": {"kind": "fixed", "ttft": 200, "itl": 20, "slots": 4},
            "prompt_tokenizer": "words"}"#,
    )
    .unwrap();
    let out = dir.path().join("sweep");
    ok(goodput()
        .args(["sweep", "--quiet", "--virtual-time", "--out"])
        .arg(&out)
        .args(["--concurrency-steps", "1,2,4,8", "--requests", "200"])
        .args(["--output-tokens", "6", "--warmup", "0", "--sim-config"])
        .arg(&sim)
        .output()
        .unwrap());
    let swept = report(&out);
    validate_against_schema(&swept);
    // 300 ms per request on 4 slots: min(c, 4) / 0.3 s.
    for (step, concurrency) in swept["steps"]
        .as_array()
        .unwrap()
        .iter()
        .zip([1.0, 2.0, 4.0, 8.0])
    {
        let measured = step["throughput"]["requests_per_sec"].as_f64().unwrap();
        let exact = f64::min(concurrency, 4.0) / 0.3;
        assert!(
            (measured / exact - 1.0).abs() < 0.01,
            "c={concurrency}: {measured} vs {exact}"
        );
    }
    assert_eq!(swept["sweep"]["knee"]["load"], 4.0, "{}", swept["sweep"]);
    // Every record carries its step (omitted when 0), and run.json lists the steps' loads (for a rebuild).
    let steps: std::collections::BTreeSet<u64> = journal(&out)
        .iter()
        .map(|r| r["step"].as_u64().unwrap_or(0))
        .collect();
    assert_eq!(steps.into_iter().collect::<Vec<_>>(), [0, 1, 2, 3]);
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(out.join("run.json")).unwrap()).unwrap();
    assert_eq!(manifest["steps"].as_array().unwrap().len(), 4);
    let rebuilt = dir.path().join("rebuilt");
    ok(goodput()
        .args(["report"])
        .arg(&out)
        .args(["--out"])
        .arg(&rebuilt)
        .output()
        .unwrap());
    let again = report(&rebuilt);
    assert_eq!(again["sweep"]["knee"], swept["sweep"]["knee"]);
}

#[test]
fn embeddings_in_virtual_time_count_inputs_like_a_live_run() {
    let dir = tempfile::tempdir().unwrap();
    let sim = fixed_sim(dir.path(), "fixed", 80, 10);
    let run_with = |name: &str, virtual_time: bool| {
        let out = dir.path().join(name);
        let mut args = vec![
            "--api",
            "embeddings",
            "--batch-size",
            "4",
            "--concurrency",
            "2",
            "--requests",
            "40",
            "--warmup",
            "0",
            "--sim-config",
            sim.to_str().unwrap(),
        ];
        if virtual_time {
            args.push("--virtual-time");
        }
        run(&out, &args)
    };
    let (live, virtual_run) = (run_with("live", false), run_with("virtual", true));
    for report in [&live, &virtual_run] {
        validate_against_schema(report);
        assert_eq!(report["run"]["item_unit"], "inputs");
        assert_eq!(report["steps"][0]["requests"]["completed"], 40);
    }
    // Each input is a prefill and one token: 80 ms, the four of a request in parallel; two
    // workers: 2 × 4 inputs per 80 ms = 100 inputs/s, exactly in virtual time.
    let items = |r: &Value| {
        r["steps"][0]["throughput"]["items_per_sec"]
            .as_f64()
            .unwrap()
    };
    assert!(
        (items(&virtual_run) - 100.0).abs() < 1.0,
        "{}",
        items(&virtual_run)
    );
    assert!(
        items(&live) <= 100.5 && items(&live) > 60.0,
        "live {}",
        items(&live)
    );
    let e2e = |r: &Value| r["steps"][0]["latency_ms"]["e2e"]["p50"].as_f64().unwrap();
    assert!((e2e(&virtual_run) - 80.0).abs() < 1e-6);
}

#[test]
fn injected_faults_strike_in_virtual_time_as_they_do_live() {
    // One runner and one wire: the simulator's faults (HTTP 500, a connection reset and a stall
    // mid-stream, drawn from the seed) fail the same requests the same ways in both clocks.
    let dir = tempfile::tempdir().unwrap();
    let sim = dir.path().join("faulty.json");
    std::fs::write(
        &sim,
        r#"{"engine": {"kind": "fixed", "ttft": 20, "itl": 5, "slots": 8},
            "prompt_tokenizer": "words",
            "faults": {"http_500": 0.1, "reset_mid_stream": 0.1, "stall_mid_stream": 0.1,
                       "stall_ms": 2000}}"#,
    )
    .unwrap();
    let run = |virtual_time: bool| {
        let mut command = goodput();
        command
            .args(["run", "--quiet", "--json", "--sim-config"])
            .arg(&sim);
        command.args([
            "--requests",
            "120",
            "--concurrency",
            "4",
            "--warmup",
            "0",
            "--seed",
            "9",
        ]);
        command.args([
            "--request-timeout",
            "300ms",
            "--output-tokens",
            "8",
            "--input-tokens",
            "8",
        ]);
        if virtual_time {
            command.arg("--virtual-time");
        }
        let report: Value = serde_json::from_slice(&ok(command.output().unwrap()).stdout).unwrap();
        report["steps"][0]["requests"].clone()
    };
    let (live, virtual_time) = (run(false), run(true));
    assert_eq!(live["failed_by_kind"], virtual_time["failed_by_kind"]);
    assert_eq!(live["failed_by_status"], virtual_time["failed_by_status"]);
    assert_eq!(live["completed"], virtual_time["completed"]);
    let kinds = virtual_time["failed_by_kind"].as_object().unwrap();
    for kind in ["http", "timeout", "transport"] {
        assert!(kinds[kind].as_u64().unwrap() > 0, "{kind}: {kinds:?}");
    }
}

/// 2P+2D fixed-timing pools from `--sim-layout`, in virtual time: one worker's request at a
/// time runs its 100 ms prefill, crosses the link (latency 5 ms; the fixed engine sends no
/// bytes), then its 9 further tokens 10 ms apart: TTFT 100 ms, E2E 100 + 5 + 90 = 195 ms
/// exactly; TPOT (195 − 100) / 9.
#[test]
fn a_disaggregated_layout_runs_in_virtual_time_with_exact_timing() {
    let dir = tempfile::tempdir().unwrap();
    let sim = dir.path().join("pools.json");
    std::fs::write(
        &sim,
        r#"{"engine": {"kind": "fixed", "ttft": 100, "itl": 10, "slots": 1},
            "disaggregation": {"kv_link_latency_ms": 5.0},
            "prompt_tokenizer": "words"}"#,
    )
    .unwrap();
    let out = dir.path().join("pools");
    let report = run(
        &out,
        &[
            "--virtual-time",
            "--concurrency",
            "1",
            "--requests",
            "20",
            "--output-tokens",
            "10",
            "--sim-layout",
            "2p+2d",
            "--sim-config",
            sim.to_str().unwrap(),
        ],
    );
    let target = report["run"]["target"].as_str().unwrap();
    assert!(target.contains("2p+2d disaggregated"), "{target}");
    let step = &report["steps"][0];
    let p50 = |figure: &str| step["latency_ms"][figure]["p50"].as_f64().unwrap();
    assert!((p50("ttft") - 100.0).abs() < 1e-6, "{step}");
    assert!((p50("e2e") - 195.0).abs() < 1e-6, "{step}");
    let refused = goodput()
        .args(["run", "--quiet", "--virtual-time", "--sim-layout", "2p+2q"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("NxtpK"));
}
