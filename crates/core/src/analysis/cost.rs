//! Cost and energy per unit of work at a step's measured throughput: accelerator-hours priced
//! by `--gpu-hour-cost`, power from `--watts` per accelerator or from a scraped power gauge
//! (DCGM), divided by completed requests and tokens per second.

use serde::{Deserialize, Serialize};

use super::{Figure, input};
use crate::report::StepReport;
pub use crate::report::analysis::CostReport;

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
    let per_hour = Figure::new(
        "currency/h",
        "accelerators · gpu_hour_cost",
        &[
            ("accelerators", Some(f64::from(accelerators))),
            ("gpu_hour_cost", inputs.gpu_hour_cost),
        ],
        |i| input(i, "accelerators") * input(i, "gpu_hour_cost"),
    );
    let power_formula = if inputs.watts.is_some() {
        "accelerators · watts"
    } else {
        "scraped power, mean over the measurement interval"
    };
    let power_watts = Figure::new("W", power_formula, &[("power_watts", power)], |i| {
        input(i, "power_watts")
    });
    let rates = Rates::of(step);
    let price = Per {
        unit: "currency",
        name: "cost_per_hour",
        value: per_hour.value,
        divisor: 3600.0,
    };
    let energy = Per {
        unit: "",
        name: "power_watts",
        value: power,
        divisor: 1.0,
    };
    Some(CostReport {
        accelerators,
        power_source: power_source.map(str::to_string),
        cost_per_1k_requests: price.figure(None, 1e3, rates.requests),
        cost_per_million_output_tokens: price.figure(None, 1e6, rates.output),
        cost_per_million_total_tokens: price.figure(None, 1e6, rates.total),
        cost_per_hour: per_hour,
        power_watts,
        energy_per_output_token_joules: energy.figure(Some("J"), 1.0, rates.output),
        kwh_per_million_output_tokens: energy.figure(Some("kWh"), KWH_PER_MILLION, rates.output),
        kwh_per_million_total_tokens: energy.figure(Some("kWh"), KWH_PER_MILLION, rates.total),
    })
}

/// Joules per token → kWh per million tokens: 10⁶ tokens, 3.6·10⁶ J per kWh.
const KWH_PER_MILLION: f64 = 1e6 / 3.6e6;

/// The step's work rates, with their names.
struct Rates {
    requests: (&'static str, f64),
    output: (&'static str, f64),
    total: (&'static str, f64),
}

impl Rates {
    fn of(step: &StepReport) -> Rates {
        let t = &step.throughput;
        Rates {
            requests: ("requests_per_sec", t.requests_per_sec),
            output: ("output_tokens_per_sec", t.output_tokens_per_sec),
            total: ("total_tokens_per_sec", t.total_tokens_per_sec),
        }
    }
}

/// A quantity per second (price per second, watts) spread over a work rate.
struct Per {
    unit: &'static str,
    name: &'static str,
    value: Option<f64>,
    /// What turns the quantity into a per-second one (3600 for a price per hour).
    divisor: f64,
}

impl Per {
    /// `value / divisor / rate · scale`.
    fn figure(&self, unit: Option<&str>, scale: f64, (rate_name, rate): (&str, f64)) -> Figure {
        let divisor = if self.divisor == 1.0 {
            String::new()
        } else {
            format!(" / {}", self.divisor)
        };
        let scale_text = if scale == KWH_PER_MILLION {
            " · 10^6 / 3.6·10^6".to_string()
        } else if scale == 1.0 {
            String::new()
        } else {
            format!(" · {scale}")
        };
        let name = self.name;
        Figure::new(
            unit.unwrap_or(self.unit),
            &format!("{name}{divisor} / {rate_name}{scale_text}"),
            &[
                (name, self.value),
                (rate_name, (rate > 0.0).then_some(rate)),
            ],
            |i| input(i, name) / self.divisor / input(i, rate_name) * scale,
        )
    }
}
