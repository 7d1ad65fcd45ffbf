//! A rate sweep against the roofline (batching) engine in virtual time: raw throughput keeps
//! rising toward saturation while goodput collapses, and the knee is reported.
#![allow(clippy::unwrap_used)]

mod support;

use goodput_core::config::{Arrival, LoadSpec, RunConfig, Warmup};
use goodput_core::decide::sweep::{SweepDimension, find_knee};
use goodput_core::metrics::Slo;
use goodput_core::report::StepReport;
use goodput_protocol::hardware::GpuSpec;
use goodput_sim::config::{BatchingConfig, EngineConfig, SimConfig};
use support::run_sim;

fn roofline_l40s() -> SimConfig {
    let engine = BatchingConfig {
        gpu: GpuSpec::preset("l40s").unwrap(),
        ..BatchingConfig::default()
    };
    SimConfig {
        engine: EngineConfig::Batching(engine),
        ..SimConfig::default()
    }
}

async fn step_at(rate: f64) -> StepReport {
    let config = RunConfig {
        load: LoadSpec::Open {
            rate_per_sec: rate,
            arrival: Arrival::Poisson,
            max_concurrency: None,
        },
        max_requests: None,
        duration: Some(std::time::Duration::from_secs(40)),
        warmup: Warmup::Duration(std::time::Duration::from_secs(10)),
        // The L40S decodes 8B in ~25 ms at low load (19 ms of weights at 0.85 of 864 GB/s,
        // 2.2 ms of vLLM step overhead), so a 30 ms TPOT bound collapses as batches grow.
        slo: Some(Slo::parse("ttft=1s,tpot=30ms").unwrap()),
        seed: 5,
        ..RunConfig::default()
    };
    run_sim(roofline_l40s(), config, 512, 64).await.step
}

#[tokio::test(start_paused = true)]
async fn goodput_collapses_near_saturation_while_throughput_keeps_rising() {
    let rates = [4.0, 6.0, 8.0, 9.0, 10.0, 11.0];
    let mut steps = Vec::new();
    for rate in rates {
        let step = step_at(rate).await;
        eprintln!(
            "rate {rate:>5}: completed {:>6.2}/s good {:>6.2}/s attained {:>5.3} ttft p99 {:>8.1} tpot p50 {:>6.1} e2e p50 {:>7.1} stable {}",
            step.throughput.requests_per_sec,
            step.goodput.requests_per_sec.unwrap(),
            step.goodput.attained_fraction.unwrap(),
            step.latency_ms.ttft.p99.unwrap(),
            step.latency_ms.tpot.p50.unwrap(),
            step.latency_ms.e2e.p50.unwrap(),
            step.stability.stable
        );
        steps.push(step);
    }
    let goodput: Vec<f64> = steps
        .iter()
        .map(|s| s.goodput.requests_per_sec.unwrap())
        .collect();
    let throughput: Vec<f64> = steps
        .iter()
        .map(|s| s.throughput.requests_per_sec)
        .collect();
    let peak = (0..steps.len())
        .max_by(|&a, &b| goodput[a].total_cmp(&goodput[b]))
        .unwrap();
    // A later, still stable step completes at least as much work while goodput has collapsed.
    let collapsed = (peak + 1..steps.len()).find(|&i| {
        steps[i].stability.stable
            && throughput[i] >= throughput[peak]
            && goodput[i] < 0.25 * goodput[peak]
    });
    assert!(
        collapsed.is_some(),
        "throughput {throughput:?}, goodput {goodput:?}"
    );
    let knee = find_knee(SweepDimension::Rate, &rates, &steps, 0.10).expect("a knee");
    assert!((6.0..=10.0).contains(&knee.load), "{knee:?}");
}
