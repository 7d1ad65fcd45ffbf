//! Fleet layouts compared under one SLO: each layout's capacity (a whole fleet of it, e.g.
//! `2p+6d` on 8 GPUs), its capacity per accelerator, and the plan that sizes the demand in
//! fleets of it; the best layout is the one that serves the most per accelerator. The CLI only
//! prints a [`LayoutPlans`].

use serde::{Deserialize, Serialize};

use super::plan::{CapacityEstimate, Plan, PlanError, PlanInputs, plan};

/// One layout's capacity and plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayoutPlan {
    /// The layout as written (`8`, `4xtp2`, `2p+6d`).
    pub layout: String,
    /// Accelerators one fleet of this layout uses.
    pub accelerators: u32,
    /// What one fleet sustains under the SLO, in the demand's unit.
    pub capacity: f64,
    /// `capacity ÷ accelerators`.
    pub capacity_per_accelerator: f64,
    /// The demand sized in fleets of this layout (a device is one fleet).
    pub plan: Plan,
}

/// Every layout's plan, in the order given, and the best.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayoutPlans {
    /// One entry per layout.
    pub layouts: Vec<LayoutPlan>,
    /// Index of the layout with the most capacity per accelerator (the first on a tie).
    pub best: usize,
    /// The best's capacity per accelerator ÷ the runner-up's (absent with one layout).
    pub best_margin: Option<f64>,
}

/// One layout measured: its name, its accelerators, one fleet's capacity.
#[derive(Debug, Clone, PartialEq)]
pub struct LayoutCapacity {
    /// The layout as written.
    pub layout: String,
    /// Accelerators one fleet uses (at least 1).
    pub accelerators: u32,
    /// One fleet's capacity.
    pub capacity: CapacityEstimate,
}

/// Plans `terms` (their capacity and accelerators per device replaced) for each layout.
pub fn plan_layouts(
    terms: &PlanInputs,
    layouts: Vec<LayoutCapacity>,
) -> Result<LayoutPlans, PlanError> {
    let mut planned = Vec::with_capacity(layouts.len());
    for measured in layouts {
        let inputs = PlanInputs {
            capacity_per_device: measured.capacity.per_device,
            capacity_source: measured.capacity.source,
            accelerators_per_device: measured.accelerators.max(1),
            ..terms.clone()
        };
        inputs.validate()?;
        planned.push(LayoutPlan {
            capacity_per_accelerator: inputs.capacity_per_device
                / f64::from(inputs.accelerators_per_device),
            layout: measured.layout,
            accelerators: inputs.accelerators_per_device,
            capacity: inputs.capacity_per_device,
            plan: plan(&inputs),
        });
    }
    let mut order: Vec<usize> = (0..planned.len()).collect();
    order.sort_by(|a, b| {
        let per = |i: &usize| planned[*i].capacity_per_accelerator;
        per(b).total_cmp(&per(a)).then(a.cmp(b))
    });
    let best = order.first().copied().unwrap_or(0);
    let best_margin = order.get(1).and_then(|next| {
        let runner_up = planned[*next].capacity_per_accelerator;
        (runner_up > 0.0).then(|| planned[best].capacity_per_accelerator / runner_up)
    });
    Ok(LayoutPlans {
        layouts: planned,
        best,
        best_margin,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::decide::plan::DemandUnit;

    fn terms() -> PlanInputs {
        PlanInputs {
            peak_demand: 100.0,
            unit: DemandUnit::RequestsPerSec,
            capacity_per_device: 0.0,
            capacity_source: String::new(),
            safety_factor: 1.0,
            failure_headroom: 0,
            growth_per_month: 0.0,
            horizon_months: 0,
            accelerators_per_device: 1,
            accelerator_hour_cost: Some(2.0),
        }
    }

    fn measured(layout: &str, accelerators: u32, capacity: f64) -> LayoutCapacity {
        LayoutCapacity {
            layout: layout.into(),
            accelerators,
            capacity: CapacityEstimate {
                per_device: capacity,
                source: format!("{layout} simulated"),
            },
        }
    }

    #[test]
    fn the_layout_serving_most_per_accelerator_wins_and_each_is_sized_in_fleets() {
        let plans = plan_layouts(
            &terms(),
            vec![
                measured("8", 8, 24.0),
                measured("4xtp2", 8, 20.0),
                measured("2p+6d", 8, 30.0),
            ],
        )
        .unwrap();
        let per: Vec<f64> = plans
            .layouts
            .iter()
            .map(|l| l.capacity_per_accelerator)
            .collect();
        assert_eq!(per, [3.0, 2.5, 3.75]);
        assert_eq!(plans.best, 2);
        assert_eq!(plans.best_margin, Some(1.25));
        // 100 req/s at 30 per fleet: ⌈3.33⌉ = 4 fleets of 8 GPUs; at 24: ⌈4.17⌉ = 5.
        let fleets: Vec<u32> = plans.layouts.iter().map(|l| l.plan.devices_now).collect();
        assert_eq!(fleets, [5, 5, 4]);
        assert_eq!(plans.layouts[2].plan.months[0].accelerators, 32);
        assert_eq!(
            plans.layouts[2].plan.months[0].cost_per_month,
            Some(32.0 * 2.0 * 730.0)
        );
    }

    #[test]
    fn one_layout_has_no_margin_and_a_zero_capacity_is_refused() {
        let one = plan_layouts(&terms(), vec![measured("2p+2d", 4, 10.0)]).unwrap();
        assert_eq!((one.best, one.best_margin), (0, None));
        assert_eq!(one.layouts[0].capacity_per_accelerator, 2.5);
        assert!(plan_layouts(&terms(), vec![measured("8", 8, 0.0)]).is_err());
    }
}
