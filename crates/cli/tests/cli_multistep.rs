//! `goodput sweep`, `goodput capacity` and `run --phases` end to end against a fixed-timing
//! simulator whose capacity is known exactly: 4 slots × (200 ms TTFT + 5 × 20 ms) = 300 ms
//! per request → 13.33 requests/s. These run in real time (sped up by the simulator's time
//! scale); the CPU-bound virtual-time searches are in `cli_virtual.rs`, so they do not
//! compete with these for the CPU.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;

use serde_json::Value;
use support::{four_slot_sim, goodput, ok, read_json, validate_against_schema};

/// Requests served at once.
const SLOTS: f64 = 4.0;
/// Service time of a 6-token answer: 200 ms + 5 × 20 ms.
const SERVICE_SECS: f64 = 0.3;

fn rebuilt(out: &Path) -> Value {
    let output = ok(goodput()
        .args(["report", out.to_str().unwrap(), "--json"])
        .output()
        .unwrap());
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    validate_against_schema(&report);
    report
}

#[test]
fn a_concurrency_sweep_finds_the_knee_at_the_slot_count_and_rebuilds_from_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sweep");
    let sim = four_slot_sim(dir.path(), 5.0);
    let output = ok(goodput()
        .args([
            "sweep",
            "--quiet",
            "--concurrency-steps",
            "1..8x2",
            "--knee-gain",
            "25%",
        ])
        .args(["--requests", "90", "--warmup", "10", "--output-tokens", "6"])
        .args(["--input-tokens", "16", "--seed", "5", "--sim-config"])
        .args([sim.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .output()
        .unwrap());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("Knee: step 3"), "{stdout}");

    let report = read_json(&out.join("report.json"));
    validate_against_schema(&report);
    let steps = report["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 4);
    let throughput: Vec<f64> = steps
        .iter()
        .map(|s| s["throughput"]["requests_per_sec"].as_f64().unwrap())
        .collect();
    // Below the slot count every request is served at once: c / 0.3 s. Above it, the 4 slots
    // cap throughput at 13.33/s and requests wait for a slot.
    for (step, concurrency) in throughput.iter().zip([1.0, 2.0, 4.0, 8.0]) {
        let expected = f64::min(concurrency, SLOTS) / SERVICE_SECS;
        assert!(
            (step - expected).abs() / expected < 0.1,
            "concurrency {concurrency}: {step} req/s, expected {expected}"
        );
    }
    let knee = &report["sweep"]["knee"];
    assert_eq!(knee["step"], 2, "{knee}");
    assert_eq!(knee["load"], 4.0);
    let e2e_8 = steps[3]["latency_ms"]["e2e"]["p50"].as_f64().unwrap();
    assert!(
        (e2e_8 - 600.0).abs() < 40.0,
        "E2E at concurrency 8: {e2e_8} ms"
    );

    assert_sweep_page(&out.join("report.html"));
    let journal = std::fs::read_to_string(out.join("requests.jsonl")).unwrap();
    assert_eq!(journal.lines().count(), 4 * 90);
    let again = rebuilt(&out);
    assert_eq!(again["steps"], report["steps"]);
    assert_eq!(again["sweep"], report["sweep"]);
}

/// The sweep's page states its knee, draws the load curves and reads at every width.
fn assert_sweep_page(page_path: &std::path::Path) {
    let page = support::rendered_dom(page_path);
    assert!(
        page.contains("Knee at step 3 (concurrency 4)"),
        "the HTML report states the knee"
    );
    let titles: Vec<String> = support::charts(&page).into_iter().map(|(t, _)| t).collect();
    assert!(
        titles.iter().any(|t| t == "Goodput vs load"),
        "several steps draw the curves: {titles:?}"
    );
    support::layout::assert_readable(page_path, "sweep");
}

#[test]
fn a_live_capacity_search_stays_within_the_physical_limit_and_rebuilds_from_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("capacity");
    let sim = four_slot_sim(dir.path(), 10.0);
    let output = ok(goodput()
        .args(["capacity", "--quiet", "--slo", "ttft=500ms", "--start", "4"])
        .args(["--attainment", "0.9", "--confidence", "0.9"])
        .args(["--tolerance", "15%", "--seed", "3"])
        .args(["--probe-warmup", "2s", "--probe-min-duration", "20s"])
        .args(["--output-tokens", "6", "--input-tokens", "16"])
        .args(["--accelerators", "2", "--sim-config", sim.to_str().unwrap()])
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap());
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("highest sustainable load"), "{stdout}");

    let report = read_json(&out.join("report.json"));
    validate_against_schema(&report);
    let capacity = &report["capacity"];
    let lower = capacity["lower_bound"].as_f64().unwrap();
    let physical = SLOTS / SERVICE_SECS;
    assert!(
        lower <= physical * 1.02 && lower >= physical * 0.5,
        "capacity {lower} req/s, physical limit {physical}: {capacity}"
    );
    assert!(capacity["upper_bound"].as_f64().unwrap() > lower);
    assert_eq!(
        capacity["first_probe_step"], 0,
        "--start skips the calibration"
    );
    assert_eq!(capacity["per_accelerator"].as_f64().unwrap(), lower / 2.0);
    for probe in capacity["probes"].as_array().unwrap() {
        if probe["load"].as_f64().unwrap() > physical * 1.1 {
            assert_eq!(probe["outcome"], "fail", "{probe}");
        }
    }
    let steps = report["steps"].as_array().unwrap().len();
    assert_eq!(steps, capacity["probes"].as_array().unwrap().len());

    let again = rebuilt(&out);
    assert_eq!(again["capacity"], report["capacity"]);
    let page = support::rendered_dom(&out.join("report.html"));
    assert!(
        page.contains("Highest sustainable load: "),
        "the HTML report states the verdict"
    );
    let probes = support::charts(&page)
        .into_iter()
        .find(|(t, _)| t == "Probes on the load axis")
        .unwrap();
    assert_eq!(probes.1, steps, "one point per probe");
    support::layout::assert_readable(&out.join("report.html"), "capacity");
}

#[test]
fn a_phase_profile_reports_the_backlog_and_the_drain_time_of_an_overload() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("phases");
    // In virtual time: the queue's arithmetic is exact, whatever the machine's load (a live
    // run at time scale 10 magnifies every client hiccup tenfold).
    let sim = four_slot_sim(dir.path(), 1.0);
    ok(goodput()
        .args([
            "run",
            "--quiet",
            "--virtual-time",
            "--phases",
            "nominal=5:10s,overload=30:5s,recovery=5:25s",
        ])
        .args(["--arrival", "constant", "--warmup", "0", "--slo", "ttft=1s"])
        .args(["--output-tokens", "6", "--seed", "4", "--sim-config"])
        .args([sim.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .output()
        .unwrap());
    let report = read_json(&out.join("report.json"));
    validate_against_schema(&report);
    let recovery = &report["steps"][0]["recovery"];
    assert_eq!(recovery["overload_phase"], "overload");
    // 30/s against 13.33/s for 5 s leaves (30 − 13.33) · 5 = 83 requests queued, drained at
    // 13.33 − 5 = 8.33/s: about 10 s.
    let backlog = recovery["backlog_requests"].as_f64().unwrap();
    assert!((backlog - 83.3).abs() < 12.0, "{recovery}");
    let drain = recovery["drain_secs"].as_f64().unwrap();
    assert!((drain - 10.0).abs() < 3.0, "{recovery}");
    assert_eq!(rebuilt(&out)["steps"], report["steps"]);
}

#[test]
fn a_profile_file_is_the_same_load_as_the_phases_flag() {
    let dir = tempfile::tempdir().unwrap();
    let sim = four_slot_sim(dir.path(), 10.0);
    let profile = dir.path().join("profile.toml");
    std::fs::write(
        &profile,
        "arrival = \"constant\"\n\
         [[phases]]\nname = \"nominal\"\nrate = 5\nduration = \"2s\"\n\
         [[phases]]\nname = \"overload\"\nrate = 20\nduration = \"1s\"\n",
    )
    .unwrap();
    let load_of = |load_flags: &[&str]| {
        let output = ok(goodput()
            .args([
                "run",
                "--quiet",
                "--json",
                "--warmup",
                "0",
                "--output-tokens",
                "2",
            ])
            .args(load_flags)
            .args(["--sim-config", sim.to_str().unwrap()])
            .output()
            .unwrap());
        let report: Value = serde_json::from_slice(&output.stdout).unwrap();
        report["steps"][0]["load"].clone()
    };
    let from_file = load_of(&["--profile", profile.to_str().unwrap()]);
    let from_flags = load_of(&[
        "--phases",
        "nominal=5:2s,overload=20:1s",
        "--arrival",
        "constant",
    ]);
    assert_eq!(from_file, from_flags);
    assert_eq!(from_file["phases"].as_array().unwrap().len(), 2);
}

#[test]
fn multi_step_commands_refuse_flags_that_set_the_load() {
    for (args, needle) in [
        (vec!["capacity", "--rate", "5"], "drop --rate"),
        (vec!["capacity", "--slo", "none"], "--slo none"),
        (vec!["capacity", "--tolerance", "5"], "--tolerance"),
        (
            vec!["sweep", "--rate-steps", "1,2", "--concurrency", "2"],
            "--concurrency",
        ),
        (vec!["sweep", "--batch-steps", "1,2"], "--api completions"),
        (
            vec!["sweep", "--concurrency-steps", "1..x"],
            "--concurrency-steps",
        ),
        (
            vec!["run", "--phases", "a=5:10s", "--duration", "5s"],
            "--duration",
        ),
        (vec!["run", "--phases", "a=5"], "--phases"),
        (
            vec!["plan", "--peak-rps", "10", "--simulate", "--sim-gpu", "tpu"],
            "--sim-gpu",
        ),
    ] {
        let output = goodput().args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

/// Each step of a sweep sends prompts of its own: against a server with a prefix cache, the
/// second step finds none of its prompts cached (it used to re-send the
/// first step's, every full block a cache hit).
#[test]
fn a_sweeps_later_steps_send_prompts_no_cache_has_seen() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("cached.json");
    let text = r#"{"engine": {"kind": "batching", "model": "llama-3.2-1b", "gpu": "h100",
        "max_num_seqs": 4, "max_model_len": 2048, "prefix_caching": true},
        "prompt_tokenizer": "words"}"#;
    std::fs::write(&config, text).unwrap();
    let sim = support::sim_process::Sim::start(&config, &["--enable-prompt-tokens-details"]);
    let out = ok(goodput()
        .args(["sweep", "--quiet", "--json", "--target", &sim.url])
        .args([
            "--concurrency-steps",
            "1,2",
            "--requests",
            "8",
            "--warmup",
            "0",
        ])
        .args([
            "--input-tokens",
            "256",
            "--output-tokens",
            "4",
            "--seed",
            "7",
        ])
        .output()
        .unwrap());
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let steps = report["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2);
    for step in steps {
        let reuse = &step["prefix_reuse"];
        assert_eq!(reuse["requests_reporting_cached"], 8, "{reuse}");
        assert_eq!(reuse["cached_tokens_total"], 0, "{reuse}");
    }
}
