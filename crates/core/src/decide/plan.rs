//! Capacity planning arithmetic: how many devices a peak demand needs, given what one device
//! sustains (measured, taken from a report, or simulated), a safety factor, spare devices for
//! failures (N−k) and monthly growth over a horizon — with every step of the arithmetic
//! written out. The CLI only prints a [`Plan`].

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Hours in a month (365 · 24 / 12).
pub const HOURS_PER_MONTH: f64 = 730.0;

/// Default safety factor on the peak demand.
pub const DEFAULT_SAFETY_FACTOR: f64 = 1.3;

/// Unit of demand and capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DemandUnit {
    /// Requests per second.
    RequestsPerSec,
    /// Output tokens per second.
    OutputTokensPerSec,
}

impl DemandUnit {
    /// The unit as printed.
    pub fn label(self) -> &'static str {
        match self {
            DemandUnit::RequestsPerSec => "req/s",
            DemandUnit::OutputTokensPerSec => "output tok/s",
        }
    }
}

/// What a plan is computed from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanInputs {
    /// Peak demand, in `unit`.
    pub peak_demand: f64,
    /// Unit of demand and capacity.
    pub unit: DemandUnit,
    /// What one device sustains under the SLO, in `unit`.
    pub capacity_per_device: f64,
    /// Where that capacity comes from, for people.
    pub capacity_source: String,
    /// Multiplier on demand (≥ 1).
    pub safety_factor: f64,
    /// Devices that may fail while the rest still carry the load (N−k).
    pub failure_headroom: u32,
    /// Demand growth per month, as a fraction (0.1 = 10 %).
    pub growth_per_month: f64,
    /// Months to plan ahead.
    pub horizon_months: u32,
    /// Accelerators per device (a tensor-parallel replica is one device of several GPUs).
    pub accelerators_per_device: u32,
    /// Price of one accelerator-hour.
    pub accelerator_hour_cost: Option<f64>,
}

/// A plan input that cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{flag}: {message}")]
pub struct PlanError {
    /// The flag to fix.
    pub flag: String,
    /// What is wrong.
    pub message: String,
}

fn plan_error(flag: &str, message: impl Into<String>) -> PlanError {
    PlanError {
        flag: flag.to_string(),
        message: message.into(),
    }
}

impl PlanInputs {
    /// Checks every input, naming the flag to fix.
    pub fn validate(&self) -> Result<(), PlanError> {
        let positive = |v: f64| v.is_finite() && v > 0.0;
        if !positive(self.peak_demand) {
            return Err(plan_error("peak demand", "must be a positive number"));
        }
        if !positive(self.capacity_per_device) {
            return Err(plan_error("--capacity", "must be a positive number"));
        }
        if !(self.safety_factor.is_finite() && self.safety_factor >= 1.0) {
            return Err(plan_error(
                "--safety-factor",
                "must be at least 1 (e.g. 1.3)",
            ));
        }
        if !(self.growth_per_month.is_finite() && self.growth_per_month > -1.0) {
            return Err(plan_error("--growth", "must be above −100 % per month"));
        }
        if self.horizon_months > 120 {
            return Err(plan_error("--horizon", "at most 120 months"));
        }
        if self.accelerators_per_device == 0 {
            return Err(plan_error(
                "--accelerators-per-device",
                "must be at least 1",
            ));
        }
        if let Some(cost) = self.accelerator_hour_cost
            && !(cost.is_finite() && cost >= 0.0)
        {
            return Err(plan_error("--gpu-hour-cost", "must be 0 or positive"));
        }
        Ok(())
    }
}

/// Devices needed in one month of the horizon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanMonth {
    /// Months from now (0 = now).
    pub month: u32,
    /// Peak demand that month.
    pub demand: f64,
    /// Demand × safety factor.
    pub required_capacity: f64,
    /// Devices: ⌈required ÷ capacity per device⌉ + failure headroom.
    pub devices: u32,
    /// Accelerators: devices × accelerators per device.
    pub accelerators: u32,
    /// Accelerators × hourly price × 730 h.
    pub cost_per_month: Option<f64>,
}

/// What is left when devices fail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailureCheck {
    /// Devices lost (the failure headroom, or 1 when none was planned).
    pub lost: u32,
    /// Devices left.
    pub devices_left: u32,
    /// Their capacity.
    pub capacity: f64,
    /// Capacity ÷ peak demand.
    pub capacity_over_peak: f64,
    /// Whether the peak is still served.
    pub meets_peak: bool,
    /// Whether peak × safety factor is still served.
    pub meets_safety_factor: bool,
}

/// A capacity plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The inputs.
    pub inputs: PlanInputs,
    /// Devices needed now.
    pub devices_now: u32,
    /// Devices needed at the end of the horizon.
    pub devices_at_horizon: u32,
    /// Month by month, 0 to the horizon.
    pub months: Vec<PlanMonth>,
    /// Capacity after losing devices, now.
    pub failure_check: FailureCheck,
    /// The arithmetic, one line per step.
    pub arithmetic: Vec<String>,
}

/// ⌈x⌉, forgiving floating-point noise (234.00000000000003 / 40 is 5.85, 240 / 40 is 6).
fn ceil_devices(x: f64) -> u32 {
    let rounded = x.round();
    let value = if (x - rounded).abs() < 1e-9 {
        rounded
    } else {
        x.ceil()
    };
    value.clamp(0.0, f64::from(u32::MAX)) as u32
}

/// The plan for `inputs` (which must have passed [`PlanInputs::validate`]).
pub fn plan(inputs: &PlanInputs) -> Plan {
    let months: Vec<PlanMonth> = (0..=inputs.horizon_months)
        .map(|month| plan_month(inputs, month))
        .collect();
    let now = months[0].clone();
    let at_horizon = months.last().unwrap_or(&now).clone();
    let failure_check = failure_check(inputs, now.devices);
    let arithmetic = arithmetic(inputs, &now, &at_horizon, &failure_check);
    Plan {
        inputs: inputs.clone(),
        devices_now: now.devices,
        devices_at_horizon: at_horizon.devices,
        months,
        failure_check,
        arithmetic,
    }
}

fn plan_month(inputs: &PlanInputs, month: u32) -> PlanMonth {
    let demand = inputs.peak_demand * (1.0 + inputs.growth_per_month).powi(month as i32);
    let required_capacity = demand * inputs.safety_factor;
    let devices = ceil_devices(required_capacity / inputs.capacity_per_device)
        .saturating_add(inputs.failure_headroom);
    let accelerators = devices.saturating_mul(inputs.accelerators_per_device);
    PlanMonth {
        month,
        demand,
        required_capacity,
        devices,
        accelerators,
        cost_per_month: inputs
            .accelerator_hour_cost
            .map(|cost| f64::from(accelerators) * cost * HOURS_PER_MONTH),
    }
}

fn failure_check(inputs: &PlanInputs, devices: u32) -> FailureCheck {
    let lost = inputs.failure_headroom.max(1).min(devices);
    let devices_left = devices - lost;
    let capacity = f64::from(devices_left) * inputs.capacity_per_device;
    let required = inputs.peak_demand * inputs.safety_factor;
    FailureCheck {
        lost,
        devices_left,
        capacity,
        capacity_over_peak: capacity / inputs.peak_demand,
        meets_peak: capacity >= inputs.peak_demand - 1e-9,
        meets_safety_factor: capacity >= required - 1e-9 * required,
    }
}

fn arithmetic(
    inputs: &PlanInputs,
    now: &PlanMonth,
    horizon: &PlanMonth,
    check: &FailureCheck,
) -> Vec<String> {
    let unit = inputs.unit.label();
    let c = inputs.capacity_per_device;
    let base = now.devices - inputs.failure_headroom;
    let mut lines = vec![
        format!(
            "required = peak {} {unit} × safety {} = {} {unit}",
            num(inputs.peak_demand),
            num(inputs.safety_factor),
            num(now.required_capacity)
        ),
        format!(
            "devices = ⌈{} / {} per device⌉ = ⌈{}⌉ = {base}",
            num(now.required_capacity),
            num(c),
            num(now.required_capacity / c)
        ),
    ];
    if inputs.failure_headroom > 0 {
        lines.push(format!(
            "+ {} spare for N−{} → {} devices",
            inputs.failure_headroom, inputs.failure_headroom, now.devices
        ));
    }
    lines.push(failure_line(inputs, now.devices, check));
    if inputs.horizon_months > 0 {
        lines.push(horizon_line(inputs, horizon));
    }
    if inputs.accelerators_per_device > 1 {
        lines.push(format!(
            "accelerators = {} devices × {} per device = {}",
            now.devices, inputs.accelerators_per_device, now.accelerators
        ));
    }
    if let (Some(cost), Some(per_month)) = (inputs.accelerator_hour_cost, now.cost_per_month) {
        lines.push(format!(
            "cost now = {} accelerators × {} per hour × {} h = {} per month",
            now.accelerators,
            num(cost),
            HOURS_PER_MONTH,
            num(per_month)
        ));
    }
    lines
}

fn failure_line(inputs: &PlanInputs, devices: u32, check: &FailureCheck) -> String {
    let peak = if check.meets_peak {
        "serves the peak"
    } else {
        "BELOW the peak"
    };
    let safety = if check.meets_safety_factor {
        "meets"
    } else {
        "below"
    };
    format!(
        "after losing {} of {devices}: {} × {} = {} {} = {}× peak ({peak}; {safety} peak × safety {})",
        check.lost,
        check.devices_left,
        num(inputs.capacity_per_device),
        num(check.capacity),
        inputs.unit.label(),
        num(check.capacity_over_peak),
        num(inputs.safety_factor)
    )
}

fn horizon_line(inputs: &PlanInputs, horizon: &PlanMonth) -> String {
    let spare = if inputs.failure_headroom > 0 {
        format!(" + {}", inputs.failure_headroom)
    } else {
        String::new()
    };
    format!(
        "month {m}: peak {} × (1 + {})^{m} = {demand} {} → ⌈{demand} × {} / {}⌉{spare} = {} devices",
        num(inputs.peak_demand),
        num(inputs.growth_per_month),
        inputs.unit.label(),
        num(inputs.safety_factor),
        num(inputs.capacity_per_device),
        horizon.devices,
        m = horizon.month,
        demand = num(horizon.demand),
    )
}

/// A number with up to 3 decimals, trailing zeros removed.
fn num(value: f64) -> String {
    let text = format!("{value:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    text.to_string()
}

/// One device's capacity read from a goodput report.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacityEstimate {
    /// Per device, in the unit asked.
    pub per_device: f64,
    /// Where it came from, for people.
    pub source: String,
}

/// Reads one device's sustainable capacity from a goodput `report.json`.
///
/// With a `capacity` section (`goodput capacity`): the capacity is the passing probe at the
/// lower bound — its arrival rate for a rate search, its completed requests per second for a
/// concurrency search, its output tokens per second for a token demand. Without one: the best
/// step that was stable and met its SLO (its goodput, or its throughput without an SLO).
/// Either is divided by the devices that served it: `devices_in_report`, else the capacity
/// section's accelerators ÷ `accelerators_per_device`, else 1.
pub fn capacity_from_report(
    report: &Value,
    unit: DemandUnit,
    devices_in_report: Option<u32>,
    accelerators_per_device: u32,
) -> Result<CapacityEstimate, PlanError> {
    let steps = report["steps"]
        .as_array()
        .ok_or_else(|| plan_error("--capacity-from", "not a goodput report (no `steps`)"))?;
    let capacity = &report["capacity"];
    let devices = devices_in_report
        .or_else(|| {
            let accelerators = capacity["accelerators"].as_u64()?;
            let per_device = u64::from(accelerators_per_device.max(1));
            u32::try_from((accelerators / per_device).max(1)).ok()
        })
        .unwrap_or(1)
        .max(1);
    let (value, origin) = if capacity.is_object() {
        from_capacity_section(capacity, steps, unit)?
    } else {
        best_step(steps, unit)?
    };
    Ok(CapacityEstimate {
        per_device: value / f64::from(devices),
        source: format!(
            "{origin}: {value:.3} {} ÷ {devices} device(s)",
            unit.label()
        ),
    })
}

fn from_capacity_section(
    capacity: &Value,
    steps: &[Value],
    unit: DemandUnit,
) -> Result<(f64, String), PlanError> {
    let lower = capacity["lower_bound"].as_f64().ok_or_else(|| {
        plan_error(
            "--capacity-from",
            "the capacity search found no passing load; give --capacity instead",
        )
    })?;
    let probe = capacity["probes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["outcome"] == "pass" && p["load"].as_f64() == Some(lower));
    let step = probe
        .and_then(|p| p["index"].as_u64())
        .and_then(|index| steps.get(usize::try_from(index).ok()?));
    let value = match (unit, capacity["dimension"].as_str()) {
        (DemandUnit::RequestsPerSec, Some("rate")) => Some(lower),
        (DemandUnit::RequestsPerSec, _) => probe.and_then(|p| p["requests_per_sec"].as_f64()),
        (DemandUnit::OutputTokensPerSec, _) => {
            step.and_then(|s| s["throughput"]["output_tokens_per_sec"].as_f64())
        }
    };
    let value = value.ok_or_else(|| {
        plan_error(
            "--capacity-from",
            "the capacity section has no figure in this unit; give --capacity instead",
        )
    })?;
    Ok((value, format!("capacity search (passing load {lower})")))
}

fn best_step(steps: &[Value], unit: DemandUnit) -> Result<(f64, String), PlanError> {
    let key = match unit {
        DemandUnit::RequestsPerSec => "requests_per_sec",
        DemandUnit::OutputTokensPerSec => "output_tokens_per_sec",
    };
    let best = steps
        .iter()
        .enumerate()
        .filter(|(_, step)| step["stability"]["stable"].as_bool() == Some(true))
        .filter(|(_, step)| step["goodput"]["objectives_passed"].as_bool() != Some(false))
        .filter_map(|(index, step)| {
            let value = step["goodput"][key]
                .as_f64()
                .or_else(|| step["throughput"][key].as_f64())?;
            Some((index, value))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1));
    let (index, value) = best.ok_or_else(|| {
        plan_error(
            "--capacity-from",
            "no step of the report was stable and met its SLO; give --capacity instead",
        )
    })?;
    Ok((value, format!("step {} of the report", index + 1)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn worked_example() -> PlanInputs {
        PlanInputs {
            peak_demand: 180.0,
            unit: DemandUnit::RequestsPerSec,
            capacity_per_device: 40.0,
            capacity_source: "given".into(),
            safety_factor: DEFAULT_SAFETY_FACTOR,
            failure_headroom: 0,
            growth_per_month: 0.0,
            horizon_months: 0,
            accelerators_per_device: 1,
            accelerator_hour_cost: None,
        }
    }

    #[test]
    fn one_eighty_requests_at_forty_per_device_times_1_3_need_six_devices() {
        let inputs = worked_example();
        inputs.validate().unwrap();
        let plan = plan(&inputs);
        assert_eq!(plan.devices_now, 6);
        assert!((plan.months[0].required_capacity - 234.0).abs() < 1e-9);
        assert!(
            plan.arithmetic[0].contains("180 req/s × safety 1.3 = 234 req/s"),
            "{:?}",
            plan.arithmetic
        );
        assert!(
            plan.arithmetic[1].contains("⌈234 / 40 per device⌉ = ⌈5.85⌉ = 6"),
            "{:?}",
            plan.arithmetic
        );
        // Losing one of six leaves 200 req/s: the peak is served, the safety margin is not.
        let check = &plan.failure_check;
        assert_eq!((check.lost, check.devices_left), (1, 5));
        assert_eq!(check.capacity, 200.0);
        assert!(check.meets_peak && !check.meets_safety_factor);
    }

    #[test]
    fn n_minus_one_adds_a_spare_that_keeps_the_safety_margin() {
        let inputs = PlanInputs {
            failure_headroom: 1,
            ..worked_example()
        };
        let plan = plan(&inputs);
        assert_eq!(plan.devices_now, 7);
        let check = &plan.failure_check;
        assert_eq!(check.devices_left, 6);
        assert_eq!(check.capacity, 240.0);
        assert!(check.meets_peak && check.meets_safety_factor);
        assert!((check.capacity_over_peak - 240.0 / 180.0).abs() < 1e-12);
        assert!(
            plan.arithmetic
                .iter()
                .any(|l| l.contains("N−1 → 7 devices"))
        );
    }

    #[test]
    fn growth_and_cost_over_a_horizon() {
        let inputs = PlanInputs {
            growth_per_month: 0.1,
            horizon_months: 6,
            accelerators_per_device: 2,
            accelerator_hour_cost: Some(2.5),
            ..worked_example()
        };
        let plan = plan(&inputs);
        assert_eq!(plan.months.len(), 7);
        // 180 · 1.1^6 = 318.881 req/s; × 1.3 = 414.545; / 40 = 10.36 → 11 devices.
        assert!((plan.months[6].demand - 318.88098).abs() < 1e-6);
        assert_eq!(plan.devices_at_horizon, 11);
        // Now: 6 devices × 2 accelerators × 2.5 × 730 h.
        assert_eq!(plan.months[0].accelerators, 12);
        assert_eq!(plan.months[0].cost_per_month, Some(12.0 * 2.5 * 730.0));
        assert!(plan.months.windows(2).all(|w| w[0].devices <= w[1].devices));
    }

    #[test]
    fn exact_multiples_do_not_round_up() {
        let inputs = PlanInputs {
            peak_demand: 200.0,
            safety_factor: 1.0,
            ..worked_example()
        };
        assert_eq!(plan(&inputs).devices_now, 5);
    }

    #[test]
    fn bad_inputs_name_the_flag() {
        let mut inputs = worked_example();
        inputs.safety_factor = 0.8;
        assert_eq!(inputs.validate().unwrap_err().flag, "--safety-factor");
        inputs = worked_example();
        inputs.capacity_per_device = 0.0;
        assert_eq!(inputs.validate().unwrap_err().flag, "--capacity");
    }

    #[test]
    fn capacity_comes_from_the_best_stable_step_that_met_its_slo() {
        let report = serde_json::json!({"steps": [
            {"stability": {"stable": true}, "goodput": {"requests_per_sec": 30.0, "objectives_passed": null},
             "throughput": {"requests_per_sec": 31.0}},
            {"stability": {"stable": true}, "goodput": {"requests_per_sec": 80.0, "objectives_passed": null},
             "throughput": {"requests_per_sec": 82.0}},
            {"stability": {"stable": false}, "goodput": {"requests_per_sec": 95.0}},
            {"stability": {"stable": true}, "goodput": {"requests_per_sec": 90.0, "objectives_passed": false}}
        ]});
        let estimate =
            capacity_from_report(&report, DemandUnit::RequestsPerSec, Some(2), 1).unwrap();
        assert_eq!(estimate.per_device, 40.0);
        assert!(estimate.source.contains("step 2"), "{}", estimate.source);
        let none = serde_json::json!({"steps": [{"stability": {"stable": false}}]});
        assert!(capacity_from_report(&none, DemandUnit::RequestsPerSec, None, 1).is_err());
    }

    #[test]
    fn capacity_comes_from_the_passing_probe_of_a_capacity_search() {
        let report = serde_json::json!({
            "steps": [
                {"throughput": {"output_tokens_per_sec": 5000.0}},
                {"throughput": {"output_tokens_per_sec": 9600.0}},
                {"throughput": {"output_tokens_per_sec": 11000.0}}
            ],
            "capacity": {
                "dimension": "rate", "lower_bound": 80.0, "upper_bound": 90.0, "accelerators": 2,
                "probes": [
                    {"index": 0, "load": 40.0, "outcome": "pass", "requests_per_sec": 40.0},
                    {"index": 1, "load": 80.0, "outcome": "pass", "requests_per_sec": 79.5},
                    {"index": 2, "load": 90.0, "outcome": "fail", "requests_per_sec": 85.0}
                ]
            }
        });
        let rps = capacity_from_report(&report, DemandUnit::RequestsPerSec, None, 1).unwrap();
        assert_eq!(
            rps.per_device, 40.0,
            "80 req/s over the report's 2 accelerators"
        );
        let tps = capacity_from_report(&report, DemandUnit::OutputTokensPerSec, None, 2).unwrap();
        assert_eq!(
            tps.per_device, 9600.0,
            "one device of 2 accelerators served it"
        );
        let failed = serde_json::json!({"steps": [], "capacity": {"lower_bound": null}});
        let error = capacity_from_report(&failed, DemandUnit::RequestsPerSec, None, 1).unwrap_err();
        assert!(error.message.contains("no passing load"));
    }
}
