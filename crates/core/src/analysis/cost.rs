//! Cost and energy per unit of work at a step's measured throughput: accelerator-hours priced
//! by `--gpu-hour-cost`, power from `--watts` per accelerator or from a scraped power gauge
//! (DCGM), divided by completed requests and tokens per second.

use serde::{Deserialize, Serialize};

use super::{Figure, input};
use crate::report::StepReport;

/// Prices and power of the serving accelerators.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct CostInputs {
    /// Accelerators serving the target (default 1).
    pub accelerators: Option<u32>,
    /// Price of one accelerator-hour, in any currency.
    pub gpu_hour_cost: Option<f64>,
    /// Power drawn per accelerator, watts.
    pub watts: Option<f64>,
}

/// Cost and energy figures of one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostReport {
    /// Accelerators priced and powered.
    pub accelerators: u32,
    /// Where the power figure came from: `--watts` or the scraped metric's name.
    pub power_source: Option<String>,
    /// Price of the deployment per hour.
    pub cost_per_hour: Figure,
    /// Price per 1,000 completed requests.
    pub cost_per_1k_requests: Figure,
    /// Price per million output tokens.
    pub cost_per_million_output_tokens: Figure,
    /// Price per million input + output tokens.
    pub cost_per_million_total_tokens: Figure,
    /// Power drawn by the deployment, watts.
    pub power_watts: Figure,
    /// Joules per output token.
    pub energy_per_output_token_joules: Figure,
    /// kWh per million output tokens.
    pub kwh_per_million_output_tokens: Figure,
    /// kWh per million input + output tokens.
    pub kwh_per_million_total_tokens: Figure,
}

/// Cost and energy of `step`, or `None` when neither a price nor a power figure is known.
pub fn cost(inputs: &CostInputs, step: &StepReport) -> Option<CostReport> {
    let accelerators = inputs.accelerators.unwrap_or(1);
    let scraped = step
        .server
        .as_ref()
        .and_then(|server| server.measurement.power_watts.mean);
    let (power, power_source) = match (inputs.watts, scraped) {
        (Some(watts), _) => (Some(watts * f64::from(accelerators)), Some("--watts")),
        (None, Some(watts)) => (Some(watts), Some("DCGM_FI_DEV_POWER_USAGE")),
        (None, None) => (None, None),
    };
    if inputs.gpu_hour_cost.is_none() && power.is_none() {
        return None;
    }
    let t = &step.throughput;
    let positive = |rate: f64| (rate > 0.0).then_some(rate);
    let per_hour = Figure::new(
        "currency/h",
        "accelerators · gpu_hour_cost",
        &[
            ("accelerators", Some(f64::from(accelerators))),
            ("gpu_hour_cost", inputs.gpu_hour_cost),
        ],
        |i| input(i, "accelerators") * input(i, "gpu_hour_cost"),
    );
    let price_per = |unit: &str, scale: f64, rate_name: &str, rate: f64| {
        Figure::new(
            unit,
            &format!("cost_per_hour / 3600 / {rate_name} · {scale}"),
            &[
                ("cost_per_hour", per_hour.value),
                (rate_name, positive(rate)),
            ],
            |i| input(i, "cost_per_hour") / 3600.0 / input(i, rate_name) * scale,
        )
    };
    let power_watts = Figure::new(
        "W",
        if inputs.watts.is_some() {
            "accelerators · watts"
        } else {
            "scraped power, mean over the measurement interval"
        },
        &[("power_watts", power)],
        |i| input(i, "power_watts"),
    );
    let energy_per = |unit: &str, formula: &str, scale: f64, rate_name: &str, rate: f64| {
        Figure::new(
            unit,
            formula,
            &[("power_watts", power), (rate_name, positive(rate))],
            |i| input(i, "power_watts") / input(i, rate_name) * scale,
        )
    };
    Some(CostReport {
        accelerators,
        power_source: power_source.map(str::to_string),
        cost_per_1k_requests: price_per("currency", 1e3, "requests_per_sec", t.requests_per_sec),
        cost_per_million_output_tokens: price_per(
            "currency",
            1e6,
            "output_tokens_per_sec",
            t.output_tokens_per_sec,
        ),
        cost_per_million_total_tokens: price_per(
            "currency",
            1e6,
            "total_tokens_per_sec",
            t.total_tokens_per_sec,
        ),
        cost_per_hour: per_hour,
        power_watts,
        energy_per_output_token_joules: energy_per(
            "J",
            "power_watts / output_tokens_per_sec",
            1.0,
            "output_tokens_per_sec",
            t.output_tokens_per_sec,
        ),
        kwh_per_million_output_tokens: energy_per(
            "kWh",
            "power_watts / output_tokens_per_sec · 10^6 / 3.6·10^6",
            1e6 / 3.6e6,
            "output_tokens_per_sec",
            t.output_tokens_per_sec,
        ),
        kwh_per_million_total_tokens: energy_per(
            "kWh",
            "power_watts / total_tokens_per_sec · 10^6 / 3.6·10^6",
            1e6 / 3.6e6,
            "total_tokens_per_sec",
            t.total_tokens_per_sec,
        ),
    })
}
