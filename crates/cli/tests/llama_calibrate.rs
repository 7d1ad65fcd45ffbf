//! `goodput calibrate` against the real llama.cpp server, held to the issue's figures:
//! calibrate on the default probe plan, then `goodput calibrate --check --slo` searches the
//! capacity of two held-out shapes — prompts four times longer, answers four times longer,
//! each request's lengths within a quarter of those either way — on the server and in virtual
//! time on the calibrated configuration, and the TTFT, TPOT and E2E medians at half the
//! measured capacity are compared (live against the calibrated simulator). The figures are
//! printed (see docs/validation.md).
//!
//! On a 2-core machine shared with compilers the server's speed drifts by tens of per cent
//! between the calibration and the comparison; the check measures that drift (its speed
//! reference) and predicts at the server's speed now too (`--rescaled`). The capacity is
//! judged at the check's speed or calibration's: within 15 %, or within one client where 15 %
//! is finer than a concurrency search's step, between a capacity the live search left
//! possible and one the predicting search left possible (each its bracket when its budget ran
//! out before it converged). The half-load medians are judged at the speeds checks without an
//! SLO measure just before and just after the live run (and beyond the slots, where the server
//! runs its clients in step or staggered as a race decides round by round, with both patterns)
//! and at its speed in the capacity check: some prediction within 10 % (plus the server's own
//! pass-to-pass variation of that median, as calibration measured it) of a value the measured
//! median may take at 95 % confidence — where a shape's latencies come in two modes, a median
//! of 21 requests sat in either, run to run (TTFT 353–519 ms in five runs of one shape on a
//! quiet machine, the engine's 346), so the half-load runs measure 64 (72 with the warm-up).
//! `calibrate_predicts` holds the plain medians to 10 % against an exact-timing server.
#![allow(clippy::unwrap_used)]

#[path = "../../core/tests/llama_server/server.rs"]
#[allow(dead_code, unreachable_pub)]
mod server;
mod support;

use std::path::Path;

use goodput_core::decide::calibrate::{CapacityShape, SlotSplit};
use serde_json::Value;
use server::{LlamaServer, Model, Options};
use support::median::{self, Median};
use support::{MEDIAN_BY_CONCURRENCY, goodput};

/// The held-out base shape of `--check` (`goodput_sim::calibrate::held_out` at 1,024 tokens
/// of context per slot); the plan never probes it or its fourfold variants.
const PROMPT: u32 = 64;
const ANSWER: u32 = 24;
/// Requests of every capacity probe.
const REQUESTS: &str = "8";
/// Requests of the runs alone that set the SLO: with 8, the same run's medians moved by
/// 10–40 % from one minute to the next on this server (TTFT 770–1,076 ms); with 24 by 3–6 %.
const ALONE_REQUESTS: &str = "24";
/// Requests of every half-load run: with 24, which slot a few requests of the first rounds
/// took (a race) decided a median of two modes (the long answers' TPOT +22 to +25 % in three
/// quiet runs); over 72 the engine followed the server request by request, the medians within
/// 3 % of three live runs but that TPOT (+2.5 to +10.8 %: its median near the boundary of the
/// modes) (docs/validation.md, 2026-12-05).
const HALF_LOAD_REQUESTS: &str = "72";
/// The issue's bound on the predicted capacity (at the server's speed in the check): within
/// 15 % of the measured, or within one client — a concurrency search's step, which at 4–6
/// clients is 17–25 % (since the capacity shapes spread their lengths, every comparison by
/// hand within one step).
const CAPACITY_TOLERANCE: f64 = 0.15;
/// The issue's bound on the half-load medians: the predicted TTFT, TPOT and E2E p50 within
/// 10 % — beyond what the server's own medians vary by from one pass of the same probes to
/// the next, as calibration measured it (no prediction of it can be closer: in CI of
/// 2026-12-07 its speed factor read 1.11, 1.44, 1.25 and 1.42 within ten minutes, calibration's
/// repeatability TTFT 5 %, TPOT 14 %, E2E 11 %) — of a value the server's true median may take
/// (the measured median's 95 % range:
/// where a shape's latencies have two modes — one client's prompt alone in a step or beside
/// another's, a decode batch in one micro-batch or two — the median of a few rounds sits in
/// either, run to run, while the engine reproduces both modes request by request).
const MEDIAN_TOLERANCE: f64 = 0.10;
/// The server's slots: beyond them its step pattern is a race it runs each round, its clients
/// in step (TPOT 21 ms at 5 clients of 256 → 24 on a quiet machine, CI of 2026-12-03) or one's
/// prompt riding in the others' decode steps (47–58 ms); the calibrated engine predicts the
/// second, with a launch window the first (docs/validation.md).
const SLOTS: u32 = 4;

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

/// A closed-loop run of `count` requests of `requests` at `concurrency`, its journal written
/// to `out` when given: its report.
fn closed_loop(
    target: &[String],
    requests: &CapacityShape,
    (concurrency, count): (f64, &str),
    out: Option<&Path>,
) -> Value {
    let mut args = strings(&["run", "--no-live"]);
    args.extend(shape(target, requests));
    args.extend(strings(&[
        "--concurrency",
        &concurrency.to_string(),
        "--requests",
        count,
    ]));
    if let Some(out) = out {
        args.extend(strings(&["--out", out.to_str().unwrap()]));
    }
    json_of(&args)
}

/// TTFT, TPOT and E2E medians (ms) of a closed-loop run (at a concurrency, of a count of
/// requests), as reported.
fn medians(target: &[String], requests: &CapacityShape, run: (f64, &str)) -> [f64; 3] {
    medians_of(&closed_loop(target, requests, run, None))
}

/// TTFT, TPOT and E2E medians (ms) of a live half-load run at `concurrency`, each with the
/// range the server's true median lies in (from the run's journal, written to `out`).
fn measured_medians(
    target: &[String],
    requests: &CapacityShape,
    concurrency: f64,
    out: &Path,
) -> [Median; 3] {
    let run = (concurrency, HALF_LOAD_REQUESTS);
    let reported = medians_of(&closed_loop(target, requests, run, Some(out)));
    let measured = median::medians(&out.join("requests.jsonl"));
    // The journal's medians are the report's (its histograms hold them to within 0.1 %).
    for (journal, report) in measured.iter().zip(reported) {
        assert!(
            (journal.value / report - 1.0).abs() < 0.01,
            "{journal:?} against {report}"
        );
    }
    measured
}

fn medians_of(report: &Value) -> [f64; 3] {
    let latency = &report["steps"][0]["latency_ms"];
    ["ttft", "tpot", "e2e"].map(|m| latency[m]["p50"].as_f64().unwrap())
}

fn error(predicted: f64, measured: f64) -> f64 {
    predicted / measured - 1.0
}

/// Whether the predicted capacity is within the issue's 15 % of the measured, or within one
/// client of it: a concurrency search's step, coarser than 15 % below 7 clients.
fn capacity_within(predicted: f64, measured: f64) -> bool {
    predicted > 0.0
        && measured > 0.0
        && (predicted - measured).abs() <= (CAPACITY_TOLERANCE * measured).max(1.0)
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

/// Calibrates on the server: the configuration's path and the server's repeatability (how
/// much one pass's TTFT, TPOT and E2E medians of the same probes varied, as fractions).
fn calibrate(server: &LlamaServer, dir: &Path) -> (std::path::PathBuf, [f64; 3]) {
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
    (
        config,
        ["ttft", "tpot", "e2e"].map(|m| r[m].as_f64().unwrap()),
    )
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

/// The calibrated configuration at the server's speed at one moment, in virtual time: as
/// calibrate writes it (clients beyond the slots staggered), and with them kept in step where
/// the check found that pattern physical (none when the configuration's frontend delay is
/// longer than llama-server's launch window: requests reaching the engine that late miss it).
struct AtSpeed {
    factor: f64,
    staggered: Vec<String>,
    in_step: Option<Vec<String>>,
}

/// The server's speed now: `calibrate --check` without an SLO (its speed reference, a
/// calibration probe measured again, and the held-out shapes, about half a minute), writing
/// the configuration at that speed to `out`.
fn speed_now(server: &LlamaServer, config: &Path, out: &Path) -> AtSpeed {
    let report = check(server, (config, out), &["--json"]);
    let factor = report["speed_factor"].as_f64().unwrap();
    eprintln!("speed now: factor {factor:.3}");
    let virtual_on =
        |path: &Path| strings(&["--virtual-time", "--sim-config", path.to_str().unwrap()]);
    let held_out = report["held_out"].as_array().unwrap();
    let in_step_physical = held_out.iter().any(|row| !row["other_pattern"].is_null());
    AtSpeed {
        factor,
        staggered: virtual_on(out),
        in_step: in_step_physical.then(|| virtual_on(&in_step(out))),
    }
}

/// The TTFT, TPOT and E2E medians (ms) at half the measured capacity: live with the range of
/// each true median, and on the calibrated configuration at the server's speed just before and
/// just after the live run (beyond the slots also with clients kept in step), and at its
/// speed in the capacity check, minutes earlier.
struct AtHalf {
    concurrency: f64,
    measured: [Median; 3],
    predicted: Vec<(String, [f64; 3])>,
    at_check: [f64; 3],
}

impl AtHalf {
    fn predict(
        (concurrency, measured): (f64, [Median; 3]),
        requests: &CapacityShape,
        speeds: [(&str, &AtSpeed); 2],
        at_check: &[String],
    ) -> AtHalf {
        let run = (concurrency, HALF_LOAD_REQUESTS);
        let mut predicted = Vec::new();
        for (when, at) in speeds {
            let label = format!("{when} (speed {:.3})", at.factor);
            predicted.push((label.clone(), medians(&at.staggered, requests, run)));
            if let Some(in_step) = at
                .in_step
                .as_ref()
                .filter(|_| concurrency > f64::from(SLOTS))
            {
                let in_step = medians(in_step, requests, run);
                predicted.push((format!("{label}, in step"), in_step));
            }
        }
        AtHalf {
            concurrency,
            measured,
            predicted,
            at_check: medians(at_check, requests, run),
        }
    }

    fn errors(&self, predicted: [f64; 3]) -> [String; 3] {
        [0, 1, 2].map(|i| {
            let error = error(predicted[i], self.measured[i].value);
            format!("{:+.1} %", error * 100.0)
        })
    }

    /// Metric `i`'s predictions (at every speed the test measured — the check's, just before
    /// and just after — and both patterns) as a range.
    fn range(&self, i: usize) -> (f64, f64) {
        let values = self
            .predicted
            .iter()
            .map(|(_, p)| p[i])
            .chain([self.at_check[i]]);
        let low = values.clone().fold(f64::INFINITY, f64::min);
        (low, values.fold(f64::NEG_INFINITY, f64::max))
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
         {}, other pattern {}",
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
    );
    let m = at_half.measured;
    eprintln!(
        "  at concurrency {}: measured medians TTFT {:.1} ({:.1}–{:.1}), TPOT {:.1} \
         ({:.1}–{:.1}), E2E {:.1} ({:.1}–{:.1}) ms (95 % ranges)",
        at_half.concurrency,
        m[0].value,
        m[0].low,
        m[0].high,
        m[1].value,
        m[1].low,
        m[1].high,
        m[2].value,
        m[2].low,
        m[2].high
    );
    for (label, predicted) in &at_half.predicted {
        eprintln!(
            "  {label}: predicted {predicted:.1?} ms (TTFT, TPOT, E2E {:?})",
            at_half.errors(*predicted)
        );
    }
    eprintln!(
        "  at the speed of the capacity check: predicted {:.1?} ms ({:?})",
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

/// The capacities one side's search (`measured`, `predicted_at_speed`) left possible: its lower
/// bound to one client below the lowest load it refuted (the lower bound alone when converged;
/// more when its budget ran out first — 8 passed and 12 refuted leave 8 to 11, live run of
/// 2026-12-05; 10 passed, 11 undecided after 56 requests at exactly the target and 12 refuted
/// leave 10 to 11, virtual time in CI of 2026-12-07), the lower bound alone when it refuted none.
fn possible(capacity: &Value, side: &str) -> std::ops::RangeInclusive<u32> {
    let lower = capacity[side]["lower_bound"].as_f64().unwrap_or(0.0);
    let upper = capacity[side]["upper_bound"].as_f64();
    let highest = upper.map_or(lower, |upper| (upper - 1.0).max(lower));
    lower as u32..=highest as u32
}

/// Half the measured capacity of a comparison (at least one client).
fn half_of(capacity: &Value) -> f64 {
    let measured = capacity["measured"]["lower_bound"].as_f64().unwrap_or(0.0);
    (measured / 2.0).round().max(1.0)
}

/// One shape's capacity comparison and its medians at half the measured capacity, live and
/// predicted: the figures printed, what is outside the issue's bounds returned.
fn judge(
    name: &str,
    capacity: &Value,
    at_half: &AtHalf,
    (slo, repeatability): (f64, [f64; 3]),
) -> Vec<String> {
    print_figures(name, slo, capacity, at_half);
    let mut failures = Vec::new();
    let measured = possible(capacity, "measured");
    // At the server's speed in the check, or at calibration's: both are speeds this server
    // ran at within minutes of the live search.
    let predicted = [
        possible(capacity, "predicted_at_speed"),
        possible(capacity, "predicted"),
    ];
    let agree = predicted.iter().flat_map(Clone::clone).any(|p| {
        measured
            .clone()
            .any(|m| capacity_within(f64::from(p), f64::from(m)))
    });
    if !agree {
        failures.push(format!(
            "{name}: capacity {:?} predicted at the server's speed and {:?} at calibration's, \
             {measured:?} measured",
            predicted[0], predicted[1]
        ));
    }
    for (i, metric) in ["TTFT", "TPOT", "E2E"].iter().enumerate() {
        let (low, high) = at_half.range(i);
        let m = at_half.measured[i];
        let tolerance = MEDIAN_TOLERANCE + repeatability[i];
        if !m.admits_range((low, high), tolerance) {
            failures.push(format!(
                "{name}: {metric} p50 predicted {low:.1}–{high:.1} ms, measured {:.1} ms \
                 (the true median within {:.1}–{:.1} ms; tolerance {:.1} %)",
                m.value,
                m.low,
                m.high,
                tolerance * 100.0
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
    let (config, repeatability) = calibrate(&server, dir.path());
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
    let alone = shapes.map(|(_, requests)| medians(&live, &requests, (1.0, ALONE_REQUESTS))[2]);
    let slo = 3.0 * alone[0].max(alone[1]);
    let rescaled = dir.path().join("at-check.toml");
    let capacities = check_capacity(&server, &config, slo, &rescaled);
    assert_eq!(capacities.len(), shapes.len(), "{capacities:?}");
    // The calibrated configuration in virtual time (as `--check` runs it: seconds of CPU) at
    // the server's speed in the check, and again just before and just after each shape's
    // half-load run: the capacity searches take minutes, over which this machine's pace
    // moves by 10–25 %, and it moves within a run too.
    let at_check = strings(&["--virtual-time", "--sim-config", rescaled.to_str().unwrap()]);
    let speed_file = |index: usize| dir.path().join(format!("speed-{index}.toml"));
    let mut before = speed_now(&server, &config, &speed_file(0));
    let mut failures = Vec::new();
    for (index, ((name, requests), capacity)) in shapes.iter().zip(&capacities).enumerate() {
        let searched: CapacityShape = serde_json::from_value(capacity["shape"].clone()).unwrap();
        assert_eq!(&searched, requests, "{capacity}");
        let half = half_of(capacity);
        let journal = dir.path().join(format!("half-load-{index}"));
        let measured = measured_medians(&live, requests, half, &journal);
        let after = speed_now(&server, &config, &speed_file(index + 1));
        let speeds = [("just before", &before), ("just after", &after)];
        let at_half = AtHalf::predict((half, measured), requests, speeds, &at_check);
        failures.extend(judge(name, capacity, &at_half, (slo, repeatability)));
        before = after;
    }
    assert!(failures.is_empty(), "outside the tolerances: {failures:?}");
}

#[test]
fn the_range_of_a_median_of_21_is_the_6th_to_the_16th() {
    let median = Median::of((1..=21).rev().map(f64::from).collect()).unwrap();
    let expected = Median {
        value: 11.0,
        low: 6.0,
        high: 16.0,
    };
    assert_eq!(median, expected);
    assert!(median.admits(5.4, 0.1) && !median.admits(5.3, 0.1));
    assert!(median.admits(17.6, 0.1) && !median.admits(17.7, 0.1));
    assert!(Median::of(vec![1.0; 5]).is_none());
}
