//! `goodput calibrate` against the real llama.cpp server: calibrate on the default probe plan,
//! then `goodput calibrate --check --slo` searches the capacity of two held-out shapes —
//! prompts four times longer, answers four times longer, each request's lengths within a
//! quarter of those either way — on the server and in virtual time on the calibrated
//! configuration, and the TTFT, TPOT and E2E medians at half the measured
//! capacity are compared (live against the calibrated simulator). The figures are printed (see
//! docs/validation.md). On a 2-core machine shared with compilers the server's speed drifts by
//! tens of per cent between the calibration and the comparison; the check measures that drift
//! (its speed reference) and predicts at the server's speed now too (`--rescaled`). The test
//! judges the capacity at the check's speed, and the half-load medians at the speed a check
//! without an SLO measures just before them (printing them at the capacity check's speed too),
//! at the bounds such a machine can keep: capacity and E2E
//! within a factor of 1.5, TPOT of 2, TTFT of 4 — beyond the slots, where the server runs its
//! clients in step or staggered as a race decides round by round, of the range between the
//! two patterns' predictions. They catch a wrong engine form or a broken fit (a prompt cache
//! the simulator does not model gave a capacity of 3 for a measured 11), not the issue's
//! ±15 % and ±10 %, which the printed figures show run by run (docs/validation.md), and which
//! `calibrate_predicts` asserts against an exact-timing server.
#![allow(clippy::unwrap_used)]

#[path = "../../core/tests/llama_server/server.rs"]
#[allow(dead_code, unreachable_pub)]
mod server;
mod support;

use std::path::Path;

use goodput_core::decide::calibrate::{CapacityShape, SlotSplit};
use serde_json::Value;
use server::{LlamaServer, Model, Options};
use support::{MEDIAN_BY_CONCURRENCY, goodput};

/// The held-out base shape of `--check` (`goodput_sim::calibrate::held_out` at 1,024 tokens
/// of context per slot); the plan never probes it or its fourfold variants.
const PROMPT: u32 = 64;
const ANSWER: u32 = 24;
/// Requests of every capacity probe.
const REQUESTS: &str = "8";
/// Requests of every half-load run and of the runs alone that set the SLO: with 8, the same
/// run's medians moved by 10–40 % from one minute to the next on this server (TTFT
/// 770–1,076 ms); with 24 by 3–6 %.
const HALF_LOAD_REQUESTS: &str = "24";
/// Largest factor between predicted (at the server's speed now) and measured capacity: since
/// the capacity shapes spread their lengths, six of six by hand within one step (the worst 4
/// against 5), so 1.5 (was 2) still leaves a step's margin at 4–8 clients.
const CAPACITY_FACTOR: f64 = 1.5;
/// Largest factor between predicted and measured E2E median.
const E2E_FACTOR: f64 = 1.5;
/// Largest factor between predicted and measured TPOT median.
const TPOT_FACTOR: f64 = 2.0;
/// The server's slots: beyond them its step pattern is a race it runs each round, its clients
/// in step (TPOT 21 ms at 5 clients of 256 → 24 on a quiet machine, CI of 2026-12-03) or one's
/// prompt riding in the others' decode steps (47–58 ms); the calibrated engine predicts the
/// second, with a launch window the first (docs/validation.md).
const SLOTS: u32 = 4;
/// Largest factor between predicted and measured TTFT median.
const TTFT_FACTOR: f64 = 4.0;

fn json_of(args: &[String]) -> Value {
    let output = goodput().args(args).output().unwrap();
    assert!(
        output.status.success(),
        "goodput {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn strings(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The request shape and where it goes: the live server, or the calibrated simulator.
fn shape(target: &[String], shape: &CapacityShape) -> Vec<String> {
    let (input, output) = shape.lengths();
    let mut args = target.to_vec();
    args.extend(strings(&[
        "--input-tokens",
        &input.to_string(),
        "--output-tokens",
        &output.to_string(),
        "--seed",
        "11",
        "--quiet",
        "--json",
    ]));
    args
}

/// `goodput calibrate --check config` on the server with `extra`, writing the configuration at
/// the server's speed now to `rescaled`: the report.
fn check(server: &LlamaServer, (config, rescaled): (&Path, &Path), extra: &[&str]) -> Value {
    let mut args = strings(&[
        "calibrate",
        "--target",
        &server.url(),
        "--check",
        config.to_str().unwrap(),
        "--rescaled",
        rescaled.to_str().unwrap(),
    ]);
    args.extend(strings(extra));
    json_of(&args)
}

/// `goodput calibrate --check` with a capacity search under `slo_ms` (median E2E, by
/// concurrency), writing the configuration at the server's speed now to `rescaled`: its
/// capacity comparisons, one per held-out shape that fills the slots.
fn check_capacity(server: &LlamaServer, config: &Path, slo_ms: f64, rescaled: &Path) -> Vec<Value> {
    let slo = format!("e2e={slo_ms:.0}ms");
    // Two passes of the speed reference (and of the held-out shapes): the at-speed
    // configuration of the half-load runs takes that probe's noise (one pass of a probe's E2E
    // varied by 4–8 % on the test machine); a minute more for the capacity searches.
    let mut extra = vec!["--budget", "5m", "--json", "--slo", &slo];
    extra.extend(["--probe-requests", REQUESTS, "--max-load", "16"]);
    extra.extend(MEDIAN_BY_CONCURRENCY);
    let report = check(server, (config, rescaled), &extra);
    let capacity = &report["capacity"];
    let speed = &report["speed_reference"];
    let e2e = |side: &str| speed[side]["e2e"].as_f64().unwrap_or(f64::NAN);
    eprintln!(
        "check: speed since calibration (a calibration probe measured again): E2E p50 {:.1} ms, \
         model {:.1} ms ({:+.1} %), speed factor {}",
        e2e("measured") * 1e3,
        e2e("predicted") * 1e3,
        error(e2e("predicted"), e2e("measured")) * 100.0,
        report["speed_factor"]
    );
    eprintln!("check: held-out medians {}", report["held_out"]);
    assert!(capacity["not_searched"].is_null(), "{capacity}");
    capacity["shapes"].as_array().unwrap().clone()
}

/// TTFT, TPOT and E2E medians (ms) of a closed-loop run at `concurrency`.
fn medians(target: &[String], requests: &CapacityShape, concurrency: f64) -> [f64; 3] {
    let mut args = strings(&["run", "--no-live"]);
    args.extend(shape(target, requests));
    args.extend(strings(&[
        "--concurrency",
        &concurrency.to_string(),
        "--requests",
        HALF_LOAD_REQUESTS,
    ]));
    let report = json_of(&args);
    let latency = &report["steps"][0]["latency_ms"];
    ["ttft", "tpot", "e2e"].map(|m| latency[m]["p50"].as_f64().unwrap())
}

fn error(predicted: f64, measured: f64) -> f64 {
    predicted / measured - 1.0
}

/// Whether `predicted` is within a factor `factor` of `measured`, either way.
fn within(predicted: f64, measured: f64, factor: f64) -> bool {
    predicted > 0.0 && measured > 0.0 && (predicted / measured).ln().abs() <= factor.ln()
}

/// Whether `measured` is within a factor `factor` of the range between two predictions.
fn within_range((a, b): (f64, f64), measured: f64, factor: f64) -> bool {
    within(a, measured, factor)
        || within(b, measured, factor)
        || (a.min(b)..=a.max(b)).contains(&measured)
}

/// `config` with a launch window: clients beyond the slots kept in step.
fn in_step(config: &Path) -> std::path::PathBuf {
    let text = std::fs::read_to_string(config).unwrap();
    assert!(!text.contains("launch_window_us"), "{text}");
    let path = config.with_extension("in-step.toml");
    let text = text.replacen("[engine]\n", "[engine]\nlaunch_window_us = 1.0\n", 1);
    std::fs::write(&path, text).unwrap();
    path
}

/// Calibrates on the server; the configuration's path.
fn calibrate(server: &LlamaServer, dir: &Path) -> std::path::PathBuf {
    let config = dir.join("calibrated.toml");
    let fit = json_of(&strings(&[
        "calibrate",
        "--target",
        &server.url(),
        "--budget",
        "3m",
        "--out",
        config.to_str().unwrap(),
        "--json",
    ]));
    let r = &fit["repeatability"];
    eprintln!(
        "calibration: RMS {:.1} %, latency {} ms (holds the slot: {}), problems {}; \
         repeatability of {} probes in {} passes: TTFT {:.1} %, TPOT {:.1} %, E2E {:.1} %",
        fit["fit"]["rms_relative_error"].as_f64().unwrap() * 100.0,
        fit["fit"]["constants"]["latency_ms"],
        fit["fit"]["constants"]["latency_holds_slot"],
        fit["fit"]["problems"],
        r["probes"],
        r["passes"],
        r["ttft"].as_f64().unwrap() * 100.0,
        r["tpot"].as_f64().unwrap() * 100.0,
        r["e2e"].as_f64().unwrap() * 100.0
    );
    check_facts(&fit, &config);
    config
}

/// What calibrate read of the server, and what the configuration made of it.
fn check_facts(fit: &Value, config: &Path) {
    // The test model's template opens every chat prompt with BOS and `<|im_start|>user\n`,
    // which its tokenizer splits into 9 tokens (` <`, `|`, `im`, `_`, `start`, `|`, `>`,
    // `user`, `\n`): llama-server's own log gives the same common prefix (f_sim 0.106 of a
    // 93-token prompt when it picks a slot by similarity).
    assert_eq!(fit["facts"]["shared_prefix_tokens"], 10, "{}", fit["facts"]);
    // Started with `-np 4`, every slot has a KV stream and two decodes a slot apart run as two
    // micro-batches a step. What the second costs is the machine's: 1.6 times the TPOT of two
    // side by side on a machine whose memory bounds the decode (this F32 model's weights read
    // twice), none on one whose arithmetic does (15.6 against 15.9 ms on the project's CI of
    // 2026-12-03). Both pairs are measured, and the configuration follows what they showed.
    let split = &fit["facts"]["slot_split"];
    let measured: SlotSplit = serde_json::from_value(split.clone())
        .unwrap_or_else(|e| panic!("both pairs measured: {e}: {split}"));
    eprintln!(
        "slot split: {:.1} ms side by side, {:.1} ms a slot apart",
        measured.side_by_side * 1e3,
        measured.apart * 1e3
    );
    let text = std::fs::read_to_string(config).unwrap();
    assert_eq!(
        text.contains("slot_ubatch_tokens"),
        measured.by_slot(),
        "{split}: {text}"
    );
    // Each slot's 1,024 tokens are its own whatever the split showed (the cache probe asks
    // when it showed nothing): the pool holds all four, 4,096 tokens in blocks of 16 and one.
    if !measured.by_slot() {
        assert_eq!(fit["facts"]["kv_cache"], "per_slot", "{}", fit["facts"]);
    }
    assert!(text.contains("kv_blocks_override = 257\n"), "{text}");
    // llama-server takes queued requests first come first served: the queue-order probe
    // reads that, or (its timing upset on a loaded machine, or the budget spent) reads
    // nothing — never sequences that another order, or none, explains.
    let sources = fit["facts"]["sources"].to_string();
    match fit["facts"]["queue_order"].as_str() {
        Some(order) => assert_eq!(order, "fifo", "{sources}"),
        None => assert!(!sources.contains("queue order: requests"), "{sources}"),
    }
}

/// The TTFT, TPOT and E2E medians (ms) at half the measured capacity: live, on the calibrated
/// configuration at the server's speed just before (beyond the slots also with clients kept
/// in step), and at its speed in the capacity check, minutes earlier.
struct AtHalf {
    concurrency: f64,
    measured: [f64; 3],
    predicted: [f64; 3],
    in_step: Option<[f64; 3]>,
    at_check: [f64; 3],
}

impl AtHalf {
    fn errors(&self, predicted: [f64; 3]) -> [String; 3] {
        [0, 1, 2].map(|i| format!("{:+.1} %", error(predicted[i], self.measured[i]) * 100.0))
    }
}

/// Prints one held-out shape's figures and their errors (docs/validation.md records them).
fn print_figures(name: &str, slo: f64, capacity: &Value, at_half: &AtHalf) {
    let percent = |v: &Value| {
        v.as_f64()
            .map_or("-".to_string(), |v| format!("{:+.1} %", v * 100.0))
    };
    eprintln!(
        "{name}: SLO e2e {slo:.0} ms; capacity measured {} ({}, resolution {}), predicted {} \
         ({}, resolution {}), error {}; at the server's speed now {} ({}), error {}, band \
         {}, other pattern {}; at concurrency {} (at speed): measured {:?} ms, predicted {:?} \
         ms (TTFT, TPOT, E2E {:?})",
        capacity["measured"]["lower_bound"],
        capacity["measured"]["conclusion"],
        percent(&capacity["measured_resolution"]),
        capacity["predicted"]["lower_bound"],
        capacity["predicted"]["conclusion"],
        percent(&capacity["predicted_resolution"]),
        percent(&capacity["error"]),
        capacity["predicted_at_speed"]["lower_bound"],
        capacity["predicted_at_speed"]["conclusion"],
        percent(&capacity["error_at_speed"]),
        capacity["speed_band"],
        capacity["other_pattern"],
        at_half.concurrency,
        at_half.measured,
        at_half.predicted,
        at_half.errors(at_half.predicted)
    );
    if let Some(in_step) = at_half.in_step {
        eprintln!(
            "  in step: predicted {in_step:?} ms ({:?})",
            at_half.errors(in_step)
        );
    }
    eprintln!(
        "  at the speed of the capacity check: predicted {:?} ms ({:?})",
        at_half.at_check,
        at_half.errors(at_half.at_check)
    );
    for side in ["measured", "predicted", "predicted_at_speed"] {
        for probe in capacity[side]["probes"].as_array().into_iter().flatten() {
            eprintln!(
                "  {side} probe {} (run {}): {} — {}",
                probe["load"], probe["runs"], probe["outcome"], probe["reason"]
            );
        }
    }
}

/// Where the half-load runs go: the live server, and the calibrated configuration in virtual
/// time at the server's speed just before them (`now`, and `in_step`: with clients kept in
/// step beyond the slots) and at its speed in the capacity check (`at_check`).
struct Targets {
    live: Vec<String>,
    now: Vec<String>,
    in_step: Vec<String>,
    at_check: Vec<String>,
}

/// The server's speed now: `calibrate --check` without an SLO (its speed reference, a
/// calibration probe measured again, and the held-out shapes, about half a minute), writing
/// the configuration at that speed to `out`; the virtual-time targets on it and with clients
/// in step.
fn speed_now(server: &LlamaServer, config: &Path, out: &Path) -> (Vec<String>, Vec<String>) {
    let report = check(server, (config, out), &["--json"]);
    eprintln!("speed now: factor {}", report["speed_factor"]);
    let virtual_on =
        |path: &Path| strings(&["--virtual-time", "--sim-config", path.to_str().unwrap()]);
    (virtual_on(out), virtual_on(&in_step(out)))
}

/// One shape's capacity comparison and its medians at half the measured capacity, live and
/// predicted: the figures printed, what is outside the bounds returned.
fn judge(
    name: &str,
    requests: &CapacityShape,
    capacity: &Value,
    to: &Targets,
    slo: f64,
) -> Vec<String> {
    let mut failures = Vec::new();
    let measured = capacity["measured"]["lower_bound"].as_f64().unwrap_or(0.0);
    let predicted = capacity["predicted_at_speed"]["lower_bound"]
        .as_f64()
        .unwrap_or(0.0);
    let half = (measured / 2.0).round().max(1.0);
    let at_half = AtHalf {
        concurrency: half,
        measured: medians(&to.live, requests, half),
        predicted: medians(&to.now, requests, half),
        in_step: (half > f64::from(SLOTS)).then(|| medians(&to.in_step, requests, half)),
        at_check: medians(&to.at_check, requests, half),
    };
    print_figures(name, slo, capacity, &at_half);
    if !within(predicted, measured, CAPACITY_FACTOR) {
        failures.push(format!(
            "{name}: capacity {predicted} predicted at the server's speed, {measured} measured"
        ));
    }
    let factors = [TTFT_FACTOR, TPOT_FACTOR, E2E_FACTOR];
    for (i, metric) in ["TTFT", "TPOT", "E2E"].iter().enumerate() {
        let (m, p) = (at_half.measured[i], at_half.predicted[i]);
        let other = at_half.in_step.map_or(p, |in_step| in_step[i]);
        if !within_range((p, other), m, factors[i]) {
            failures.push(format!(
                "{name}: {metric} p50 {:+.1} % (in step {:+.1} %)",
                error(p, m) * 100.0,
                error(other, m) * 100.0
            ));
        }
    }
    failures
}

#[test]
fn calibrated_simulator_predicts_capacity_and_latency_of_held_out_shapes() {
    // One thread: a spinning second thread makes a shared 2-core machine's timings erratic.
    let mut options = Options::new(Model::Small, SLOTS);
    options.extra = strings(&["-t", "1", "-c", "4096"]);
    let server = LlamaServer::start(&options);
    let dir = tempfile::tempdir().unwrap();
    let config = calibrate(&server, dir.path());
    // llama.cpp reuses a slot's cached prompt when a request repeats one (the runs here repeat
    // seeded prompts; `--check`'s capacity probes send fresh ones); the simulator models no
    // such cache, so it is off.
    let live = strings(&[
        "--target",
        &server.url(),
        "--extra-body",
        r#"{"cache_prompt": false}"#,
    ]);
    // The held-out shapes `--check` searches (every slot busy: 4 slots, 1024 tokens each),
    // each request's lengths within a quarter of them either way, as the check sends them.
    let shapes = [
        ("4x prompt", CapacityShape::around(PROMPT * 4, ANSWER)),
        ("4x answer", CapacityShape::around(PROMPT, ANSWER * 4)),
    ];
    // One SLO for both: three times the slower shape's median E2E alone.
    let alone = shapes.map(|(_, requests)| medians(&live, &requests, 1.0)[2]);
    let slo = 3.0 * alone[0].max(alone[1]);
    let rescaled = dir.path().join("at-check.toml");
    let capacities = check_capacity(&server, &config, slo, &rescaled);
    assert_eq!(capacities.len(), shapes.len(), "{capacities:?}");
    // The calibrated configuration in virtual time (as `--check` runs it: seconds of CPU) at
    // the server's speed in the check, and again just before each shape's half-load runs: the
    // capacity searches take minutes, over which this machine's pace moves by 10–25 %.
    let at_check = strings(&["--virtual-time", "--sim-config", rescaled.to_str().unwrap()]);
    let mut failures = Vec::new();
    for (index, ((name, requests), capacity)) in shapes.iter().zip(&capacities).enumerate() {
        let searched: CapacityShape = serde_json::from_value(capacity["shape"].clone()).unwrap();
        assert_eq!(&searched, requests, "{capacity}");
        let now = dir.path().join(format!("now-{index}.toml"));
        let (now, in_step) = speed_now(&server, &config, &now);
        let to = Targets {
            live: live.clone(),
            now,
            in_step,
            at_check: at_check.clone(),
        };
        failures.extend(judge(name, requests, capacity, &to, slo));
    }
    assert!(failures.is_empty(), "outside the tolerances: {failures:?}");
}
