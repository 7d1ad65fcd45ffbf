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
/// replica, or several behind a load balancer (each drawing from its own seed).
pub fn build_engine(config: &SimConfig) -> Box<dyn Engine> {
    if config.replicas <= 1 {
        return build_replica(config, config.seed);
    }
    let replicas = (0..u64::from(config.replicas))
        .map(|i| build_replica(config, text::derive_seed(config.seed, i, REPLICA_SEED)))
        .collect();
    Box::new(engine::replicas::Replicated::new(replicas, config.routing))
}

/// Separates the replicas' seeds from every other draw.
const REPLICA_SEED: u64 = 0x5e_ed_4e_91;

fn build_replica(config: &SimConfig, seed: u64) -> Box<dyn Engine> {
    match &config.engine {
        EngineConfig::Batching(batching) => Box::new(engine::batching::BatchingEngine::new(
            batching.clone(),
            seed,
        )),
        EngineConfig::Fixed(fixed) => {
            Box::new(engine::fixed::FixedTimingEngine::new(fixed.clone()))
        }
    }
}
