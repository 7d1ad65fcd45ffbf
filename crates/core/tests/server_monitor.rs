//! `monitor` against the simulator under rising load, in virtual time: quiet while the
//! server keeps up, a growing queue flagged once arrivals outpace it; it stops by itself.
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use goodput_core::config::{Arrival, LoadSpec, RunConfig, Warmup};
use goodput_core::observe::monitor::{FLAG_QUEUE_GROWING, MonitorConfig, watch};
use goodput_core::observe::server::MetricsEndpoint;
use goodput_core::workload::SyntheticWorkload;
use goodput_sim::SimServer;
use goodput_sim::config::{BatchingConfig, EngineConfig, SimConfig};
use support::{in_memory_client, openai, run_with};
use tokio_util::sync::CancellationToken;

fn open(rate: f64, secs: u64) -> RunConfig {
    RunConfig {
        load: LoadSpec::Open {
            rate_per_sec: rate,
            arrival: Arrival::Poisson,
            max_concurrency: None,
        },
        max_requests: None,
        duration: Some(Duration::from_secs(secs)),
        warmup: Warmup::None,
        seed: 4,
        ..RunConfig::default()
    }
}

/// 20 s at 3 req/s, which the server keeps up with, then 20 s at 40 req/s, twice what it can do.
async fn rising_load(server: &SimServer) {
    let workload = Arc::new(SyntheticWorkload {
        input_tokens: 400,
        output_tokens: Some(120),
        seed: 2,
    });
    let model = server.model_name().to_string();
    for (rate, secs) in [(3.0, 20), (40.0, 20)] {
        let client = in_memory_client(server);
        let config = open(rate, secs);
        run_with(
            config,
            client,
            openai(&model),
            workload.clone(),
            CancellationToken::new(),
        )
        .await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_rising_load_is_flagged_as_a_growing_queue() {
    let server = SimServer::new(SimConfig {
        engine: EngineConfig::Batching(BatchingConfig {
            max_num_seqs: Some(16),
            kv_blocks_override: Some(1_500),
            ..BatchingConfig::default()
        }),
        ..SimConfig::default()
    })
    .unwrap();
    let endpoint = MetricsEndpoint::new(
        in_memory_client(&server),
        "/metrics",
        "http://sim.test/metrics",
        Duration::from_secs(5),
    );
    let config = MonitorConfig {
        interval: Duration::from_millis(500),
        window: Duration::from_secs(4),
        ..MonitorConfig::default()
    };
    let monitor = tokio::spawn(async move {
        let mut seen = 0;
        let rows = watch(
            &endpoint,
            &config,
            Some(Duration::from_secs(44)),
            CancellationToken::new(),
            |_| seen += 1,
        )
        .await;
        (rows, seen)
    });
    rising_load(&server).await;
    let (rows, seen) = monitor.await.unwrap();
    assert_eq!(rows.len(), seen);
    assert_eq!(rows.len(), 11, "44 s in rows of 4 s");
    assert!((rows.last().unwrap().end_secs - 44.0).abs() < 1e-6);
    let quiet: Vec<_> = rows.iter().filter(|r| r.end_secs <= 20.0).collect();
    assert!(quiet.iter().all(|r| r.flags.is_empty()), "{quiet:#?}");
    for row in &quiet[1..] {
        // Arrivals are estimated from completions plus the change in the system: ≈ 3/s.
        let arrivals = row.arrivals_per_sec.unwrap();
        assert!((1.0..6.0).contains(&arrivals), "{row:?}");
        assert!(row.waiting.unwrap() < 1.0);
    }
    let flagged: Vec<_> = rows
        .iter()
        .filter(|r| r.flags.iter().any(|f| f == FLAG_QUEUE_GROWING))
        .collect();
    assert!(!flagged.is_empty(), "{rows:#?}");
    let first = flagged[0];
    assert!(
        first.start_secs >= 20.0 && first.end_secs <= 36.0,
        "{first:?}"
    );
    assert!(first.arrivals_per_sec.unwrap() > 1.5 * first.completions_per_sec.unwrap());
    assert!(first.queue_growth_per_sec.unwrap() > 5.0, "{first:?}");
    assert!(first.kv_cache_usage.unwrap() > quiet[2].kv_cache_usage.unwrap());
}
