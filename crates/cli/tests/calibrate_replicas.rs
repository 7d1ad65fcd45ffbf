//! `goodput calibrate` against a server of two data-parallel engines behind one endpoint: the
//! simulator served with `replicas = 2` states each engine's KV cache as vLLM does (one
//! `vllm:cache_config_info` sample per `engine` label). Calibrate counts the engines, reads the
//! deployment's cache as their sum and finds its sequences with the waves; the configuration
//! runs two replicas with a share each, and `calibrate --check` replays held-out shapes on the
//! server and on that configuration.
#![allow(clippy::unwrap_used)]

mod support;

use serde_json::Value;
use support::sim_process::Sim;
use support::{goodput, ok};

/// Two engines of four sequences each, least-loaded behind one endpoint (vLLM's API server
/// sends a request to the engine with the least work), a small model on a fast accelerator.
const SIM: &str = r#"{"engine": {"kind": "batching", "model": "llama-3.2-1b", "gpu": "h100",
    "max_num_seqs": 4, "max_model_len": 2048},
    "replicas": 2, "routing": "least-loaded", "prompt_tokenizer": "words"}"#;

#[test]
fn two_engines_behind_one_endpoint_are_calibrated_as_two_replicas() {
    let dir = tempfile::tempdir().unwrap();
    let served = dir.path().join("sim.json");
    std::fs::write(&served, SIM).unwrap();
    let sim = Sim::start(&served, &[]);
    let config = dir.path().join("calibrated.toml");
    calibrate(&sim.url, &served, &config);
    check(&sim.url, &config);
}

/// Calibrates the two-engine server into `config`: two replicas of one engine's share each.
fn calibrate(url: &str, served: &std::path::Path, config: &std::path::Path) {
    let out = ok(goodput()
        .args(["calibrate", "--target", url, "--seed", "3", "--passes", "1"])
        .args(["--json", "--out", config.to_str().unwrap()])
        .output()
        .unwrap());
    let fit: Value = serde_json::from_slice(&out.stdout).unwrap();
    let facts = &fit["facts"];
    let server = goodput_sim::SimConfig::from_file(served).unwrap();
    let goodput_sim::EngineConfig::Batching(engine) = &server.engine else {
        panic!("{server:?}")
    };
    let per_engine = engine.kv_blocks() * u64::from(engine.block_size);
    assert_eq!(facts["engines"], 2, "{facts}");
    assert_eq!(facts["kv_tokens"].as_u64(), Some(2 * per_engine), "{facts}");
    assert_eq!(
        facts["slots"], 8,
        "the waves find both engines' sequences: {facts}"
    );
    let sources = facts["sources"].to_string();
    assert!(
        sources.contains("2 data-parallel engines, their caches and sequences summed"),
        "{sources}"
    );

    let calibrated = goodput_sim::SimConfig::from_file(config).unwrap();
    assert_eq!(calibrated.replicas, 2);
    assert_eq!(calibrated.routing.name(), "least-loaded");
    let goodput_sim::EngineConfig::Batching(replica) = &calibrated.engine else {
        panic!("{calibrated:?}")
    };
    assert_eq!(replica.max_num_seqs, Some(4));
    assert_eq!(
        replica.kv_blocks_override,
        Some(per_engine.div_ceil(16) + 1),
        "each replica one engine's pool"
    );
}

/// `calibrate --check` of `config` on the server: the held-out shapes fill every engine's
/// slots and queue beyond them, and the replicas predict them.
fn check(url: &str, config: &std::path::Path) {
    let out = ok(goodput()
        .args(["calibrate", "--target", url, "--seed", "5", "--check"])
        .arg(config)
        .arg("--json")
        .output()
        .unwrap());
    let check: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = check["held_out"].as_array().unwrap();
    assert_eq!(rows.len(), 3, "{check}");
    let concurrency: Vec<u64> = rows
        .iter()
        .map(|row| row["measured"]["probe"]["concurrency"].as_u64().unwrap())
        .collect();
    assert_eq!(
        concurrency,
        [8, 8, 16],
        "the held-out shapes fill both engines' slots, then queue beyond them"
    );
    for row in rows {
        for figure in ["e2e", "requests_per_sec"] {
            let measured = row["measured"][figure].as_f64().unwrap();
            let predicted = row["predicted"][figure].as_f64().unwrap();
            eprintln!(
                "{}: {figure} measured {measured:.4}, predicted {predicted:.4} ({:+.1} %)",
                row["measured"]["probe"],
                (predicted / measured - 1.0) * 100.0
            );
            assert!(
                (predicted / measured - 1.0).abs() < 0.15,
                "{figure} off by more than 15 %: {row}"
            );
        }
    }
}
