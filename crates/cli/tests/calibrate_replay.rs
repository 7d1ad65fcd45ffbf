//! The fit's replay of a probe (`goodput_sim::calibrate::predict`) against what goodput's own
//! client reports for the same shape on the same engine (`goodput run --virtual-time`): the
//! fit compares the replay with a client's measurement, so both must take the same medians and
//! tails — nearest rank. The shapes include the edge where the definitions part: twice the
//! slots with one request a client, half the requests served at once and half queued.
#![allow(clippy::unwrap_used)]

mod support;

use goodput_sim::SimConfig;
use goodput_sim::calibrate::{ProbeShape, predict};
use serde_json::Value;
use support::{goodput, ok};

/// A batching engine of eight sequences, prompts counted in words (as the client sends them).
const SIM: &str = r#"{"engine": {"kind": "batching", "model": "llama-3.2-1b", "gpu": "h100",
    "max_num_seqs": 8, "max_model_len": 2048}, "prompt_tokenizer": "words"}"#;

/// The client's report of `requests` requests of `input` → `output` tokens from `concurrency`
/// closed-loop clients, nothing discarded as warm-up.
fn client_run(config: &std::path::Path, shape: (u32, u32, u32, u32)) -> Value {
    let (concurrency, requests, input, output) = shape;
    let out = ok(goodput()
        .args(["run", "--no-live", "--virtual-time", "--sim-config"])
        .arg(config)
        .args(["--concurrency", &concurrency.to_string()])
        .args(["--requests", &requests.to_string(), "--warmup", "0"])
        .args(["--input-tokens", &input.to_string()])
        .args(["--output-tokens", &output.to_string(), "--json"])
        .output()
        .unwrap());
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_fits_replay_takes_the_medians_and_tails_the_client_reports() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sim.json");
    std::fs::write(&path, SIM).unwrap();
    let config = SimConfig::from_file(&path).unwrap();
    // (clients, requests, prompt, answer): one round at twice the slots (8 served at once, 8
    // queued: the median the first wave's last), two rounds, within the slots, an odd count.
    let shapes = [
        (16, 16, 64, 48),
        (16, 32, 64, 48),
        (8, 24, 256, 24),
        (12, 15, 32, 96),
    ];
    for shape in shapes {
        let report = client_run(&path, shape);
        let step = &report["steps"][0];
        assert_eq!(step["requests"]["completed"], shape.1, "{step}");
        let prompt = step["tokens"]["input_per_request"]["mean"]
            .as_f64()
            .unwrap();
        assert_eq!(prompt.fract(), 0.0, "every prompt counted alike: {prompt}");
        let predicted = predict(
            &config,
            &ProbeShape {
                concurrency: shape.0,
                prompt_tokens: prompt as u32,
                output_tokens: shape.3,
                requests: shape.1,
            },
        );
        let latency = &step["latency_ms"];
        let replayed = [
            ("ttft", predicted.ttft, predicted.tails[0]),
            ("tpot", predicted.tpot, predicted.tails[1]),
            ("e2e", predicted.e2e, predicted.tails[2]),
        ];
        for (metric, p50, tail) in replayed {
            for (q, ms) in [("p50", p50), ("p95", tail.p95), ("p99", tail.p99)] {
                let client = latency[metric][q].as_f64().unwrap();
                // The client's histogram keeps 3 significant digits and microseconds.
                let close = (ms * 1e3 - client).abs() <= client * 1.5e-3 + 2e-3;
                assert!(
                    close,
                    "{shape:?} {metric} {q}: replay {:.4} ms, client {client} ms",
                    ms * 1e3
                );
            }
        }
    }
}
