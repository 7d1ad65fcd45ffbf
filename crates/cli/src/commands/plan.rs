//! `goodput plan`: resolve one device's capacity (given, read from a report, or searched on
//! the simulator in virtual time), compute the plan in core, print it.

use std::process::ExitCode;

use anyhow::{Context, Result};
use goodput_core::decide::plan::{CapacityEstimate, DemandUnit, capacity_from_report, plan};

use crate::exit::EXIT_OK;
use crate::options::plan::{CapacitySource, PlanOptions};
use crate::output;

/// Runs `goodput plan`.
pub(crate) fn run(options: PlanOptions) -> Result<ExitCode> {
    let capacity = resolve_capacity(&options, options.unit())?;
    let inputs = options.inputs(capacity)?;
    let plan = plan(&inputs);
    if options.json {
        output::json::print_json(&plan)?;
    } else {
        output::plan::print_plan(&plan)?;
    }
    Ok(ExitCode::from(EXIT_OK))
}

/// One device's sustainable capacity, in the demand's unit.
fn resolve_capacity(options: &PlanOptions, unit: DemandUnit) -> Result<CapacityEstimate> {
    match &options.capacity {
        CapacitySource::Given(per_device) => Ok(CapacityEstimate {
            per_device: *per_device,
            source: "--capacity".into(),
        }),
        CapacitySource::Report {
            path: given,
            devices,
        } => {
            // A run's directory stands for its report, as for `gate` and `compare`.
            let path = if given.is_dir() {
                &given.join("report.json")
            } else {
                given
            };
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--capacity-from: cannot read {}", path.display()))?;
            let report: serde_json::Value = serde_json::from_str(&text)
                .with_context(|| format!("--capacity-from: {} is not JSON", path.display()))?;
            let mut estimate = capacity_from_report(
                &report,
                unit,
                *devices,
                options.terms.accelerators_per_device,
            )?;
            estimate.source = format!("{} ({})", path.display(), estimate.source);
            Ok(estimate)
        }
        CapacitySource::Simulate(simulate) => {
            let (estimate, explanation) = crate::virtual_target::plan::estimate(simulate, unit)?;
            eprintln!("{explanation}");
            Ok(estimate)
        }
    }
}
