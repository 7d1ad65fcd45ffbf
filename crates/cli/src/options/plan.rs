//! `goodput plan`'s configuration: the demand, where one device's capacity comes from (given,
//! a report, or a simulated capacity search), and the plan's terms — checked together with
//! the capacity once it is known ([`PlanOptions::inputs`]).

use std::path::PathBuf;

use anyhow::Result;
use goodput_core::decide::capacity::Criteria;
use goodput_core::decide::plan::{CapacityEstimate, DemandUnit, PlanInputs};
use goodput_sim::config::{BatchingConfig, SimConfig};

/// Everything `goodput plan` runs with.
#[derive(Debug, Clone)]
pub(crate) struct PlanOptions {
    /// The plan's terms; its capacity is filled in by [`PlanOptions::inputs`].
    pub(crate) terms: PlanInputs,
    /// Where one device's capacity comes from.
    pub(crate) capacity: CapacitySource,
    /// `--json`.
    pub(crate) json: bool,
}

/// Where one device's capacity comes from.
#[derive(Debug, Clone)]
pub(crate) enum CapacitySource {
    /// `--capacity`.
    Given(f64),
    /// `--capacity-from`: a report (or run directory), served by `--report-devices`.
    Report {
        /// The report or its run directory.
        path: PathBuf,
        /// `--report-devices`.
        devices: Option<u32>,
    },
    /// `--simulate`: a capacity search of the simulated model × accelerator.
    Simulate(Box<SimulateOptions>),
    /// `--simulate --sim-layout`: one capacity search per fleet layout, compared per
    /// accelerator; a device is one fleet of a layout.
    Layouts(Vec<LayoutOptions>),
}

/// One layout of `--sim-layout` and its simulated fleet.
#[derive(Debug, Clone)]
pub(crate) struct LayoutOptions {
    /// The layout as written (`8`, `4xtp2`, `2p+6d`).
    pub(crate) layout: String,
    /// Accelerators one fleet of it uses.
    pub(crate) accelerators: u32,
    /// Its capacity search (the simulator laid out this way).
    pub(crate) simulate: SimulateOptions,
}

/// A simulated device's capacity search (`--simulate`).
#[derive(Debug, Clone)]
pub(crate) struct SimulateOptions {
    /// The simulator: presets or `--sim-config`, one device's tensor parallelism, precision.
    pub(crate) sim: SimConfig,
    /// Its batching engine, for the account of what limits the capacity (absent: a
    /// fixed-timing engine, accepted only with `--sim-layout`).
    pub(crate) engine: Option<BatchingConfig>,
    /// `--input-tokens`.
    pub(crate) input_tokens: u32,
    /// `--output-tokens`.
    pub(crate) output_tokens: u32,
    /// `--slo` at `--attainment` and `--confidence`.
    pub(crate) criteria: Criteria,
    /// `--seed`.
    pub(crate) seed: u64,
}

impl PlanOptions {
    /// The demand's unit.
    pub(crate) fn unit(&self) -> DemandUnit {
        self.terms.unit
    }

    /// The plan's inputs with one device's `capacity`, validated; an error names the flag
    /// to fix.
    pub(crate) fn inputs(&self, capacity: CapacityEstimate) -> Result<PlanInputs> {
        let inputs = PlanInputs {
            capacity_per_device: capacity.per_device,
            capacity_source: capacity.source,
            ..self.terms.clone()
        };
        inputs.validate().map_err(|error| {
            let flag = match error.flag.as_str() {
                "peak demand" if inputs.unit == DemandUnit::RequestsPerSec => "--peak-rps",
                "peak demand" => "--peak-output-tps",
                other => other,
            };
            anyhow::anyhow!("{flag}: {}", error.message)
        })?;
        Ok(inputs)
    }
}
