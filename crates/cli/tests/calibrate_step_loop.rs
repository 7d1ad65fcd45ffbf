//! `goodput calibrate` finds the step budget and the queue order of a server that reports
//! neither, against `support::step_server`'s exact-timing server: steps of 4 ms plus 0.25 ms a
//! token, up to [`BUDGET`] tokens a step and [`SLOTS`] sequences, a prompt longer than what a
//! step has left cut into chunks over several steps. The probe must read the budget from the
//! decoding stream's gaps (and size the prompt by the context the model card gives, as vLLM's
//! does); a server that never slows a stream (each request timed alone, `calibrate_passes`)
//! leaves it unknown. The queue-order probe must read first come first served, or shortest
//! prompt first. Serving vLLM's info gauges on `/metrics`, its slots, step budget and KV cache
//! must be read from them instead.
#![allow(clippy::unwrap_used)]

mod support;

use serde_json::Value;
use support::calibrate_json;
use support::step_server::{self, Order, Spec};

/// Tokens one step carries at most.
const BUDGET: u32 = 384;
/// Sequences at once.
const SLOTS: usize = 4;
/// Context of a sequence, as vLLM's model card says it (`max_model_len`).
const CONTEXT: u32 = 2048;

/// A server of steps of 4 ms and 0.25 ms a token, admitting in `order` and answering
/// `/metrics` with `metrics` (none: 404); its `/v1` URL.
fn server(order: Order, metrics: Option<&'static str>) -> String {
    step_server::start(Spec {
        step_ms: 4.0,
        token_ms: 0.25,
        budget: BUDGET,
        slots: SLOTS,
        context: CONTEXT,
        order,
        metrics,
    })
}

/// `goodput calibrate` (one pass, `seed`) against a server admitting in `order` and serving
/// `metrics`: its facts, its log and the configuration it wrote.
fn calibrated(order: Order, metrics: Option<&'static str>, seed: &str) -> (Value, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let url = server(order, metrics);
    let out = dir.path().join("calibrated.toml");
    let (report, log) = calibrate_json(&url, (seed, "1"), &out);
    let config = std::fs::read_to_string(&out).unwrap();
    (report["facts"].clone(), log, config)
}

#[test]
fn the_step_budget_is_read_from_a_stream_slowed_by_a_chunked_prompt() {
    let (facts, log, config) = calibrated(Order::Fifo, None, "5");
    assert_eq!(facts["slots"], SLOTS, "{facts}\n{log}");
    assert_eq!(facts["context_per_slot"], CONTEXT, "{facts}");
    // The probe's prompt (1,686 words: 85 % of the context less 64) took four steps of 383
    // prompt tokens and one of 154.
    // No power of two lies within what five steps allow (282–422), so the budget is the
    // estimate from the gaps' growth: within 3 % on a loaded machine (its wake-ups late by
    // up to a few ms on 100-ms chunks).
    let read = facts["batch_tokens"].as_u64().unwrap();
    assert!(
        read.abs_diff(u64::from(BUDGET)) * 100 <= 3 * u64::from(BUDGET),
        "{facts}\n{log}"
    );
    let line = log.lines().find(|l| l.starts_with("step budget:")).unwrap();
    assert!(
        line.contains("1686 tokens as the server counted them"),
        "{line}"
    );
    assert!(
        config.contains(&format!("max_num_batched_tokens = {read}\n")),
        "{config}"
    );
    // First come first served: read, and the engine's default (not written).
    assert_eq!(facts["queue_order"], "fifo", "{facts}\n{log}");
    assert!(!config.contains("queue_order"), "{config}");
}

#[test]
fn a_server_that_takes_the_shortest_prompt_first_is_read_so() {
    let (facts, log, config) = calibrated(Order::ShortestPrompt, None, "6");
    assert_eq!(facts["queue_order"], "shortest-prompt", "{facts}\n{log}");
    let line = log.lines().find(|l| l.starts_with("queue order:")).unwrap();
    // The queued requests' prompts rank 1 3 0 2, then 2 0 3 1 (shortest 0).
    assert!(
        line.contains("served 2 0 3 1, then 1 3 0 2: shortest prompt first"),
        "{line}"
    );
    assert!(
        config.contains("queue_order = \"shortest-prompt\"\n"),
        "{config}"
    );
}

/// vLLM's info gauges for this server: its scheduler's limits, and a KV cache of 200 blocks of
/// 16 tokens (less than its four slots' contexts: a vLLM server preempts when it runs out).
const VLLM_METRICS: &str = "\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 0.0
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\",enable_prefix_caching=\"True\",\
engine=\"0\",num_cpu_blocks=\"None\",num_gpu_blocks=\"200\"} 1.0
# TYPE vllm:vllm_config_info gauge
vllm:vllm_config_info{scheduler_config_max_num_batched_tokens=\"384\",\
scheduler_config_max_num_seqs=\"4\"} 1.0
";

#[test]
fn a_vllm_servers_limits_are_read_from_its_metrics() {
    let (facts, log, config) = calibrated(Order::Fifo, Some(VLLM_METRICS), "7");
    // Stated, so neither measured: no waves, no step-budget probe.
    assert_eq!(facts["slots"], SLOTS, "{facts}\n{log}");
    assert_eq!(facts["batch_tokens"], BUDGET, "{facts}");
    assert!(!log.contains("batch limit:"), "{log}");
    assert!(!log.contains("step budget:"), "{log}");
    assert_eq!(facts["engine"], "vllm", "{facts}");
    assert_eq!(facts["kv_tokens"], 3200, "{facts}");
    assert_eq!(facts["prefix_caching"], true, "{facts}");
    let sources = facts["sources"].to_string();
    assert!(
        sources.contains(
            "/metrics (vllm: max_num_seqs, max_num_batched_tokens, KV cache, prefix caching)"
        ),
        "{sources}"
    );
    // The stated slots are exact: the queue-order probe runs.
    assert_eq!(facts["queue_order"], "fifo", "{facts}\n{log}");
    for line in [
        "max_num_seqs = 4\n",
        "max_num_batched_tokens = 384\n",
        // 3,200 tokens in blocks of 16, and one.
        "kv_blocks_override = 201\n",
        "prefix_caching = true\n",
        "policy = \"vllm\"\n",
    ] {
        assert!(config.contains(line), "{line}: {config}");
    }
}
