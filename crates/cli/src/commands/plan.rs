//! `goodput plan`: resolve one device's capacity (given, read from a report, or searched on
//! the simulator in virtual time), compute the plan in core, print it.

use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use goodput_core::decide::plan::{CapacityEstimate, DemandUnit, capacity_from_report, plan};

use crate::args::plan::PlanArgs;
use crate::exit::EXIT_OK;
use crate::output;

/// Runs `goodput plan`.
pub(crate) fn run(args: PlanArgs) -> Result<ExitCode> {
    let (_, unit) = args.demand();
    let capacity = resolve_capacity(&args, unit)?;
    let inputs = args.inputs(capacity.per_device, capacity.source)?;
    let plan = plan(&inputs);
    if args.json {
        output::json::print_json(&plan)?;
    } else {
        output::plan::print_plan(&plan)?;
    }
    Ok(ExitCode::from(EXIT_OK))
}

/// One device's sustainable capacity, in the demand's unit.
fn resolve_capacity(args: &PlanArgs, unit: DemandUnit) -> Result<CapacityEstimate> {
    if let Some(per_device) = args.capacity {
        return Ok(CapacityEstimate {
            per_device,
            source: "--capacity".into(),
        });
    }
    if let Some(given) = &args.capacity_from {
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
            args.report_devices,
            args.accelerators_per_device,
        )?;
        estimate.source = format!("{} ({})", path.display(), estimate.source);
        return Ok(estimate);
    }
    if args.simulate.simulate {
        let (estimate, explanation) = crate::virtual_target::plan::estimate(
            &args.simulate,
            args.accelerators_per_device,
            unit,
        )?;
        eprintln!("{explanation}");
        return Ok(estimate);
    }
    bail!("give the per-device capacity: --capacity N, --capacity-from report.json or --simulate")
}
