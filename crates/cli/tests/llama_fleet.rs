//! A fleet of three real llama.cpp `llama-server`s with 1, 2 and 4 slots in one run: every
//! request is sent to one of them by least-outstanding routing, and each target's row of the
//! report — its completed requests and output tokens as the client counted them, and the
//! generated tokens its own `/metrics` counted over the run — equals what that server says on
//! its `/metrics`, read here independently of goodput.
#![allow(clippy::unwrap_used)]

#[path = "../../core/tests/llama_server/server.rs"]
#[allow(dead_code, unreachable_pub)]
mod server;
mod support;

use serde_json::Value;
use server::{LlamaServer, Model, Options};
use support::{goodput, ok};

const ANSWER: u64 = 8;

#[test]
fn three_replicas_of_different_slots_are_one_fleet_and_each_row_matches_its_server() {
    let slots = [1u32, 2, 4];
    let fleet: Vec<Options> = slots
        .iter()
        .map(|n| Options::new(Model::Tiny, *n))
        .collect();
    let servers = LlamaServer::start_fleet(&fleet);
    let before: Vec<f64> = servers
        .iter()
        .map(|s| s.metric("tokens_predicted_total"))
        .collect();
    let out = tempfile::tempdir().unwrap();
    let mut command = goodput();
    command.args(["run", "--quiet", "--json", "--route", "least-outstanding"]);
    for (server, n) in servers.iter().zip(slots) {
        command.args(["--target", &format!("np{n}={}", server.url())]);
    }
    let output = ok(command
        .args(["--concurrency", "7", "--requests", "63", "--warmup", "0"])
        .args([
            "--input-tokens",
            "16",
            "--output-tokens",
            &ANSWER.to_string(),
        ])
        .args(["--seed", "5", "--out"])
        .arg(out.path())
        .output()
        .unwrap());
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let rows = report["steps"][0]["targets"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 3, "{rows:?}");
    let mut completed = 0;
    for ((server, n), before) in servers.iter().zip(slots).zip(before) {
        let row = rows
            .iter()
            .find(|r| r["name"] == format!("np{n}"))
            .unwrap_or_else(|| panic!("no row np{n}: {rows:?}"));
        let done = row["requests"]["completed"].as_u64().unwrap();
        let output_tokens = row["tokens"]["output_total"].as_u64().unwrap();
        let predicted = server.metric("tokens_predicted_total") - before;
        eprintln!(
            "np{n}: {done} requests, {output_tokens} output tokens; its /metrics: {predicted} predicted"
        );
        assert_eq!(
            output_tokens as f64, predicted,
            "np{n}: client and server disagree"
        );
        assert_eq!(output_tokens, done * ANSWER, "np{n}: fixed-length answers");
        assert_eq!(row["server"]["generation_tokens"].as_f64(), Some(predicted));
        completed += done;
    }
    assert_eq!(completed, 63);
}
