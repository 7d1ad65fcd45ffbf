//! Figures derived from a step's measurements and a description of the hardware: utilisation
//! (KV capacity, MFU, HBM bandwidth, the TPOT floor), speculative decoding (acceptance,
//! accepted length, theoretical speedup) and cost and energy per unit of work. Every figure
//! carries its formula and the inputs it was computed from ([`Figure`]), so a reader can redo
//! the arithmetic. Definitions: `docs/metrics.md`, "Utilisation", "Speculative decoding",
//! "Cost and energy".

pub mod cost;
pub mod speculative;
pub mod utilisation;

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::observe::server::{ClientTally, ScrapeHeader, ScrapeLog, ServerInputs, summarise};
use crate::report::{Report, StepReport, Warning};

pub use crate::report::analysis::Figure;
pub use cost::{CostInputs, CostReport};
pub use speculative::{SpeculativeInputs, SpeculativeReport};
pub use utilisation::{Hardware, UtilisationReport};

impl Figure {
    /// A figure from `inputs` (name, value or `None` when unknown); `compute` runs only when
    /// every input is known and its result counts only when finite.
    pub fn new(
        unit: &str,
        formula: &str,
        inputs: &[(&str, Option<f64>)],
        compute: impl FnOnce(&BTreeMap<String, f64>) -> f64,
    ) -> Figure {
        let known: BTreeMap<String, f64> = inputs
            .iter()
            .filter_map(|(name, value)| value.map(|v| (name.to_string(), v)))
            .collect();
        let missing: Vec<String> = inputs
            .iter()
            .filter(|(_, value)| value.is_none())
            .map(|(name, _)| name.to_string())
            .collect();
        let value = missing
            .is_empty()
            .then(|| compute(&known))
            .filter(|v| v.is_finite());
        Figure {
            value,
            unit: unit.to_string(),
            formula: formula.to_string(),
            inputs: known,
            missing,
        }
    }
}

/// The value of input `name` (0 when absent; [`Figure::new`] only computes with all present).
pub(crate) fn input(inputs: &BTreeMap<String, f64>, name: &str) -> f64 {
    inputs.get(name).copied().unwrap_or(0.0)
}

/// What the derived figures of a run need beyond its measurements; recorded as
/// `analysis.json` so `goodput report` derives the same figures.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct AnalysisConfig {
    /// The model and accelerators, for utilisation.
    pub hardware: Option<Hardware>,
    /// Prices and power, for cost and energy.
    pub cost: CostInputs,
    /// Speculative-decoding parameters the server does not report.
    pub speculative: SpeculativeInputs,
}

/// What [`enrich`] adds the derived sections from.
#[derive(Debug, Clone, Copy)]
pub struct EnrichInputs<'a> {
    /// The scrapes of the server's metrics, when it was scraped.
    pub server: Option<(&'a ScrapeHeader, &'a ScrapeLog)>,
    /// Hardware, prices, speculative parameters.
    pub config: &'a AnalysisConfig,
    /// The client's own totals.
    pub tally: &'a ClientTally,
    /// Width of the client's windows.
    pub window: Duration,
}

/// Adds the `server`, `utilisation`, `speculative_decoding` and `cost` sections to every step
/// of `report`, and the warnings about scraping to its warnings.
pub fn enrich(report: &mut Report, inputs: EnrichInputs<'_>) {
    let mut warnings: Vec<Warning> = Vec::new();
    for step in &mut report.steps {
        warnings.extend(enrich_step(step, inputs));
    }
    for warning in warnings {
        if !report.warnings.contains(&warning) {
            report.warnings.push(warning);
        }
    }
}

/// Adds the derived sections to one step; returns the warnings about scraping.
pub fn enrich_step(step: &mut StepReport, inputs: EnrichInputs<'_>) -> Vec<Warning> {
    let mut warnings = Vec::new();
    if let Some((header, log)) = inputs.server {
        let (server, found) = summarise(ServerInputs {
            header,
            log,
            step,
            window: inputs.window,
            tally: inputs.tally,
        });
        step.server = Some(server);
        warnings = found;
    }
    let config = inputs.config;
    step.utilisation = config
        .hardware
        .as_ref()
        .map(|hardware| utilisation::utilisation(hardware, step));
    step.speculative_decoding =
        speculative::speculative(step.server.as_ref(), inputs.tally, &config.speculative);
    step.cost = cost::cost(&config.cost, step);
    warnings
}
