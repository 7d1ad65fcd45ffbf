//! `goodput plan`: resolve one device's capacity (given, read from a report, or searched on
//! the simulator in virtual time), compute the plan in core, print it; with `--sim-layout`, one
//! simulated capacity per fleet layout, compared per accelerator in core.

use std::process::ExitCode;

use anyhow::{Context, Result};
use goodput_core::decide::layouts::{LayoutCapacity, plan_layouts};
use goodput_core::decide::plan::{CapacityEstimate, DemandUnit, capacity_from_report, plan};

use crate::exit::EXIT_OK;
use crate::options::plan::{CapacitySource, LayoutOptions, PlanOptions};
use crate::output;

/// Runs `goodput plan`.
pub(crate) fn run(options: PlanOptions) -> Result<ExitCode> {
    if let CapacitySource::Layouts(layouts) = &options.capacity {
        return run_layouts(&options, layouts);
    }
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

/// `plan --simulate --sim-layout`: each layout's capacity searched, the demand sized in fleets
/// of each, the comparison printed (with the best layout's plan).
fn run_layouts(options: &PlanOptions, layouts: &[LayoutOptions]) -> Result<ExitCode> {
    let mut measured = Vec::with_capacity(layouts.len());
    for layout in layouts {
        let (capacity, explanation) = crate::virtual_target::plan::estimate_layout(
            &layout.layout,
            layout.accelerators,
            &layout.simulate,
            options.unit(),
        )
        .with_context(|| format!("--sim-layout {}", layout.layout))?;
        eprintln!("{}: {explanation}", layout.layout);
        measured.push(LayoutCapacity {
            layout: layout.layout.clone(),
            accelerators: layout.accelerators,
            capacity,
        });
    }
    let plans = plan_layouts(&options.terms, measured).map_err(|error| {
        let flag = match error.flag.as_str() {
            "peak demand" if options.unit() == DemandUnit::RequestsPerSec => "--peak-rps",
            "peak demand" => "--peak-output-tps",
            other => other,
        };
        anyhow::anyhow!("{flag}: {}", error.message)
    })?;
    if options.json {
        output::json::print_json(&plans)?;
    } else {
        output::plan::print_layouts(&plans)?;
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
        CapacitySource::Layouts(_) => anyhow::bail!("--sim-layout: planned by layout"),
        CapacitySource::Simulate(simulate) => {
            let (estimate, explanation) = crate::virtual_target::plan::estimate(simulate, unit)?;
            eprintln!("{explanation}");
            Ok(estimate)
        }
    }
}
