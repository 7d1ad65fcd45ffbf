//! Micro-benchmarks of the simulator in virtual time (divan): one calibration probe replayed
//! on an engine built fresh, as `calibrate`'s fit does thousands of times per constant it
//! moves, on an accelerator whose KV pool holds millions of tokens. Run:
//! `cargo bench -p goodput-sim`.
#![allow(missing_docs, clippy::unwrap_used)]

use std::hint::black_box;

use divan::Bencher;
use divan::counter::ItemsCount;
use goodput_sim::SimConfig;
use goodput_sim::calibrate::{ProbeShape, predict};

fn main() {
    divan::main();
}

/// A small model on a large accelerator: a pool of about 150 000 blocks per engine.
fn config(replicas: u32) -> SimConfig {
    let json = format!(
        r#"{{"engine": {{"kind": "batching", "model": "llama-3.2-1b", "gpu": "h100",
            "max_num_seqs": 8, "max_model_len": 2048}}, "replicas": {replicas},
            "routing": "least-loaded"}}"#
    );
    serde_json::from_str(&json).unwrap()
}

/// The calibration sweep's queueing probe: twice the slots, 48 answer tokens each.
const PROBE: ProbeShape = ProbeShape {
    concurrency: 16,
    prompt_tokens: 71,
    output_tokens: 48,
    requests: 48,
};

#[divan::bench(args = [1, 2])]
fn probe_replay(bencher: Bencher, replicas: u32) {
    let config = config(replicas);
    bencher
        .counter(ItemsCount::new(PROBE.requests))
        .bench(|| predict(black_box(&config), black_box(&PROBE)));
}
