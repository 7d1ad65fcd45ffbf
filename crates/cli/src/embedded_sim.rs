//! The embedded simulator in one line, for the report's target (its configuration is built
//! from the `run`/`capacity` flags by `args::sim_deploy`).

use goodput_sim::config::{EngineConfig, SimConfig};

/// The simulator in one line, for the report's target.
pub(crate) fn describe_simulator(config: &SimConfig) -> String {
    let engine = match &config.engine {
        EngineConfig::Batching(b) => format!(
            "embedded simulator ({}, {} weights, {} KV, on {}×{}, {} policy, time scale {}",
            b.model.name,
            format!("{:?}", b.model.weight_dtype).to_lowercase(),
            format!("{:?}", b.model.kv_dtype).to_lowercase(),
            b.tensor_parallel,
            b.gpu.name,
            b.policy.name(),
            config.time_scale
        ),
        EngineConfig::Fixed(f) => format!(
            "embedded simulator (fixed timing: ttft {:?}, itl {:?}, {} slots",
            f.ttft, f.itl, f.slots
        ),
    };
    if let Some(split) = &config.disaggregation {
        let tp = |pool: Option<u32>| pool.map(|tp| format!(":tp{tp}")).unwrap_or_default();
        return format!(
            "{engine}; {}p{}+{}d{} disaggregated over a {} GB/s, {} ms KV link, {} routing)",
            split.prefill_replicas,
            tp(split.prefill_tensor_parallel),
            split.decode_replicas,
            tp(split.decode_tensor_parallel),
            split.kv_link_gb_per_s,
            split.kv_link_latency_ms,
            config.routing.name()
        );
    }
    if config.replicas > 1 {
        format!(
            "{engine}; {} replicas, {} routing)",
            config.replicas,
            config.routing.name()
        )
    } else {
        format!("{engine})")
    }
}
