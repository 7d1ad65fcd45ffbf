//! `goodput calibrate --check` against the simulator it checks: a batching engine served over
//! HTTP in real time, checked with its own configuration in virtual time. The held-out
//! figures and the capacity searched on both sides must then agree; the capacity to within
//! one step of the search (the engine is the same, only the wire and the real-time clock
//! differ). Without `--slo` the check says that capacity was not searched, and why. A server
//! twice as fast as the configuration (the same simulator on a clock running twice as fast)
//! is told by the check's speed factor and divided out of its "at speed" predictions.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;

use serde_json::Value;
use support::sim_process::Sim;
use support::{goodput, ok};

/// Four slots of a small model on a fast accelerator: a request takes tens to hundreds of
/// milliseconds, and a fifth concurrent request waits for a slot. No frontend delay, so a
/// client re-sending at once could make a launch window: the check predicts both step
/// patterns beyond the slots.
const SIM: &str = r#"{"engine": {"kind": "batching", "model": "llama-3.2-1b", "gpu": "h100",
    "max_num_seqs": 4, "max_model_len": 2048, "overheads": {"frontend_us": 0.0}},
    "prompt_tokenizer": "words"}"#;

fn check(sim: &Sim, config: &Path, extra: &[&str]) -> std::process::Output {
    ok(goodput()
        .args(["calibrate", "--target", &sim.url, "--seed", "5", "--check"])
        .arg(config)
        .args(extra)
        .output()
        .unwrap())
}

/// Both capacities of every shape within one step, the error and the resolution as
/// documented, and at least one search bracketed (not stopped at --max-load).
fn assert_within_one_step(capacity: &Value) {
    let shapes = capacity["shapes"].as_array().unwrap();
    assert_eq!(
        shapes.len(),
        2,
        "the 4x prompt and 4x answer shapes: {capacity}"
    );
    let mut bracketed = 0;
    for shape in shapes {
        // Each request's lengths spread a quarter either side of the shape's.
        assert_eq!(shape["shape"]["spread"].as_f64(), Some(0.25), "{shape}");
        let measured = shape["measured"]["lower_bound"].as_f64().unwrap();
        let predicted = shape["predicted"]["lower_bound"].as_f64().unwrap();
        let at_speed = shape["predicted_at_speed"]["lower_bound"].as_f64().unwrap();
        assert!(
            (predicted - measured).abs() <= 1.0 && (at_speed - measured).abs() <= 1.0,
            "more than one step apart: {shape}"
        );
        // A server 10 % slower has no more capacity, one 10 % faster no less.
        let band = &shape["speed_band"];
        assert_eq!(band["margin"].as_f64(), Some(0.1), "{shape}");
        let (slower, faster) = (band["slower"].as_f64(), band["faster"].as_f64());
        assert!(
            slower.is_some_and(|s| s <= at_speed) && faster.is_some_and(|f| f >= at_speed),
            "{shape}"
        );
        let error = shape["error"].as_f64().unwrap();
        assert!(
            (error - (predicted / measured - 1.0)).abs() < 1e-9,
            "{shape}"
        );
        if let Some(upper) = shape["measured"]["upper_bound"].as_f64() {
            bracketed += 1;
            let resolution = shape["measured_resolution"].as_f64().unwrap();
            assert!(
                (resolution - (upper - measured) / measured).abs() < 1e-9,
                "{shape}"
            );
        }
    }
    assert!(bracketed > 0, "no search found an upper bound: {capacity}");
}

#[test]
fn a_simulator_checked_against_itself_predicts_its_own_capacity_within_one_step() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sim.json");
    std::fs::write(&config, SIM).unwrap();
    let sim = Sim::start(&config, &[]);

    let plain = check(&sim, &config, &["--json"]);
    let plain: Value = serde_json::from_slice(&plain.stdout).unwrap();
    let capacity = &plain["capacity"];
    assert!(
        capacity["not_searched"].as_str().unwrap().contains("--slo"),
        "{capacity}"
    );
    assert!(capacity["plan"].is_null() && capacity["shapes"].as_array().unwrap().is_empty());
    assert_speed_reference(&plain["speed_reference"]);
    assert_other_pattern(&plain["held_out"]);
    // The SLO: 1.6 times the long-answer shape's median E2E with every slot busy, so its
    // capacity lies between the slots and twice as many.
    let long_answer = &plain["held_out"][1]["measured"];
    let e2e_ms = long_answer["e2e"].as_f64().unwrap() * 1e3;
    let slo = format!("e2e={:.0}ms", 1.6 * e2e_ms);

    let searched = check(
        &sim,
        &config,
        &[
            "--json",
            "--slo",
            &slo,
            "--dimension",
            "concurrency",
            "--max-load",
            "8",
            "--attainment",
            "0.5",
            "--confidence",
            "0.5",
            "--probe-requests",
            "16",
        ],
    );
    let searched: Value = serde_json::from_slice(&searched.stdout).unwrap();
    let capacity = &searched["capacity"];
    assert!(capacity["not_searched"].is_null(), "{capacity}");
    assert_eq!(capacity["plan"]["dimension"], "concurrency");
    assert_within_one_step(capacity);
    for shape in capacity["shapes"].as_array().unwrap() {
        let other = &shape["other_pattern"];
        assert_eq!(other["pattern"], "in-step", "{shape}");
        assert!(
            other["capacity"].as_f64().is_some_and(|c| c >= 1.0),
            "{shape}"
        );
    }

    assert_text(&sim, &config);
}

/// The check's tables: capacity not searched without --slo, the speed line with the server's
/// speed factor, and every held-out figure also at that speed.
fn assert_text(sim: &Sim, config: &Path) {
    let text = check(sim, config, &[]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("capacity: no --slo"),
        "the table says capacity was not searched: {text}"
    );
    assert!(
        text.contains("speed since calibration: the calibration's probe at concurrency 4"),
        "{text}"
    );
    assert!(text.contains("times the configuration's speed"), "{text}");
    assert!(
        text.contains("E2E p50 ms") && text.contains("at speed") && text.contains("in step"),
        "{text}"
    );
}

/// The simulator served on a clock running twice as fast (`time_scale` 2: the engine and its
/// configuration unchanged) is a server twice as fast as the configuration says. The check's
/// speed factor says about 2, the configuration's own predictions are about twice every
/// measured median, its predictions at the server's speed agree with them again, and
/// `--rescaled` writes the configuration with every rate doubled.
#[test]
fn a_server_twice_as_fast_is_told_and_divided_out() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sim.json");
    std::fs::write(&config, SIM).unwrap();
    let mut fast: Value = serde_json::from_str(SIM).unwrap();
    fast["time_scale"] = 2.0.into();
    let fast_config = dir.path().join("fast.json");
    std::fs::write(&fast_config, fast.to_string()).unwrap();
    let sim = Sim::start(&fast_config, &[]);
    let rescaled = dir.path().join("now.toml");
    let out = check(
        &sim,
        &config,
        &["--json", "--rescaled", rescaled.to_str().unwrap()],
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let factor = report["speed_factor"].as_f64().unwrap();
    assert!((1.6..2.4).contains(&factor), "speed factor {factor}");
    let rows = report["held_out"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{report}");
    for row in rows {
        let measured = row["measured"]["e2e"].as_f64().unwrap();
        let as_configured = row["predicted"]["e2e"].as_f64().unwrap();
        let at_speed = row["predicted_at_speed"]["e2e"].as_f64().unwrap();
        assert!(as_configured / measured > 1.5, "{row}");
        assert!((at_speed / measured - 1.0).abs() < 0.25, "{row}");
    }
    let written = goodput_sim::SimConfig::from_file(&rescaled).unwrap();
    let checked = goodput_sim::SimConfig::from_file(&config).unwrap();
    assert_eq!(Some(written), checked.at_speed(factor));
}

/// Only the held-out shape beyond the 4 slots (8 clients) is also predicted with the other
/// step pattern: with clients in step, as the configuration has no launch window.
fn assert_other_pattern(rows: &Value) {
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 3, "{rows:?}");
    for row in rows {
        let clients = row["measured"]["probe"]["concurrency"].as_u64().unwrap();
        let other = &row["other_pattern"];
        if clients > 4 {
            assert_eq!(other["pattern"], "in-step", "{row}");
            assert!(other["predicted"]["e2e"].as_f64().unwrap() > 0.0, "{row}");
        } else {
            assert!(other.is_null(), "{row}");
        }
    }
}

/// The calibration's probe with every slot busy (the sweep's 64-word prompts and 48-token
/// answers), measured again and predicted by the configuration the server runs: the same
/// engine, so the model's error is the wire's and the real-time clock's, not a drift.
fn assert_speed_reference(reference: &Value) {
    let probe = &reference["measured"]["probe"];
    let shape = ["concurrency", "input_tokens", "output_tokens"].map(|k| probe[k].as_u64());
    assert_eq!(shape, [Some(4), Some(64), Some(48)], "{reference}");
    let measured = reference["measured"]["e2e"].as_f64().unwrap();
    let predicted = reference["predicted"]["e2e"].as_f64().unwrap();
    assert!(
        (predicted / measured - 1.0).abs() < 0.25,
        "E2E p50 {measured} s measured, {predicted} s predicted: {reference}"
    );
}
