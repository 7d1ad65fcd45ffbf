//! Embedded-simulator deployment flags shared by `run`, `capacity` and `plan --simulate`:
//! tensor parallelism, weight and KV precision, engine policy — and the embedded simulator's
//! whole configuration from `run`'s flags ([`embedded_sim_config`]).

use anyhow::{Context, Result, bail};
use goodput_protocol::hardware::DType;
use goodput_sim::config::{BatchingConfig, EngineConfig, EnginePolicy, Layout, Routing, SimConfig};

use crate::args::run::RunArgs;
use crate::args::server::DEFAULT_GPU_MEMORY_UTILIZATION;

/// Precision and engine policy of the embedded simulator.
#[derive(Debug, Default, clap::Args)]
pub(crate) struct SimPrecisionArgs {
    /// Embedded simulator: weight precision (bf16, fp16, fp8, int8, int4); FP8 weights run
    /// GEMMs at the accelerator's FP8 rate.
    #[arg(long, value_name = "DTYPE", value_parser = parse_dtype, help_heading = "Embedded simulator")]
    pub(crate) sim_dtype: Option<DType>,
    /// Embedded simulator: KV-cache precision (bf16, fp8, …).
    #[arg(long, value_name = "DTYPE", value_parser = parse_dtype, help_heading = "Embedded simulator")]
    pub(crate) sim_kv_dtype: Option<DType>,
    /// Embedded simulator: engine policy (vllm, vllm-v0, sglang, tensorrt-llm, bare): admission,
    /// preemption and runtime overheads.
    #[arg(long, value_name = "POLICY", value_parser = parse_policy, help_heading = "Embedded simulator")]
    pub(crate) sim_engine: Option<EnginePolicy>,
}

/// Deployment of the embedded simulator for `run` and `capacity`.
#[derive(Debug, Default, clap::Args)]
pub(crate) struct EmbeddedSimArgs {
    /// Embedded simulator: tensor-parallel degree (accelerators per replica).
    #[arg(long, value_name = "N", help_heading = "Embedded simulator")]
    pub(crate) sim_tp: Option<u32>,
    #[command(flatten)]
    pub(crate) precision: SimPrecisionArgs,
    /// Embedded simulator: identical replicas behind one load balancer (each with its own KV
    /// cache and queue).
    #[arg(long, value_name = "N", help_heading = "Embedded simulator")]
    pub(crate) sim_replicas: Option<u32>,
    /// Embedded simulator: how the load balancer spreads requests over --sim-replicas or a
    /// layout's pools (round-robin, least-loaded, prefix-affinity, power-of-two, kv-aware).
    #[arg(long, value_name = "POLICY", value_parser = parse_routing, help_heading = "Embedded simulator")]
    pub(crate) sim_routing: Option<Routing>,
    /// Embedded simulator: a fleet layout — N or NxtpK replicas (4xtp2), or prefill and decode
    /// pools joined by a KV link (2p+6d, 2p:tp2+4d:tp1; the link from --sim-config's
    /// [disaggregation], else 50 GB/s and 1 ms).
    #[arg(long, value_name = "LAYOUT", value_parser = parse_layout, conflicts_with_all = ["sim_replicas", "sim_tp"], help_heading = "Embedded simulator")]
    pub(crate) sim_layout: Option<Layout>,
}

/// A fleet layout.
pub(crate) fn parse_layout(text: &str) -> Result<Layout, String> {
    Layout::parse(text)
}

/// A routing policy by name.
pub(crate) fn parse_routing(text: &str) -> Result<Routing, String> {
    Routing::from_name(text).ok_or_else(|| {
        let names: Vec<&str> = Routing::ALL.iter().map(|(name, _)| *name).collect();
        format!("unknown routing `{text}`; one of {}", names.join(", "))
    })
}

impl EmbeddedSimArgs {
    /// `--sim-replicas`, `--sim-layout` and `--sim-routing` (routing needs more than one
    /// replica or a layout's pools).
    fn apply_replicas(&self, config: &mut SimConfig) -> Result<()> {
        if let Some(replicas) = self.sim_replicas {
            config.replicas = replicas;
        }
        if let Some(layout) = self.sim_layout {
            layout
                .apply(config)
                .map_err(|e| anyhow::anyhow!("--sim-layout: {e}"))?;
        }
        if let Some(routing) = self.sim_routing {
            if config.replicas < 2 && config.disaggregation.is_none() {
                bail!(
                    "--sim-routing spreads requests over replicas: add --sim-replicas 2 or more \
                     (or --sim-layout)"
                );
            }
            config.routing = routing;
        }
        Ok(())
    }
}

fn parse_dtype(text: &str) -> Result<DType, String> {
    text.parse()
}

pub(crate) fn parse_policy(text: &str) -> Result<EnginePolicy, String> {
    EnginePolicy::from_name(text).ok_or_else(|| {
        let names: Vec<&str> = EnginePolicy::ALL.iter().map(|(name, _)| *name).collect();
        format!(
            "unknown engine policy `{text}`; one of {}",
            names.join(", ")
        )
    })
}

impl SimPrecisionArgs {
    /// Whether any flag was given.
    pub(crate) fn any(&self) -> bool {
        self.sim_dtype.is_some() || self.sim_kv_dtype.is_some() || self.sim_engine.is_some()
    }

    /// Applies the flags to a batching engine's configuration.
    pub(crate) fn apply_to(&self, config: &mut BatchingConfig) {
        if let Some(dtype) = self.sim_dtype {
            config.model.weight_dtype = dtype;
        }
        if let Some(dtype) = self.sim_kv_dtype {
            config.model.kv_dtype = dtype;
        }
        if let Some(policy) = self.sim_engine {
            config.policy = policy;
        }
    }
}

impl EmbeddedSimArgs {
    /// Applies the flags to the simulator configuration; they need the batching engine.
    /// `tp` is the server-side `--tp`: without `--model-spec`/`--gpu` it describes the
    /// embedded simulator, so it sets the simulator's tensor parallelism (and must agree with
    /// `--sim-tp` when both are given).
    pub(crate) fn apply(&self, config: &mut SimConfig, tp: Option<u32>) -> Result<()> {
        self.apply_replicas(config)?;
        let laid_out = matches!(
            self.sim_layout,
            Some(Layout::Replicas { tp: Some(_), .. } | Layout::Pools { .. })
        );
        if laid_out && let Some(tp) = tp {
            bail!(
                "--tp {tp} and --sim-layout both set the simulator's tensor parallelism; give the \
                 layout's (e.g. 4xtp2, 2p:tp2+4d:tp1)"
            );
        }
        let tp = match (self.sim_tp, tp) {
            (Some(sim), Some(tp)) if sim != tp => bail!(
                "--tp {tp} and --sim-tp {sim} disagree: with the embedded simulator, --tp is its \
                 tensor parallelism; give one of them"
            ),
            (sim, tp) => sim.or(tp),
        };
        let goodput_sim::EngineConfig::Batching(batching) = &mut config.engine else {
            if tp.is_some() || self.precision.any() {
                bail!(
                    "--sim-tp/--sim-dtype/--sim-kv-dtype/--sim-engine apply to the batching engine, \
                     but the simulator configuration selects the fixed engine"
                );
            }
            return Ok(());
        };
        if let Some(tp) = tp {
            batching.tensor_parallel = tp;
        }
        self.precision.apply_to(batching);
        Ok(())
    }
}

/// The simulator `run`/`capacity` start (or drive in virtual time) for `args`: a
/// `--sim-config` file or the defaults, then `--sim-model`/`--sim-gpu`, the deployment flags,
/// and the target hardware flags that describe the simulator when no `--model-spec`/`--gpu`
/// is given. `extra_body` is `--extra-body` when it parsed (whether requests offer tools).
pub(crate) fn embedded_sim_config(
    args: &RunArgs,
    seed: u64,
    extra_body: Option<&serde_json::Value>,
) -> Result<SimConfig> {
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
    if describes_simulator && memory != DEFAULT_GPU_MEMORY_UTILIZATION {
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
        if !offers_tools(extra_body) {
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
fn offers_tools(extra_body: Option<&serde_json::Value>) -> bool {
    extra_body.is_some_and(|body| body.get("tools").is_some_and(serde_json::Value::is_array))
}
