//! The terminal form of a capacity plan: the answer, the arithmetic, and the month-by-month
//! table when there is a horizon.

use std::fmt::Write as _;
use std::io::Write;

use anyhow::{Context, Result};
use goodput_core::decide::plan::Plan;

/// Prints `plan` on stdout.
pub(crate) fn print_plan(plan: &Plan) -> Result<()> {
    std::io::stdout()
        .lock()
        .write_all(render(plan).as_bytes())
        .context("writing to stdout")
}

/// The plan as text.
pub(crate) fn render(plan: &Plan) -> String {
    let inputs = &plan.inputs;
    let unit = inputs.unit.label();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Devices needed now: {} (capacity {} {unit} per device, from {})",
        plan.devices_now,
        trimmed(inputs.capacity_per_device),
        inputs.capacity_source
    );
    if inputs.horizon_months > 0 {
        let _ = writeln!(
            out,
            "Devices needed in {} months: {}",
            inputs.horizon_months, plan.devices_at_horizon
        );
    }
    let _ = writeln!(out, "\nArithmetic");
    for line in &plan.arithmetic {
        let _ = writeln!(out, "  {line}");
    }
    if inputs.horizon_months > 0 {
        let _ = writeln!(
            out,
            "\n{:>7}{:>16}{:>16}{:>9}{:>14}{:>16}",
            "month", "peak demand", "× safety", "devices", "accelerators", "cost/month"
        );
        for month in &plan.months {
            let _ = writeln!(
                out,
                "{:>7}{:>16.2}{:>16.2}{:>9}{:>14}{:>16}",
                month.month,
                month.demand,
                month.required_capacity,
                month.devices,
                month.accelerators,
                month
                    .cost_per_month
                    .map_or("-".to_string(), |c| format!("{c:.2}"))
            );
        }
    }
    out
}

/// `x` with at most three decimals and no trailing zeros (40, 19.159).
fn trimmed(x: f64) -> String {
    let text = format!("{x:.3}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}
