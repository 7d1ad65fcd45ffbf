//! `goodput plan` arguments and their conversion into [`PlanOptions`]: core's [`PlanInputs`]
//! but for the capacity, which the command resolves from `--capacity`, a report, or a
//! simulated capacity search configured here.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use goodput_core::decide::capacity::Criteria;
use goodput_core::decide::plan::{DEFAULT_SAFETY_FACTOR, DemandUnit, PlanInputs};
use goodput_protocol::hardware::{GpuSpec, ModelSpec};
use goodput_sim::config::{BatchingConfig, EngineConfig, Layout, SimConfig};

use crate::args::slo::parse_slo;
use crate::options::plan::{CapacitySource, LayoutOptions, PlanOptions, SimulateOptions};

/// How many devices a peak demand needs.
///
/// The per-device capacity comes from one flag of the `capacity_source` group: `--capacity`,
/// `--capacity-from`, or a simulated capacity search (`--simulate`, added beside them).
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("demand").required(true))]
#[command(group = clap::ArgGroup::new("capacity_source").required(true))]
pub(crate) struct PlanArgs {
    /// Peak demand in requests per second.
    #[arg(long, group = "demand", value_name = "REQ/S")]
    pub(crate) peak_rps: Option<f64>,
    /// Peak demand in output tokens per second.
    #[arg(long, group = "demand", value_name = "TOK/S")]
    pub(crate) peak_output_tps: Option<f64>,
    /// What one device sustains under the SLO, in the demand's unit (e.g. from a capacity
    /// search).
    #[arg(long, group = "capacity_source", value_name = "PER_DEVICE")]
    pub(crate) capacity: Option<f64>,
    /// Read the per-device capacity from a goodput report.json (its capacity section, else
    /// its best stable step that met the SLO).
    #[arg(long, group = "capacity_source", value_name = "REPORT")]
    pub(crate) capacity_from: Option<PathBuf>,
    /// Devices that served the report given to --capacity-from (default: its capacity
    /// section's accelerators ÷ --accelerators-per-device, else 1).
    #[arg(long, value_name = "N", requires = "capacity_from")]
    pub(crate) report_devices: Option<u32>,
    /// Multiplier on the peak demand.
    #[arg(long, default_value_t = DEFAULT_SAFETY_FACTOR)]
    pub(crate) safety_factor: f64,
    /// Devices that may fail while the rest still carry the load (plan for N−k).
    #[arg(long, default_value_t = 0, value_name = "K")]
    pub(crate) failures: u32,
    /// Demand growth per month, e.g. 10%.
    #[arg(long, value_name = "PERCENT")]
    pub(crate) growth: Option<String>,
    /// Months to plan ahead (default 12 with --growth, else 0).
    #[arg(long, value_name = "MONTHS")]
    pub(crate) horizon: Option<u32>,
    /// Accelerators per device (e.g. 4 for a tensor-parallel-4 replica).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub(crate) accelerators_per_device: u32,
    /// Price of one accelerator-hour, for the monthly cost.
    #[arg(long, value_name = "PRICE")]
    pub(crate) gpu_hour_cost: Option<f64>,
    /// Print the plan as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) simulate: SimulateArgs,
}

/// A device's capacity from the embedded simulator, searched in virtual time.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Simulated capacity")]
pub(crate) struct SimulateArgs {
    /// Find one device's capacity with a capacity search of the simulated model × accelerator
    /// in virtual time (a device = --accelerators-per-device accelerators, tensor parallel).
    #[arg(long, group = "capacity_source")]
    pub(crate) simulate: bool,
    /// Model preset: llama-3.1-8b, llama-3.1-70b, qwen2.5-7b, llama-3.2-1b, llama-2-7b, llama-2-70b.
    #[arg(
        long,
        default_value = "llama-3.1-8b",
        value_name = "PRESET",
        requires = "simulate"
    )]
    pub(crate) sim_model: String,
    /// Accelerator preset: a100-80g, h100, h200, l40s, b200, mi300x.
    #[arg(
        long,
        default_value = "h100",
        value_name = "PRESET",
        requires = "simulate"
    )]
    pub(crate) sim_gpu: String,
    /// A simulator configuration file instead of the presets (its engine must batch).
    #[arg(long, value_name = "FILE", requires = "simulate", conflicts_with_all = ["sim_model", "sim_gpu"])]
    pub(crate) sim_config: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) sim_precision: crate::args::sim_deploy::SimPrecisionArgs,
    /// Fleet layouts to compare under the one SLO, comma-separated or repeated (e.g.
    /// 8,4xtp2,2p+6d): each layout's capacity and capacity per accelerator, the demand sized in
    /// fleets of each, and the plan of the one that serves the most per accelerator.
    #[arg(
        long,
        value_name = "LAYOUT[,LAYOUT…]",
        value_delimiter = ',',
        value_parser = crate::args::sim_deploy::parse_layout,
        requires = "simulate"
    )]
    pub(crate) sim_layout: Vec<Layout>,
    /// Prompt tokens per request.
    #[arg(
        long,
        default_value_t = 512,
        value_name = "TOKENS",
        requires = "simulate"
    )]
    pub(crate) input_tokens: u32,
    /// Answer tokens per request.
    #[arg(
        long,
        default_value_t = 128,
        value_name = "TOKENS",
        requires = "simulate"
    )]
    pub(crate) output_tokens: u32,
    /// Latency targets the capacity must meet (per-request thresholds and/or percentiles).
    #[arg(long, default_value = crate::args::run::DEFAULT_SLO, requires = "simulate")]
    pub(crate) slo: String,
    /// Fraction of requests that must meet every per-request threshold.
    #[arg(long, default_value_t = 0.99, requires = "simulate")]
    pub(crate) attainment: f64,
    /// Confidence of every probe verdict.
    #[arg(long, default_value_t = 0.95, requires = "simulate")]
    pub(crate) confidence: f64,
    /// Seed of the simulated arrivals.
    #[arg(long, default_value_t = 1, requires = "simulate")]
    pub(crate) seed: u64,
}

/// A percentage such as `10%` as a fraction.
pub(crate) fn parse_percent(flag: &str, text: &str) -> Result<f64> {
    let Some(number) = text.trim().strip_suffix('%') else {
        bail!("{flag} {text}: write a percentage, e.g. 10%");
    };
    match number.trim().parse::<f64>() {
        Ok(value) if value.is_finite() => Ok(value / 100.0),
        _ => bail!("{flag} {text}: not a number"),
    }
}

impl PlanArgs {
    /// `goodput plan`'s configuration.
    pub(crate) fn into_options(self) -> Result<PlanOptions> {
        let (peak_demand, unit) = self.demand();
        let capacity = match (self.capacity, &self.capacity_from) {
            (Some(per_device), _) => CapacitySource::Given(per_device),
            (None, Some(path)) => CapacitySource::Report {
                path: path.clone(),
                devices: self.report_devices,
            },
            (None, None) if self.simulate.simulate && !self.simulate.sim_layout.is_empty() => {
                if self.accelerators_per_device != 1 {
                    bail!(
                        "--accelerators-per-device: with --sim-layout a device is one fleet of \
                         each layout, its accelerators the layout's"
                    );
                }
                CapacitySource::Layouts(self.simulate.layouts()?)
            }
            (None, None) if self.simulate.simulate => CapacitySource::Simulate(Box::new(
                self.simulate.options(self.accelerators_per_device)?,
            )),
            (None, None) => bail!(
                "give the per-device capacity: --capacity N, --capacity-from report.json or --simulate"
            ),
        };
        let growth_per_month = match &self.growth {
            Some(text) => parse_percent("--growth", text)?,
            None => 0.0,
        };
        let horizon_months = self
            .horizon
            .unwrap_or(if self.growth.is_some() { 12 } else { 0 });
        let terms = PlanInputs {
            peak_demand,
            unit,
            capacity_per_device: 0.0,
            capacity_source: String::new(),
            safety_factor: self.safety_factor,
            failure_headroom: self.failures,
            growth_per_month,
            horizon_months,
            accelerators_per_device: self.accelerators_per_device,
            accelerator_hour_cost: self.gpu_hour_cost,
        };
        Ok(PlanOptions {
            terms,
            capacity,
            json: self.json,
        })
    }

    /// The demand and its unit.
    fn demand(&self) -> (f64, DemandUnit) {
        match (self.peak_rps, self.peak_output_tps) {
            (Some(rps), _) => (rps, DemandUnit::RequestsPerSec),
            (None, Some(tps)) => (tps, DemandUnit::OutputTokensPerSec),
            (None, None) => (0.0, DemandUnit::RequestsPerSec),
        }
    }
}

impl SimulateArgs {
    /// The simulated device (`accelerators_per_device` of them, tensor parallel) and what its
    /// capacity must meet.
    fn options(&self, accelerators_per_device: u32) -> Result<SimulateOptions> {
        let sim = self.sim_config(accelerators_per_device)?;
        let EngineConfig::Batching(engine) = &sim.engine else {
            bail!(
                "--sim-config: --simulate needs a batching engine (a fixed-timing engine has no \
                 hardware; with --sim-layout each of its replicas is one accelerator)"
            );
        };
        let engine = Some(engine.clone());
        self.with_sim(sim, engine)
    }

    /// One capacity search per `--sim-layout`, each on the simulator laid out that way (a
    /// fixed-timing engine is accepted: each replica one accelerator).
    fn layouts(&self) -> Result<Vec<LayoutOptions>> {
        let mut layouts = Vec::with_capacity(self.sim_layout.len());
        for layout in &self.sim_layout {
            let mut sim = self.sim_config(1)?;
            layout
                .apply(&mut sim)
                .map_err(|e| anyhow::anyhow!("--sim-layout: {e}"))?;
            sim.validate().context("--sim-layout")?;
            let engine = match &sim.engine {
                EngineConfig::Batching(engine) => Some(engine.clone()),
                EngineConfig::Fixed(_) => None,
            };
            layouts.push(LayoutOptions {
                layout: layout.to_string(),
                accelerators: sim.accelerators(),
                simulate: self.with_sim(sim, engine)?,
            });
        }
        Ok(layouts)
    }

    fn with_sim(&self, sim: SimConfig, engine: Option<BatchingConfig>) -> Result<SimulateOptions> {
        Ok(SimulateOptions {
            criteria: self.criteria()?,
            sim,
            engine,
            input_tokens: self.input_tokens,
            output_tokens: self.output_tokens,
            seed: self.seed,
        })
    }

    fn sim_config(&self, accelerators_per_device: u32) -> Result<SimConfig> {
        let mut config = match &self.sim_config {
            Some(path) => SimConfig::from_file(path)?,
            None => SimConfig {
                seed: self.seed,
                engine: EngineConfig::Batching(BatchingConfig {
                    model: ModelSpec::preset(&self.sim_model).with_context(|| {
                        format!("--sim-model {}: unknown preset", self.sim_model)
                    })?,
                    gpu: GpuSpec::preset(&self.sim_gpu)
                        .with_context(|| format!("--sim-gpu {}: unknown preset", self.sim_gpu))?,
                    ..BatchingConfig::default()
                }),
                ..SimConfig::default()
            },
        };
        if let EngineConfig::Batching(engine) = &mut config.engine {
            if self.sim_config.is_none() {
                engine.tensor_parallel = accelerators_per_device.max(1);
            }
            self.sim_precision.apply_to(engine);
        }
        config.validate()?;
        Ok(config)
    }

    fn criteria(&self) -> Result<Criteria> {
        for (flag, value) in [
            ("--attainment", self.attainment),
            ("--confidence", self.confidence),
        ] {
            if !(value > 0.0 && value < 1.0) {
                bail!("{flag}: a fraction between 0 and 1, e.g. 0.99");
            }
        }
        if self.input_tokens == 0 || self.output_tokens == 0 {
            bail!("--input-tokens / --output-tokens: at least 1");
        }
        let slo = parse_slo(&self.slo)?
            .context("--slo none: the simulated capacity is the load that meets an SLO")?;
        Ok(Criteria {
            slo,
            attainment: self.attainment,
            confidence: self.confidence,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn percentages() {
        assert_eq!(parse_percent("--growth", "10%").unwrap(), 0.1);
        assert!(parse_percent("--growth", "0.1").is_err());
        assert!(parse_percent("--growth", "x%").is_err());
    }
}
