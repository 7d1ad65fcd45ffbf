//! The terminal form of a capacity plan: the answer, the arithmetic, and the month-by-month
//! table when there is a horizon.

use std::fmt::Write as _;
use std::io::Write;

use anyhow::{Context, Result};
use goodput_core::decide::layouts::LayoutPlans;
use goodput_core::decide::plan::Plan;

/// Prints `plan` on stdout.
pub(crate) fn print_plan(plan: &Plan) -> Result<()> {
    std::io::stdout()
        .lock()
        .write_all(render(plan).as_bytes())
        .context("writing to stdout")
}

/// Prints a layout comparison on stdout.
pub(crate) fn print_layouts(plans: &LayoutPlans) -> Result<()> {
    std::io::stdout()
        .lock()
        .write_all(render_layouts(plans).as_bytes())
        .context("writing to stdout")
}

/// The layouts side by side, the best named, then the best layout's plan.
pub(crate) fn render_layouts(plans: &LayoutPlans) -> String {
    let mut out = String::new();
    let Some(first) = plans.layouts.first() else {
        return out;
    };
    let unit = first.plan.inputs.unit.label();
    let _ = writeln!(
        out,
        "{:<16}{:>6}{:>16}{:>14}{:>8}{:>8}{:>14}",
        "layout",
        "GPUs",
        format!("capacity {unit}"),
        "per GPU",
        "fleets",
        "GPUs",
        "cost/month"
    );
    for layout in &plans.layouts {
        let now = &layout.plan.months[0];
        let _ = writeln!(
            out,
            "{:<16}{:>6}{:>16}{:>14}{:>8}{:>8}{:>14}",
            layout.layout,
            layout.accelerators,
            trimmed(layout.capacity),
            trimmed(layout.capacity_per_accelerator),
            now.devices,
            now.accelerators,
            now.cost_per_month
                .map_or("-".to_string(), |c| format!("{c:.2}"))
        );
    }
    if let Some(best) = plans.layouts.get(plans.best) {
        let margin = plans
            .best_margin
            .map_or(String::new(), |m| format!(", {m:.2}× the next"));
        let _ = writeln!(
            out,
            "\nMost per GPU: {} ({} {unit} per GPU{margin}); its plan, a device being one fleet:\n",
            best.layout,
            trimmed(best.capacity_per_accelerator)
        );
        out.push_str(&render(&best.plan));
    }
    out
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
