//! The embedded simulator's configuration from `run`/`capacity` flags: a `--sim-config` file
//! or the defaults, then `--sim-model`/`--sim-gpu`, the deployment flags, and the target
//! hardware flags that describe the simulator when no `--model-spec`/`--gpu` is given.

use anyhow::{Context, Result, bail};
use goodput_sim::config::{EngineConfig, SimConfig};

use crate::args::run::RunArgs;

/// The simulator `run`/`capacity` start (or drive in virtual time) for `args`.
pub(crate) fn embedded_sim_config(args: &RunArgs, seed: u64) -> Result<SimConfig> {
    let mut config = match &args.sim_config {
        Some(path) => SimConfig::from_file(path)?,
        None => SimConfig {
            seed,
            ..SimConfig::default()
        },
    };
    if let EngineConfig::Batching(batching) = &mut config.engine {
        if let Some(name) = &args.sim_model {
            batching.model = goodput_protocol::hardware::ModelSpec::preset(name)
                .with_context(|| format!("--sim-model {name}: unknown preset"))?;
        }
        if let Some(name) = &args.sim_gpu {
            batching.gpu = goodput_protocol::hardware::GpuSpec::preset(name)
                .with_context(|| format!("--sim-gpu {name}: unknown preset"))?;
        }
    }
    // --tp and --gpu-memory-utilization describe the target's hardware; with no
    // --model-spec/--gpu that is the embedded simulator, so they set its configuration.
    let server = &args.server_side;
    let describes_simulator = server.model_spec.is_none() && server.gpu.is_none();
    let tp = server.tp.filter(|_| describes_simulator);
    let memory = server.gpu_memory_utilization;
    if describes_simulator && memory != crate::args::server::DEFAULT_GPU_MEMORY_UTILIZATION {
        match &mut config.engine {
            EngineConfig::Batching(batching) => batching.gpu_memory_utilization = memory,
            EngineConfig::Fixed(_) => bail!(
                "--gpu-memory-utilization applies to the batching engine; the simulator \
                 configuration selects the fixed engine"
            ),
        }
    }
    args.sim_deploy.apply(&mut config, tp)?;
    if let Some(time_scale) = args.time_scale {
        config.time_scale = time_scale;
    }
    if let Some(tokens) = args.sim_reasoning_tokens {
        config.agent.reasoning_tokens = tokens;
    }
    if let Some(probability) = args.sim_tool_calls {
        if !offers_tools(args.extra_body.as_deref()) {
            bail!(
                "--sim-tool-calls applies to requests that offer tools; add them with \
                 --extra-body '{{\"tools\": [...]}}'"
            );
        }
        config.agent.tool_call_probability = probability;
    }
    config.validate()?;
    Ok(config)
}

/// Whether `--extra-body` puts a `tools` list in every request.
fn offers_tools(extra_body: Option<&str>) -> bool {
    extra_body
        .and_then(|body| serde_json::from_str::<serde_json::Value>(body).ok())
        .is_some_and(|body| body.get("tools").is_some_and(serde_json::Value::is_array))
}

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
