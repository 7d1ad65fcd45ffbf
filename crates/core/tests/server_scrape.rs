//! Scraping the simulator's `/metrics` during runs, in virtual time over in-memory
//! connections: the KV-usage and waiting-queue series rise with load, the server's token
//! counters agree with the client's totals within 1 %, and bad metrics bodies are survived.
#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use goodput_core::config::{Arrival, LoadSpec, RunConfig, Warmup};
use goodput_core::observe::server::{
    ClientTally, MetricsEndpoint, ScrapeHeader, ScrapeLog, Scraper, ServerInputs, ServerReport,
    summarise,
};
use goodput_core::report::StepReport;
use goodput_core::workload::SyntheticWorkload;
use goodput_sim::SimServer;
use goodput_sim::config::{BatchingConfig, EngineConfig, SimConfig};
use support::{in_memory_client, openai, run_with};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// 8B on H100 with a small KV pool (1,500 blocks of 16 = 24,000 tokens) and at most 16
/// sequences, so moderate load fills the cache and builds a queue.
fn small_server() -> SimConfig {
    SimConfig {
        engine: EngineConfig::Batching(BatchingConfig {
            max_num_seqs: Some(16),
            kv_blocks_override: Some(1_500),
            ..BatchingConfig::default()
        }),
        seed: 3,
        ..SimConfig::default()
    }
}

fn open(rate: f64, duration_secs: u64) -> RunConfig {
    RunConfig {
        load: LoadSpec::Open {
            rate_per_sec: rate,
            arrival: Arrival::Poisson,
            max_concurrency: None,
        },
        max_requests: None,
        duration: Some(Duration::from_secs(duration_secs)),
        warmup: Warmup::None,
        seed: 11,
        ..RunConfig::default()
    }
}

/// What a scraped run produced.
struct Scraped {
    step: StepReport,
    server: ServerReport,
    tally: ClientTally,
}

/// Runs `config` with prompts of `input` and answers of `output` tokens against a fresh
/// simulator while scraping it every 500 ms.
async fn scraped_run(sim: SimConfig, config: RunConfig, input: u32, output: u32) -> Scraped {
    let server = SimServer::new(sim).unwrap();
    let endpoint = MetricsEndpoint::new(
        in_memory_client(&server),
        "/metrics",
        "http://sim.test/metrics",
        Duration::from_secs(5),
    );
    let probe = endpoint.scrape(None).await;
    assert!(probe.is_usable(), "{:?}", probe.problem);
    let interval = Duration::from_millis(500);
    let scraper = Scraper::spawn(endpoint, interval, Instant::now(), vec![probe], None);
    let workload = Arc::new(SyntheticWorkload {
        input_tokens: input,
        output_tokens: Some(output),
        seed: 5,
    });
    let window = config.window;
    let client = in_memory_client(&server);
    let model = openai(server.model_name());
    let result = run_with(config, client, model, workload, CancellationToken::new()).await;
    let log: ScrapeLog = scraper.finish().await;
    let mut tally = ClientTally::default();
    for record in &result.records {
        tally.add(record);
    }
    let header = ScrapeHeader {
        metrics_url: "http://sim.test/metrics".into(),
        interval_ms: 500.0,
    };
    let (report, warnings) = summarise(ServerInputs {
        header: &header,
        log: &log,
        step: &result.step,
        window,
        tally: &tally,
    });
    assert!(warnings.is_empty(), "{warnings:?}");
    Scraped {
        step: result.step,
        server: report,
        tally,
    }
}

#[tokio::test(start_paused = true)]
async fn kv_usage_and_the_waiting_queue_rise_with_load_and_counters_match_the_client() {
    let light_run = scraped_run(small_server(), open(2.0, 20), 400, 120).await;
    let heavy_run = scraped_run(small_server(), open(40.0, 20), 400, 120).await;
    let (light_step, light) = (&light_run.step, &light_run.server);
    let (heavy_step, heavy) = (&heavy_run.step, &heavy_run.server);
    assert_eq!(heavy.flavour.as_deref(), Some("vllm"));
    assert!(heavy.scrapes >= 40, "{}", heavy.scrapes);
    assert_eq!(heavy.failed_scrapes, 0);

    // Load raises KV usage and the server's queue.
    let (light_m, heavy_m) = (&light.measurement, &heavy.measurement);
    let light_kv = light_m.kv_cache_usage.mean.unwrap();
    let heavy_kv = heavy_m.kv_cache_usage.mean.unwrap();
    assert!(heavy_kv > 2.0 * light_kv, "kv {light_kv} → {heavy_kv}");
    let light_waiting = light_m.waiting.mean.unwrap();
    let heavy_waiting = heavy_m.waiting.mean.unwrap();
    assert!(light_waiting < 1.0, "{light_waiting}");
    assert!(heavy_waiting > 10.0, "{heavy_waiting}");
    assert!(heavy_m.running.max.unwrap() <= 16.0);
    assert!(!light_step.stability.reason.is_empty() && !heavy_step.stability.stable);

    // Within the overloaded run the waiting series climbs while requests arrive: the last
    // windows of the arrival span hold more than the first ones (then the queue drains).
    assert_eq!(heavy.series.len(), heavy_step.windows.len());
    let arrival_end = heavy_step.window_start_secs + heavy_step.duration_secs;
    let arriving = heavy
        .series
        .iter()
        .filter(|w| w.start_secs + 1.0 <= arrival_end);
    let waiting: Vec<f64> = arriving.clone().filter_map(|w| w.waiting).collect();
    assert!(waiting.len() >= 18, "{waiting:?}");
    let early = waiting[..3].iter().sum::<f64>() / 3.0;
    let late = waiting[waiting.len() - 3..].iter().sum::<f64>() / 3.0;
    assert!(late > early + 20.0, "waiting {early} → {late}: {waiting:?}");
    let kv: Vec<f64> = arriving.filter_map(|w| w.kv_cache_usage).collect();
    assert!(kv[kv.len() / 2] > kv[0], "{kv:?}");

    // The server's counters over the run equal what the client received, within 1 %.
    for server in [light, heavy] {
        let agreement = &server.agreement;
        let output = agreement.output_ratio.unwrap();
        let input = agreement.input_ratio.unwrap();
        assert!((output - 1.0).abs() < 0.01, "{agreement:?}");
        assert!((input - 1.0).abs() < 0.01, "{agreement:?}");
        assert!(agreement.client_output_tokens > 1000);
    }
    assert_interval_figures_match_the_client(light_step, light);
}

/// At light load (steady state, no queue) the server's rates and latencies over the
/// measurement interval match the client's.
fn assert_interval_figures_match_the_client(step: &StepReport, server: &ServerReport) {
    let m = &server.measurement;
    let server_rate = m.generation_tokens_per_sec.unwrap();
    let client_rate = step.throughput.output_tokens_per_sec;
    assert!(
        (server_rate / client_rate - 1.0).abs() < 0.15,
        "{server_rate} vs {client_rate}"
    );
    // Server-side histograms were differenced: the finished requests are in the E2E count.
    let e2e = &m.latency_ms.e2e;
    assert!(e2e.count.unwrap() > 20.0, "{e2e:?}");
    // Its median is a bucket, not an invented value: the client's median (from the schedule,
    // so at least the server's) lies above the bucket's lower bound.
    let p50 = e2e.p50.unwrap();
    assert!(p50.at_most_ms.unwrap() > p50.above_ms, "{p50:?}");
    assert!(p50.above_ms <= step.latency_ms.e2e.p50.unwrap(), "{p50:?}");
    // The server's TTFT starts at its arrival, after the client's send.
    assert!(m.latency_ms.ttft.mean.unwrap() < step.latency_ms.ttft.mean.unwrap());
}

#[tokio::test(start_paused = true)]
async fn speculative_decoding_is_read_from_the_server_and_agrees_with_chunk_sizes() {
    use goodput_core::analysis::SpeculativeInputs;
    use goodput_core::analysis::speculative::speculative;
    use goodput_sim::config::SpeculativeConfig;

    let sim = SimConfig {
        engine: EngineConfig::Batching(BatchingConfig {
            speculative: Some(SpeculativeConfig {
                acceptance: vec![0.8, 0.6, 0.4],
                draft_cost_ratio: 0.05,
            }),
            ..BatchingConfig::default()
        }),
        seed: 9,
        ..SimConfig::default()
    };
    let config = RunConfig {
        load: LoadSpec::Closed { concurrency: 8 },
        max_requests: Some(160),
        warmup: Warmup::None,
        ..RunConfig::default()
    };
    let Scraped { server, tally, .. } = scraped_run(sim, config, 200, 200).await;
    let inputs = SpeculativeInputs {
        num_draft_tokens: Some(3),
        draft_cost_ratio: Some(0.05),
    };
    let server_side = speculative(Some(&server), &tally, &inputs).unwrap();
    assert_eq!(server_side.source, "server_counters");
    // Expected tokens per step 1 + 0.8 + 0.8·0.6 + 0.8·0.6·0.4 = 2.472; acceptance 1.472 / 3.
    let length = server_side.mean_accepted_length.value.unwrap();
    let rate = server_side.acceptance_rate.value.unwrap();
    let k = server_side.num_draft_tokens.value.unwrap();
    assert!((length - 2.472).abs() < 0.06, "{length}");
    assert!((rate - 1.472 / 3.0).abs() < 0.03, "{rate}");
    assert!((2.9..=3.0).contains(&k), "{k}");
    let speedup = server_side.theoretical_speedup.value.unwrap();
    assert!((speedup - length / 1.15).abs() < 0.01, "{speedup}");
    // Each verification step's tokens arrive as one chunk: the client sees the same length.
    let from_chunks = speculative(None, &tally, &inputs).unwrap();
    let chunk_length = from_chunks.mean_accepted_length.value.unwrap();
    assert!(
        (chunk_length / length - 1.0).abs() < 0.03,
        "{chunk_length} vs {length}"
    );
}
