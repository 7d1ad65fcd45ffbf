//! goodput's embedded inference-server simulator.
//!
//! Layout:
//! - [`config`]: what to simulate (engine kind, model × accelerator, scheduler, faults).
//! - [`engine`]: discrete-event engines: [`engine::batching`] (continuous batching over a
//!   paged KV cache with a roofline step time) and [`engine::fixed`] (constant TTFT/ITL on N
//!   slots). They own no clock and do no I/O.
//! - [`virtual_time`]: runs an engine in virtual time (no HTTP, no sleeping).
//! - [`driver`]: runs an engine in real (or scaled) time behind a cloneable handle.
//! - [`text`]: prompt token counting, prefix-cache block hashes, generated words.
//! - [`server_metrics`]: the vLLM-named Prometheus metrics served at `/metrics`.
//! - [`http`]: the OpenAI-compatible HTTP server ([`SimServer`], [`spawn`]).
//! - [`explain`](mod@explain): the derived figures behind `goodput sim --explain`.
//! - [`calibrate`]: the engine's constants fitted to a real server's measurements.
//!
//! The simulator never depends on `goodput-core`; both share `goodput-protocol`.
#![deny(missing_docs)]

pub mod calibrate;
pub mod clock;
pub mod config;
pub mod driver;
pub mod engine;
pub mod explain;
pub mod http;
pub mod image;
mod pieces;
pub mod server_metrics;
pub mod text;
pub mod virtual_time;

pub use config::{EngineConfig, SimConfig};
pub use engine::{Engine, EngineEvent, EngineRequest};
pub use explain::explain;
pub use http::{RunningSim, SimServer, SpawnError, spawn};
pub use virtual_time::Simulation;

/// Builds the engine a configuration describes (the configuration must be valid): one
/// replica, several behind a load balancer (each drawing from its own seed), or prefill and
/// decode pools joined by a KV link; each replica with its adapter slots when configured.
pub fn build_engine(config: &SimConfig) -> Box<dyn Engine> {
    if let Some(split) = &config.disaggregation {
        return build_disaggregated(config, split);
    }
    if config.replicas <= 1 {
        return build_replica(config, &config.engine, config.seed);
    }
    Box::new(pool(config, &config.engine, config.replicas, 0))
}

/// Separates the replicas' seeds from every other draw.
const REPLICA_SEED: u64 = 0x5e_ed_4e_91;

/// `count` replicas of `engine` behind the configured router, seeds from `first` on.
fn pool(
    config: &SimConfig,
    engine: &EngineConfig,
    count: u32,
    first: u64,
) -> engine::replicas::Replicated {
    let replicas = (0..u64::from(count))
        .map(|i| {
            build_replica(
                config,
                engine,
                text::derive_seed(config.seed, first + i, REPLICA_SEED),
            )
        })
        .collect();
    engine::replicas::Replicated::new(replicas, config.routing)
}

/// The engine with `tensor_parallel` replaced (a batching engine; the fixed one has none).
fn with_tp(engine: &EngineConfig, tensor_parallel: Option<u32>) -> EngineConfig {
    match (engine, tensor_parallel) {
        (EngineConfig::Batching(batching), Some(tp)) => {
            EngineConfig::Batching(config::BatchingConfig {
                tensor_parallel: tp,
                ..batching.clone()
            })
        }
        _ => engine.clone(),
    }
}

fn build_disaggregated(
    config: &SimConfig,
    split: &config::DisaggregationConfig,
) -> Box<dyn Engine> {
    let prefill_engine = with_tp(&config.engine, split.prefill_tensor_parallel);
    let decode_engine = with_tp(&config.engine, split.decode_tensor_parallel);
    let bytes_per_token = split.kv_bytes_per_token.unwrap_or(match &config.engine {
        EngineConfig::Batching(batching) => batching.model.kv_bytes_per_token(),
        EngineConfig::Fixed(_) => 0.0,
    });
    let link = engine::disaggregated::KvLink {
        bytes_per_token,
        bytes_per_second: split.kv_link_gb_per_s * 1e9,
        latency: std::time::Duration::from_secs_f64(split.kv_link_latency_ms.max(0.0) / 1000.0),
    };
    let prefill = pool(config, &prefill_engine, split.prefill_replicas, 0);
    let decode = pool(
        config,
        &decode_engine,
        split.decode_replicas,
        u64::from(split.prefill_replicas),
    );
    Box::new(engine::disaggregated::Disaggregated::new(
        prefill, decode, link,
    ))
}

fn build_replica(config: &SimConfig, engine: &EngineConfig, seed: u64) -> Box<dyn Engine> {
    let replica: Box<dyn Engine> = match engine {
        EngineConfig::Batching(batching) => Box::new(engine::batching::BatchingEngine::new(
            batching.clone(),
            seed,
        )),
        EngineConfig::Fixed(fixed) => {
            Box::new(engine::fixed::FixedTimingEngine::new(fixed.clone()))
        }
    };
    match &config.adapters {
        None => replica,
        Some(adapters) => Box::new(engine::adapters::Adapters::new(
            replica,
            adapters.count,
            adapters.slots,
            std::time::Duration::from_secs_f64(adapters.load_ms.max(0.0) / 1000.0),
            config.seed,
        )),
    }
}
