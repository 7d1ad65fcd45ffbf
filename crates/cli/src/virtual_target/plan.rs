//! `goodput plan --simulate`: one device's capacity from a capacity search of the simulated
//! model × accelerator in virtual time, with an account of what limits it (the decode step at
//! the batch the capacity runs, memory- or compute-bound).

use anyhow::{Context, Result};
use goodput_core::decide::capacity::{Outcome, ProbePlan, SearchConfig};
use goodput_core::decide::plan::{CapacityEstimate, DemandUnit};
use goodput_core::report::StepReport;
use goodput_sim::config::BatchingConfig;

use crate::options::plan::SimulateOptions;
use crate::virtual_target::{VirtualTarget, virtual_capacity};

/// One device's capacity in `unit`, and the explanation of where it comes from.
pub(crate) fn estimate(
    simulate: &SimulateOptions,
    unit: DemandUnit,
) -> Result<(CapacityEstimate, String)> {
    estimate_as(simulate, unit, None)
}

/// One fleet of `layout`'s capacity in `unit` (over `accelerators`), and a line on it.
pub(crate) fn estimate_layout(
    layout: &str,
    accelerators: u32,
    simulate: &SimulateOptions,
    unit: DemandUnit,
) -> Result<(CapacityEstimate, String)> {
    estimate_as(simulate, unit, Some((layout, accelerators)))
}

/// What is simulated, for people: the model on its accelerators, or a layout's fleet of it.
fn hardware(simulate: &SimulateOptions, layout: Option<(&str, u32)>) -> String {
    match (&simulate.engine, layout) {
        (Some(engine), None) => format!(
            "{} on {} × {}",
            engine.model.name, engine.tensor_parallel, engine.gpu.name
        ),
        (Some(engine), Some((layout, gpus))) => format!(
            "{} as {layout} on {gpus} × {}",
            engine.model.name, engine.gpu.name
        ),
        (None, Some((layout, gpus))) => {
            format!("fixed-timing engines as {layout} on {gpus} accelerators")
        }
        (None, None) => "fixed-timing engine".into(),
    }
}

fn estimate_as(
    simulate: &SimulateOptions,
    unit: DemandUnit,
    layout: Option<(&str, u32)>,
) -> Result<(CapacityEstimate, String)> {
    let what = hardware(simulate, layout);
    let plan = ProbePlan::for_planning(simulate.seed, simulate.criteria.clone());
    let target = VirtualTarget {
        sim: simulate.sim.clone(),
        requests: crate::virtual_target::VirtualRequests::fixed(
            simulate.input_tokens,
            simulate.output_tokens,
            simulate.seed,
        ),
    };
    let (start, calibration) = super::capacity::calibrated_start(&target, &plan.base)?;
    let search = SearchConfig {
        ceiling: Some(calibration.throughput.requests_per_sec),
        ..SearchConfig::around(start)
    };
    let (capacity, steps) = virtual_capacity(&target, &plan, search, |_| {});
    let rate = capacity.lower_bound.with_context(|| {
        format!(
            "the simulated {what} cannot meet --slo {} even at {:.3} req/s",
            plan.criteria.slo, search.min
        )
    })?;
    let at_capacity = capacity
        .probes
        .iter()
        .position(|p| p.load == rate && p.outcome == Outcome::Pass)
        .and_then(|i| steps.get(i));
    let per_device = match unit {
        DemandUnit::RequestsPerSec => rate,
        DemandUnit::OutputTokensPerSec => rate * f64::from(simulate.output_tokens),
    };
    let source = format!(
        "simulated {what}, {}+{} tokens, SLO {} at {:.1} % with {:.0} % confidence ({} \
         probes, virtual time)",
        simulate.input_tokens,
        simulate.output_tokens,
        plan.criteria.slo,
        plan.criteria.attainment * 100.0,
        plan.criteria.confidence * 100.0,
        capacity.probes.len()
    );
    let explanation = match (&simulate.engine, layout) {
        (Some(engine), None) => explain(engine, simulate, rate, capacity.upper_bound, at_capacity),
        _ => explain_layout(&what, rate, layout, capacity.upper_bound, at_capacity),
    };
    Ok((CapacityEstimate { per_device, source }, explanation))
}

/// One line on a layout's (or a fixed-timing engine's) capacity: the rate, per accelerator,
/// where it fails, and its TTFT and TPOT at capacity.
fn explain_layout(
    what: &str,
    rate: f64,
    layout: Option<(&str, u32)>,
    upper: Option<f64>,
    at_capacity: Option<&StepReport>,
) -> String {
    let gpus = layout.map_or(1, |(_, gpus)| gpus.max(1));
    let mut line = format!(
        "simulated capacity: {rate:.2} req/s ({:.2} per accelerator; {what}){}",
        rate / f64::from(gpus),
        upper.map_or(String::new(), |u| format!("; fails at {u:.2} req/s"))
    );
    if let Some(step) = at_capacity {
        let latency = &step.latency_ms;
        line.push_str(&format!(
            "; at capacity TTFT p99 {:.0} ms, TPOT p99 {:.1} ms",
            latency.ttft.p99.unwrap_or(f64::NAN),
            latency.tpot.p99.unwrap_or(f64::NAN)
        ));
    }
    line
}

/// `value` units a second with a decimal prefix and three significant digits: 3.35 TB/s for
/// an H100's HBM, 66.7 GFLOP/s for a calibrated CPU.
fn per_second(value: f64, unit: &str) -> String {
    let prefixes = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")];
    let (scale, prefix) = prefixes
        .into_iter()
        .find(|(scale, _)| value >= *scale)
        .unwrap_or((1.0, ""));
    let scaled = value / scale;
    let decimals = if scaled >= 100.0 {
        0
    } else if scaled >= 10.0 {
        1
    } else {
        2
    };
    format!("{scaled:.decimals$} {prefix}{unit}/s")
}

/// Where the capacity comes from: the batch it runs (Little's law) and that batch's decode
/// step on this hardware.
fn explain(
    engine: &BatchingConfig,
    simulate: &SimulateOptions,
    rate: f64,
    upper: Option<f64>,
    at_capacity: Option<&StepReport>,
) -> String {
    let mut lines = vec![format!(
        "simulated capacity: {rate:.2} req/s per device ({} on {} × {}: {} memory, {} dense){}",
        engine.model.name,
        engine.tensor_parallel,
        engine.gpu.name,
        per_second(engine.gpu.hbm_tb_per_sec * 1e12, "B"),
        per_second(engine.gpu.peak_flops(engine.model.weight_dtype), "FLOP"),
        upper.map_or(String::new(), |u| format!("; fails at {u:.2} req/s"))
    )];
    if let Some(step) = at_capacity {
        let latency = &step.latency_ms;
        let e2e_secs = latency.e2e.mean.unwrap_or(0.0) / 1000.0;
        let batch = (rate * e2e_secs).round().max(1.0) as u32;
        let context = simulate.input_tokens + simulate.output_tokens / 2;
        let decode = goodput_sim::explain::decode_step(engine, batch, context);
        lines.push(format!(
            "at capacity: TTFT p99 {:.0} ms, TPOT p99 {:.1} ms; about {batch} requests in flight (rate × mean E2E {e2e_secs:.2} s)",
            latency.ttft.p99.unwrap_or(f64::NAN),
            latency.tpot.p99.unwrap_or(f64::NAN),
        ));
        lines.push(format!(
            "a decode step of {batch} sequences at {context} tokens of context takes {:.2} ms: {}-bound (weights and KV streamed in {:.2} ms, FLOPs in {:.2} ms), so {}",
            decode.total_secs * 1e3,
            decode.bound,
            decode.memory_secs * 1e3,
            decode.compute_secs * 1e3,
            if decode.bound == "memory" {
                "memory bandwidth sets how large a batch stays within the TPOT target"
            } else {
                "compute throughput sets how many tokens per second the device produces"
            }
        ));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::per_second;

    #[test]
    fn rates_keep_three_significant_digits_at_any_scale() {
        assert_eq!(per_second(3.35e12, "B"), "3.35 TB/s");
        assert_eq!(per_second(989.5e12, "FLOP"), "990 TFLOP/s");
        assert_eq!(per_second(66.7038e9, "FLOP"), "66.7 GFLOP/s");
        assert_eq!(per_second(160.33e9, "B"), "160 GB/s");
        assert_eq!(per_second(0.5, "B"), "0.50 B/s");
    }
}
