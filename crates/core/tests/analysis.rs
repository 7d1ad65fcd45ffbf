//! Derived figures checked against arithmetic done by hand: utilisation of Llama-3.1-8B on one
//! H100, speculative decoding from counters and from chunk sizes, cost and energy.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use goodput_core::analysis::{
    CostInputs, Hardware, SpeculativeInputs, cost::cost, speculative::speculative,
    utilisation::utilisation,
};
use goodput_core::config::LoadSpec;
use goodput_core::metrics::StepAggregator;
use goodput_core::observe::server::{ClientTally, ServerReport};
use goodput_core::report::{LoadReport, StepReport};
use goodput_protocol::hardware::{GpuSpec, ModelSpec};

/// A step measuring 10,000 input and 2,000 output tokens/s, 1,000-token prompts, 200-token
/// answers and a mean TPOT of 20 ms.
fn step() -> StepReport {
    let mut step = StepAggregator::new(None, Duration::from_secs(1))
        .report(LoadReport::from(&LoadSpec::Closed { concurrency: 1 }));
    step.throughput.requests_per_sec = 10.0;
    step.throughput.input_tokens_per_sec = 10_000.0;
    step.throughput.output_tokens_per_sec = 2_000.0;
    step.throughput.total_tokens_per_sec = 12_000.0;
    step.tokens.input_per_request.mean = Some(1_000.0);
    step.tokens.output_per_request.mean = Some(200.0);
    step.latency_ms.tpot.mean = Some(20.0);
    step
}

fn llama_8b_on_h100() -> Hardware {
    Hardware {
        model: ModelSpec::preset("llama-3.1-8b").unwrap(),
        gpu: GpuSpec::preset("h100").unwrap(),
        accelerators: 1,
        tensor_parallel: 1,
        gpu_memory_utilization: 0.9,
    }
}

#[track_caller]
fn close(actual: Option<f64>, expected: f64) {
    let actual = actual.expect("a value");
    assert!(
        (actual - expected).abs() <= 1e-9 * expected.abs().max(1.0),
        "{actual} != {expected}"
    );
}

#[test]
fn utilisation_of_llama_8b_on_one_h100_matches_the_hand_computation() {
    let u = utilisation(&llama_8b_on_h100(), &step());
    // Per layer: q 4096·4096 + k,v 2·4096·1024 + o 4096·4096 + MLP 3·4096·14336 + 2 norms
    // = 218,112,000; 32 layers + embedding and head 2·128,256·4096 + final norm 4096.
    let params = 32.0 * 218_112_000.0 + 2.0 * 128_256.0 * 4096.0 + 4096.0;
    assert_eq!(params, 8_030_261_248.0);
    close(u.weight_bytes.value, 16_060_522_496.0);
    // 2 · 32 layers · 8 KV heads · 128 · 2 bytes.
    close(u.kv_bytes_per_token.value, 131_072.0);
    // (80 GiB · 0.9 − 5.5 − 0.15 GiB) − weights, over 128 KiB per token: 421,007.3 → 421,007.
    let pool = (80.0 * 0.9 - 5.5 - 0.15) * 1024f64.powi(3) - 16_060_522_496.0;
    assert_eq!((pool / 131_072.0).floor(), 421_007.0);
    close(u.kv_capacity_tokens.value, 421_007.0);
    close(u.max_sequences.value, 421_007.0 / 1_200.0);
    // MFU = 2 · 8,030,261,248 · 12,000 tok/s / 989.5 TFLOP/s = 0.19477.
    close(u.mfu.value, 192_726_269_952_000.0 / 989.5e12);
    // Streamed weights exclude the input embedding: (params − 525,336,576) · 2 bytes.
    let streamed = 15_009_849_344.0;
    // Mean context while decoding: 1,000 + 200 / 2 = 1,100 tokens.
    // HBM = (streamed / 0.020 s + 2,000 tok/s · 1,100 · 131,072 B) / 3.35 TB/s = 0.31011.
    close(
        u.hbm_bandwidth_utilisation.value,
        (streamed / 0.020 + 2_000.0 * 1_100.0 * 131_072.0) / 3.35e12,
    );
    // TPOT floor = (streamed + 1,100 · 131,072) / (3.35 TB/s · 0.8) = 5.6545 ms.
    close(
        u.tpot_floor_ms.value,
        1000.0 * (streamed + 1_100.0 * 131_072.0) / (3.35e12 * 0.8),
    );
    assert!((u.tpot_floor_ms.value.unwrap() - 5.6545).abs() < 1e-4);
    assert_eq!(u.mfu.inputs["params"], params);
    assert!(u.mfu.formula.contains("2 · params"));
}

#[test]
fn tensor_parallel_replicas_scale_capacity_and_the_floor() {
    let mut hardware = llama_8b_on_h100();
    hardware.model = ModelSpec::preset("llama-3.1-70b").unwrap();
    hardware.accelerators = 8;
    hardware.tensor_parallel = 4;
    hardware.validate().unwrap();
    let u = utilisation(&hardware, &step());
    assert_eq!(u.replicas, 2);
    let one = hardware.deployment().kv_capacity_tokens() as f64;
    close(u.kv_capacity_tokens.value, 2.0 * one);
    // MFU is over all 8 accelerators.
    let params = hardware.model.params();
    close(u.mfu.value, 2.0 * params * 12_000.0 / (989.5e12 * 8.0));
    hardware.accelerators = 6;
    assert!(
        hardware
            .validate()
            .unwrap_err()
            .to_string()
            .contains("--tp")
    );
}

#[test]
fn missing_measurements_leave_figures_null_with_the_reason() {
    let mut step = step();
    step.latency_ms.tpot.mean = None;
    let u = utilisation(&llama_8b_on_h100(), &step);
    assert_eq!(u.hbm_bandwidth_utilisation.value, None);
    assert_eq!(u.hbm_bandwidth_utilisation.missing, vec!["tpot_secs"]);
    assert!(u.mfu.value.is_some());
}

#[test]
fn speculative_figures_from_counters_and_from_chunks() {
    let inputs = SpeculativeInputs {
        num_draft_tokens: Some(3),
        draft_cost_ratio: Some(0.05),
    };
    let mut server_step = step();
    let mut server = ServerReport {
        metrics_url: "http://h/metrics".into(),
        flavour: Some("vllm".into()),
        interval_ms: 1000.0,
        scrapes: 3,
        failed_scrapes: 0,
        counter_resets: 0,
        measurement: Default::default(),
        run_totals: Default::default(),
        agreement: Default::default(),
        series: Vec::new(),
    };
    server.measurement.speculative.drafts = Some(1_000.0);
    server.measurement.speculative.draft_tokens = Some(3_000.0);
    server.measurement.speculative.accepted_tokens = Some(1_800.0);
    server_step.server = Some(server);
    let tally = ClientTally {
        chunks_after_first: 1_000,
        tokens_after_first: 2_800,
        ..ClientTally::default()
    };
    let from_server = speculative(server_step.server.as_ref(), &tally, &inputs).unwrap();
    assert_eq!(from_server.source, "server_counters");
    close(from_server.num_draft_tokens.value, 3.0);
    close(from_server.acceptance_rate.value, 0.6);
    close(from_server.mean_accepted_length.value, 2.8);
    // (1.8 + 1) / (3 · 0.05 + 1) = 2.4348.
    close(from_server.theoretical_speedup.value, 2.8 / 1.15);

    let from_chunks = speculative(None, &tally, &inputs).unwrap();
    assert_eq!(from_chunks.source, "chunks");
    close(from_chunks.mean_accepted_length.value, 2.8);
    close(from_chunks.acceptance_rate.value, 0.6);
    close(from_chunks.theoretical_speedup.value, 2.8 / 1.15);

    // Nothing shows speculation: no section.
    assert!(speculative(None, &tally, &SpeculativeInputs::default()).is_none());
    // Without the draft cost the speedup is null and says why.
    let no_cost = SpeculativeInputs {
        draft_cost_ratio: None,
        ..inputs
    };
    let report = speculative(None, &tally, &no_cost).unwrap();
    assert_eq!(report.theoretical_speedup.missing, vec!["draft_cost_ratio"]);
}

#[test]
fn cost_and_energy_per_unit_of_work() {
    let mut step = step();
    step.throughput.requests_per_sec = 4.0;
    step.throughput.output_tokens_per_sec = 1_000.0;
    step.throughput.total_tokens_per_sec = 5_000.0;
    let inputs = CostInputs {
        accelerators: Some(2),
        gpu_hour_cost: Some(2.5),
        watts: Some(700.0),
    };
    let c = cost(&inputs, &step).unwrap();
    close(c.cost_per_hour.value, 5.0);
    // 5 per hour = 1/720 per second; at 4 req/s, 1,000 requests take 250 s.
    close(c.cost_per_1k_requests.value, 5.0 / 3600.0 / 4.0 * 1000.0);
    close(
        c.cost_per_million_output_tokens.value,
        5.0 / 3600.0 / 1000.0 * 1e6,
    );
    close(
        c.cost_per_million_total_tokens.value,
        5.0 / 3600.0 / 5000.0 * 1e6,
    );
    close(c.power_watts.value, 1400.0);
    close(c.energy_per_output_token_joules.value, 1.4);
    close(c.kwh_per_million_output_tokens.value, 1.4 * 1e6 / 3.6e6);
    close(c.kwh_per_million_total_tokens.value, 0.28 * 1e6 / 3.6e6);
    assert_eq!(c.power_source.as_deref(), Some("--watts"));
    // No price and no power: no section; price only: energy figures null.
    assert!(cost(&CostInputs::default(), &step).is_none());
    let price_only = CostInputs {
        watts: None,
        ..inputs
    };
    let c = cost(&price_only, &step).unwrap();
    assert!(c.power_watts.value.is_none() && c.cost_per_hour.value.is_some());
}
