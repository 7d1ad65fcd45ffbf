//! A fleet behind one address: `goodput sim` with replicas or disaggregated pools names the
//! replica that took each request in its `x-sim-replica` header and serves per-replica
//! series at `/metrics`, so a client's fleet features (`--replica-header`) can be exercised.
#![allow(clippy::unwrap_used)]

mod support;

use goodput_sim::config::{DisaggregationConfig, Routing};
use goodput_sim::{SimConfig, spawn};
use serde_json::json;
use support::{fixed_config, post};

const LOOPBACK: ([u8; 4], u16) = ([127, 0, 0, 1], 0);

fn sample(text: &str, series: &str) -> String {
    let line = text
        .lines()
        .find(|line| line.starts_with(series))
        .unwrap_or_else(|| panic!("{series} not in\n{text}"));
    line.rsplit(' ').next().unwrap().to_string()
}

/// Sends `count` one-at-a-time completions of 5 tokens; the replica headers in order.
async fn replicas_named(config: SimConfig, count: usize) -> (Vec<String>, String) {
    let sim = spawn(config, LOOPBACK.into()).await.unwrap();
    let body = json!({"model": "sim-fixed", "prompt": "hello there", "max_tokens": 5});
    let mut named = Vec::new();
    for _ in 0..count {
        let reply = post(sim.addr(), "/v1/completions", &body).await;
        assert_eq!(reply.status, 200, "{}", reply.text());
        assert_eq!(reply.json()["usage"]["completion_tokens"], 5);
        named.push(reply.header("x-sim-replica").unwrap().to_string());
    }
    let metrics = support::call(sim.addr(), hyper::Method::GET, "/metrics", None).await;
    (named, metrics.text())
}

#[tokio::test]
async fn round_robin_replicas_are_named_in_turn_and_counted() {
    let config = SimConfig {
        replicas: 3,
        routing: Routing::RoundRobin,
        ..fixed_config(20, 2)
    };
    let (named, metrics) = replicas_named(config, 4).await;
    assert_eq!(named, ["0", "1", "2", "0"]);
    let routed = "goodput_sim:replica_requests_routed_total{model_name=\"sim-fixed\",replica=";
    assert_eq!(sample(&metrics, &format!("{routed}\"0\"}}")), "2");
    assert_eq!(sample(&metrics, &format!("{routed}\"2\"}}")), "1");
    let running = "goodput_sim:replica_requests_running{model_name=\"sim-fixed\",replica=\"1\"}";
    assert_eq!(sample(&metrics, running), "0");
}

#[tokio::test]
async fn a_disaggregated_fleet_names_its_prefill_replicas_and_lists_every_replica() {
    let config = SimConfig {
        disaggregation: Some(DisaggregationConfig {
            prefill_replicas: 2,
            decode_replicas: 2,
            ..DisaggregationConfig::default()
        }),
        ..fixed_config(20, 2)
    };
    let (named, metrics) = replicas_named(config, 4).await;
    assert_eq!(named, ["0", "1", "0", "1"]);
    // Prefill replicas 0–1, decode replicas 2–3: all four listed, idle once the answers end.
    for replica in 0..4 {
        let series = format!(
            "goodput_sim:replica_requests_running{{model_name=\"sim-fixed\",replica=\"{replica}\"}}"
        );
        assert_eq!(sample(&metrics, &series), "0");
    }
}
