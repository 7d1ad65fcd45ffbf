//! `goodput calibrate` then `calibrate --check --slo` against `support::step_server`'s
//! exact-timing server — steps of 5 ms plus 0.25 ms a token, 256 tokens a step at most, four
//! slots, a word a token — held to the figures issue #14 asks of the real server, which this
//! machine's drifting speed keeps `llama_calibrate` from asserting: the capacity of both
//! held-out shapes (prompts four times longer; answers four times longer, each request's
//! lengths within a quarter either way) predicted within 15 % of the capacity measured on the
//! server, and the TTFT, TPOT and E2E medians at half that load within 10 %. The server's
//! timing is its own (deadlines, not the simulator), so the check is independent: a wrong
//! engine form, a misread prompt count or a fit that puts a cost in the wrong place shows.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;

use goodput_core::decide::calibrate::CapacityShape;
use serde_json::Value;
use support::step_server::{self, Order, Spec};
use support::{MEDIAN_BY_CONCURRENCY, goodput, ok};

/// The server: four slots of 2,048 tokens, steps of 5 ms and 0.25 ms a token, 256 tokens a
/// step, first come first served, no `/metrics`.
const SPEC: Spec = Spec {
    step_ms: 5.0,
    token_ms: 0.25,
    budget: 256,
    slots: 4,
    context: 2048,
    order: Order::Fifo,
    metrics: None,
};
/// The held-out base shape of `--check` at 2,048 tokens of context per slot.
const PROMPT: u32 = 64;
const ANSWER: u32 = 24;
/// Largest relative error of a predicted capacity (issue #14).
const CAPACITY_ERROR: f64 = 0.15;
/// Largest relative error of a predicted median at half the capacity (issue #14).
const MEDIAN_ERROR: f64 = 0.10;

fn json(args: &[&str]) -> Value {
    let output = ok(goodput().args(args).output().unwrap());
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Requests of a run at half the capacity: enough rounds that the median is the steady
/// state's, not the first round's (which requests the server took first, a race live), so an
/// exact server measures it within ~2 % from run to run (2026-12-05: 4x prompt at 9 clients,
/// TPOT 12.4–12.8 ms over 24 requests, 12.9–13.2 over 72).
const HALF_LOAD_REQUESTS: u32 = 72;
/// Requests of a run of one client (the SLO's reference): no race to average out.
const ALONE_REQUESTS: u32 = 24;

/// TTFT, TPOT and E2E medians (ms) of `requests` requests of `shape` at `concurrency` on
/// `target`.
fn medians(target: &[&str], shape: &CapacityShape, concurrency: u32, requests: u32) -> [f64; 3] {
    let (input, output) = shape.lengths();
    let (input, output) = (input.to_string(), output.to_string());
    let (concurrency, requests) = (concurrency.to_string(), requests.to_string());
    let mut args = vec!["run", "--no-live", "--quiet", "--json", "--seed", "11"];
    args.extend(target);
    args.extend(["--input-tokens", &input, "--output-tokens", &output]);
    args.extend(["--concurrency", &concurrency, "--requests", &requests]);
    let report = json(&args);
    let latency = &report["steps"][0]["latency_ms"];
    ["ttft", "tpot", "e2e"].map(|m| latency[m]["p50"].as_f64().unwrap())
}

fn error(predicted: f64, measured: f64) -> f64 {
    predicted / measured - 1.0
}

/// Calibrates on the server at `url`: the configuration's path.
fn calibrate(url: &str, dir: &Path) -> std::path::PathBuf {
    let config = dir.join("calibrated.toml");
    let fit = json(&[
        "calibrate",
        "--target",
        url,
        "--seed",
        "3",
        "--json",
        "--out",
        config.to_str().unwrap(),
    ]);
    eprintln!("fit: {}", fit["fit"]["table"]);
    // The server counts a prompt's words: the simulator's chat markers (7) taken off.
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.contains("\nchat_template_tokens = -7\n"), "{text}");
    config
}

/// `calibrate --check config --slo slo` on the server: its capacity comparisons, one per
/// held-out shape.
fn check_capacity(url: &str, config: &Path, slo: &str) -> Vec<Value> {
    let config = config.to_str().unwrap();
    let mut args = vec![
        "calibrate",
        "--target",
        url,
        "--seed",
        "3",
        "--check",
        config,
    ];
    args.extend(["--json", "--slo", slo, "--max-load", "32"]);
    args.extend(MEDIAN_BY_CONCURRENCY);
    let report = json(&args);
    report["capacity"]["shapes"].as_array().unwrap().clone()
}

/// One shape's capacity, measured and predicted, and its medians at half the measured
/// capacity on the server and on the calibrated configuration: what is outside the issue's
/// tolerances.
fn judge(name: &str, shape: &CapacityShape, capacity: &Value, to: [&[&str]; 2]) -> Vec<String> {
    let mut failures = Vec::new();
    let searched: CapacityShape = serde_json::from_value(capacity["shape"].clone()).unwrap();
    assert_eq!(&searched, shape, "{capacity}");
    let measured = capacity["measured"]["lower_bound"].as_f64().unwrap();
    let predicted = capacity["predicted"]["lower_bound"].as_f64().unwrap();
    eprintln!("{name}: capacity measured {measured}, predicted {predicted}");
    if error(predicted, measured).abs() > CAPACITY_ERROR {
        failures.push(format!(
            "{name}: capacity {predicted} predicted, {measured} measured"
        ));
    }
    let half = (measured / 2.0).round().max(1.0) as u32;
    let [m, p] = to.map(|target| medians(target, shape, half, HALF_LOAD_REQUESTS));
    eprintln!("  at {half} clients: measured {m:?} ms, predicted {p:?} ms");
    for (i, metric) in ["TTFT", "TPOT", "E2E"].iter().enumerate() {
        if error(p[i], m[i]).abs() > MEDIAN_ERROR {
            failures.push(format!(
                "{name}: {metric} p50 at {half} clients {:+.1} %",
                error(p[i], m[i]) * 100.0
            ));
        }
    }
    failures
}

#[test]
fn the_calibrated_simulator_predicts_an_exact_servers_capacity_and_latency() {
    let url = step_server::start(SPEC);
    let dir = tempfile::tempdir().unwrap();
    let config = calibrate(&url, dir.path());
    let shapes = [
        ("4x prompt", CapacityShape::around(PROMPT * 4, ANSWER)),
        ("4x answer", CapacityShape::around(PROMPT, ANSWER * 4)),
    ];
    let live = ["--target", url.as_str()];
    let simulated = ["--virtual-time", "--sim-config", config.to_str().unwrap()];
    // One SLO for both: three times the slower shape's median E2E alone.
    let alone = shapes.map(|(_, shape)| medians(&live, &shape, 1, ALONE_REQUESTS)[2]);
    let slo = format!("e2e={:.0}ms", 3.0 * alone[0].max(alone[1]));
    eprintln!("SLO {slo}");
    let capacities = check_capacity(&url, &config, &slo);
    assert_eq!(capacities.len(), shapes.len(), "{capacities:?}");
    let failures: Vec<String> = shapes
        .iter()
        .zip(&capacities)
        .flat_map(|((name, shape), capacity)| judge(name, shape, capacity, [&live, &simulated]))
        .collect();
    assert!(failures.is_empty(), "outside the tolerances: {failures:?}");
}
