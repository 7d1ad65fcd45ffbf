//! `goodput run` flags for server-side figures: metrics scraping, the hardware description
//! behind the utilisation figures, speculative-decoding parameters, prices and power — and
//! their conversion into [`ServerSideOptions`] (core's [`AnalysisConfig`] among them). Model and accelerator descriptions are a
//! preset name (shared with the simulator) or a JSON/TOML file.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use goodput_core::analysis::{AnalysisConfig, CostInputs, Hardware, SpeculativeInputs};
use goodput_core::units::parse_duration;
use goodput_protocol::hardware::{GpuSpec, ModelSpec};
use goodput_sim::config::{EngineConfig, SimConfig};
use serde::de::DeserializeOwned;

use crate::options::run::ServerSideOptions;

/// vLLM's default `gpu_memory_utilization`.
pub(crate) const DEFAULT_GPU_MEMORY_UTILIZATION: f64 = 0.9;
/// Server-side figures: scraping, utilisation, speculative decoding, cost and energy.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Server side")]
pub(crate) struct ServerSideArgs {
    /// Prometheus metrics to scrape during the run (default: the target's /metrics, used
    /// when it answers).
    #[arg(long, value_name = "URL")]
    pub(crate) metrics_url: Option<String>,
    /// Do not scrape the server's metrics.
    #[arg(long, conflicts_with = "metrics_url")]
    pub(crate) no_metrics: bool,
    /// Time between scrapes.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub(crate) metrics_interval: Duration,
    /// Model description for utilisation figures: a preset (llama-3.1-8b, llama-3.1-70b,
    /// qwen2.5-7b, llama-3.2-1b) or a JSON/TOML file (default with the embedded simulator:
    /// its model).
    #[arg(long, value_name = "PRESET|FILE")]
    pub(crate) model_spec: Option<String>,
    /// Accelerator: a preset (a100-80g, h100, h200, l40s) or a JSON/TOML file.
    #[arg(long, value_name = "PRESET|FILE")]
    pub(crate) gpu: Option<String>,
    /// Accelerators serving the target, in total (for utilisation, cost and power).
    #[arg(long, value_name = "N")]
    pub(crate) accelerators: Option<u32>,
    /// Accelerators per replica (tensor parallel; default: all of them).
    #[arg(long, value_name = "N")]
    pub(crate) tp: Option<u32>,
    /// Fraction of accelerator memory the server may use: vLLM's gpu_memory_utilization (of
    /// the whole memory); under the simulator's sglang policy its mem_fraction_static (weights
    /// and KV only), under tensorrt-llm its free_gpu_memory_fraction (of what the loaded model
    /// leaves free).
    #[arg(long, default_value_t = DEFAULT_GPU_MEMORY_UTILIZATION, value_name = "FRACTION")]
    pub(crate) gpu_memory_utilization: f64,
    /// Price of one accelerator-hour (any currency), for cost per request and per token.
    #[arg(long, value_name = "PRICE")]
    pub(crate) gpu_hour_cost: Option<f64>,
    /// Power drawn per accelerator, watts (default: a scraped DCGM power gauge, if any).
    #[arg(long, value_name = "WATTS")]
    pub(crate) watts: Option<f64>,
    /// Speculative decoding: draft tokens proposed per step (K), when the server does not
    /// report it; enables the estimate from tokens per streamed chunk.
    #[arg(long, value_name = "K")]
    pub(crate) spec_k: Option<u32>,
    /// Speculative decoding: cost of a draft forward relative to a target forward.
    #[arg(long, value_name = "RATIO")]
    pub(crate) spec_draft_cost: Option<f64>,
}

/// A model preset or description file.
pub(crate) fn load_model(text: &str) -> Result<ModelSpec> {
    if let Some(model) = ModelSpec::preset(text) {
        return Ok(model);
    }
    let model: ModelSpec = load_file(text).with_context(|| {
        format!(
            "--model-spec {text}: not a preset ({}) nor a readable model file",
            ModelSpec::PRESETS.join(", ")
        )
    })?;
    model.validate().context("--model-spec")?;
    Ok(model)
}

/// An accelerator preset or description file.
pub(crate) fn load_gpu(text: &str) -> Result<GpuSpec> {
    if let Some(gpu) = GpuSpec::preset(text) {
        return Ok(gpu);
    }
    let gpu: GpuSpec = load_file(text).with_context(|| {
        format!(
            "--gpu {text}: not a preset ({}) nor a readable accelerator file",
            GpuSpec::PRESETS.join(", ")
        )
    })?;
    gpu.validate().context("--gpu")?;
    Ok(gpu)
}

fn load_file<T: DeserializeOwned>(path: &str) -> Result<T> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {path}"))?;
    if Path::new(path).extension().is_some_and(|ext| ext == "toml") {
        toml::from_str(&text).with_context(|| format!("{path}: invalid TOML"))
    } else {
        serde_json::from_str(&text).with_context(|| format!("{path}: invalid JSON"))
    }
}

/// The embedded simulator's hardware, used when no description is given.
#[derive(Debug, Clone, Default)]
struct SimulatedHardware {
    /// Its model, accelerator, tensor parallel degree and memory fraction.
    pub(crate) hardware: Option<Hardware>,
    /// Its draft cost ratio, when it speculates.
    pub(crate) draft_cost_ratio: Option<f64>,
}

impl ServerSideArgs {
    /// The server side of a run whose target is `simulator` when it is the embedded one (its
    /// hardware fills what the flags leave out).
    pub(crate) fn options(&self, simulator: Option<&SimConfig>) -> Result<ServerSideOptions> {
        let analysis = self.analysis(simulated_hardware(simulator))?;
        if self.metrics_interval < Duration::from_millis(10) {
            bail!("--metrics-interval: at least 10ms");
        }
        Ok(ServerSideOptions {
            metrics_url: self.metrics_url.clone(),
            scrape: !self.no_metrics,
            metrics_interval: self.metrics_interval,
            analysis,
            accelerators: self.accelerators,
        })
    }

    /// The analysis configuration; `simulated` fills what the flags leave out.
    fn analysis(&self, simulated: SimulatedHardware) -> Result<AnalysisConfig> {
        for (flag, value) in [
            ("--gpu-hour-cost", self.gpu_hour_cost),
            ("--watts", self.watts),
            ("--spec-draft-cost", self.spec_draft_cost),
        ] {
            if let Some(value) = value
                && !(value.is_finite() && value >= 0.0)
            {
                bail!("{flag}: must be 0 or a positive number");
            }
        }
        if self.spec_k == Some(0) {
            bail!("--spec-k: must be at least 1");
        }
        let hardware = self.hardware(simulated.hardware)?;
        let accelerators = self
            .accelerators
            .or_else(|| hardware.as_ref().map(|h| h.accelerators));
        Ok(AnalysisConfig {
            hardware,
            cost: CostInputs {
                accelerators,
                gpu_hour_cost: self.gpu_hour_cost,
                watts: self.watts,
            },
            speculative: SpeculativeInputs {
                num_draft_tokens: self.spec_k,
                draft_cost_ratio: self.spec_draft_cost.or(simulated.draft_cost_ratio),
            },
        })
    }

    fn hardware(&self, simulated: Option<Hardware>) -> Result<Option<Hardware>> {
        let (model, gpu) = match (&self.model_spec, &self.gpu) {
            (None, None) => return Ok(simulated),
            (Some(model), Some(gpu)) => (load_model(model)?, load_gpu(gpu)?),
            (Some(_), None) => bail!("--model-spec needs --gpu (e.g. --gpu h100)"),
            (None, Some(_)) => bail!("--gpu needs --model-spec (e.g. --model-spec llama-3.1-8b)"),
        };
        let accelerators = self.accelerators.unwrap_or(1);
        let hardware = Hardware {
            model,
            gpu,
            accelerators,
            tensor_parallel: self.tp.unwrap_or(accelerators),
            gpu_memory_utilization: self.gpu_memory_utilization,
        };
        hardware.validate().context("--model-spec/--gpu")?;
        Ok(Some(hardware))
    }
}

/// The embedded simulator's hardware (figures are in its time, whatever its time scale).
fn simulated_hardware(simulator: Option<&SimConfig>) -> SimulatedHardware {
    let Some(config) = simulator else {
        return SimulatedHardware::default();
    };
    let EngineConfig::Batching(batching) = &config.engine else {
        return SimulatedHardware::default();
    };
    let hardware = Some(Hardware {
        model: batching.model.clone(),
        gpu: batching.gpu.clone(),
        accelerators: config.accelerators(),
        tensor_parallel: batching.tensor_parallel,
        gpu_memory_utilization: batching.gpu_memory_utilization,
    });
    SimulatedHardware {
        hardware,
        draft_cost_ratio: batching.speculative.as_ref().map(|s| s.draft_cost_ratio),
    }
}
