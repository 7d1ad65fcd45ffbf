//! Sweeps: a list of load levels (concurrency, arrival rate or batch size), each run as a
//! full measured step, and the knee — the last level after which throughput gains fall below
//! a threshold while latency keeps rising.

use std::sync::Arc;

use crate::backend::{RequestInput, RequestSpec};
use crate::report::StepReport;
use crate::report::repeats::RepeatsReport;
pub use crate::report::sweep::{Knee, SweepDimension, SweepReport};
use crate::workload::Workload;

/// A load-step list that cannot be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid steps `{text}`: {reason} (e.g. `1,2,4,8`, `1..256x2` doubling, `10..80+10` linear)"
)]
pub struct StepsError {
    /// The input.
    pub text: String,
    /// What is wrong.
    pub reason: &'static str,
}

/// Parses load steps: a list (`1,2,4,8`), a geometric range (`1..256x2`) or a linear range
/// (`10..80+10`). Steps must be positive and increasing.
pub fn parse_steps(text: &str) -> Result<Vec<f64>, StepsError> {
    let error = |reason| StepsError {
        text: text.to_string(),
        reason,
    };
    let number = |s: &str| s.trim().parse::<f64>().map_err(|_| error("not a number"));
    let steps = if let Some((from, rest)) = text.split_once("..") {
        let (to, step, geometric) = match (rest.split_once('x'), rest.split_once('+')) {
            (Some((to, factor)), _) => (to, number(factor)?, true),
            (None, Some((to, increment))) => (to, number(increment)?, false),
            (None, None) => return Err(error("a range needs `xFACTOR` or `+STEP`")),
        };
        let (from, to) = (number(from)?, number(to)?);
        if (geometric && step <= 1.0) || (!geometric && step <= 0.0) {
            return Err(error("the range must grow"));
        }
        let mut steps = Vec::new();
        let mut value = from;
        while value <= to * (1.0 + 1e-9) && steps.len() < 10_000 {
            steps.push(value);
            value = if geometric {
                value * step
            } else {
                value + step
            };
        }
        steps
    } else {
        text.split(',')
            .map(number)
            .collect::<Result<Vec<f64>, _>>()?
    };
    if steps.is_empty() {
        return Err(error("no step"));
    }
    if steps.iter().any(|s| !(s.is_finite() && *s > 0.0)) {
        return Err(error("steps must be positive"));
    }
    if steps.windows(2).any(|w| w[1] <= w[0]) {
        return Err(error("steps must increase"));
    }
    Ok(steps)
}

/// Throughput of a step for knee detection: items per second for batch sweeps, requests per
/// second otherwise.
fn throughput(dimension: SweepDimension, step: &StepReport) -> f64 {
    match dimension {
        SweepDimension::Batch => step.throughput.items_per_sec,
        SweepDimension::Concurrency | SweepDimension::Rate => step.throughput.requests_per_sec,
    }
}

/// The first step after which throughput grows by less than `min_gain` (relative) while
/// E2E p50 keeps rising.
pub fn find_knee(
    dimension: SweepDimension,
    loads: &[f64],
    steps: &[StepReport],
    min_gain: f64,
) -> Option<Knee> {
    let points: Vec<(f64, Option<f64>)> = steps
        .iter()
        .map(|step| (throughput(dimension, step), step.latency_ms.e2e.p50))
        .collect();
    knee_on(loads, &points, min_gain)
}

/// A finished sweep's section and, when its levels were measured in rounds (`plan.repeats`
/// above 1), the repeats section of its levels: the knee is then found on each level's mean
/// throughput and mean E2E p50 across its runs (one noisy run cannot place it), its `step`
/// the level's index (its step in the first round).
pub fn conclude(plan: &SweepReport, steps: &[StepReport]) -> (SweepReport, Option<RepeatsReport>) {
    let rounds = plan.repeats.unwrap_or(1);
    if rounds <= 1 || plan.loads.is_empty() {
        let knee = find_knee(plan.dimension, &plan.loads, steps, plan.knee_min_gain);
        return (
            SweepReport {
                knee,
                ..plan.clone()
            },
            None,
        );
    }
    let per_round = plan.loads.len();
    let mean = |values: Vec<f64>| {
        (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
    };
    let points: Vec<(f64, Option<f64>)> = (0..per_round.min(steps.len()))
        .map(|level| {
            let runs: Vec<&StepReport> = steps.iter().skip(level).step_by(per_round).collect();
            let rate = runs.iter().map(|s| throughput(plan.dimension, s)).collect();
            let e2e = runs.iter().filter_map(|s| s.latency_ms.e2e.p50).collect();
            (mean(rate).unwrap_or(0.0), mean(e2e))
        })
        .collect();
    let knee = knee_on(&plan.loads, &points, plan.knee_min_gain);
    let levels = super::repeats::levels(&plan.loads, steps);
    (
        SweepReport {
            knee,
            ..plan.clone()
        },
        Some(levels),
    )
}

/// The first point (throughput, E2E p50) after which throughput grows by less than
/// `min_gain` while E2E p50 rises.
fn knee_on(loads: &[f64], points: &[(f64, Option<f64>)], min_gain: f64) -> Option<Knee> {
    points.windows(2).enumerate().find_map(|(i, pair)| {
        let (before, after) = (pair[0].0, pair[1].0);
        let (lat_before, lat_after) = (pair[0].1?, pair[1].1?);
        let gain = if before > 0.0 {
            (after - before) / before
        } else {
            f64::INFINITY
        };
        let rise = if lat_before > 0.0 {
            (lat_after - lat_before) / lat_before
        } else {
            0.0
        };
        (gain < min_gain && rise > 0.0).then(|| Knee {
            step: i,
            load: loads.get(i).copied().unwrap_or(f64::NAN),
            next_throughput_gain: gain,
            next_latency_rise: rise,
        })
    })
}

/// Sends `batch` prompts of an inner workload per request (completions API list of prompts):
/// request `i` carries the inner requests `i·batch … i·batch + batch − 1`, and asks for the
/// model, adapter and class of its first (a mix labels the batch by its first prompt's draw).
#[derive(Debug, Clone)]
pub struct BatchedWorkload {
    /// Where prompts come from.
    pub inner: Arc<dyn Workload>,
    /// Prompts per request.
    pub batch: u32,
}

impl Workload for BatchedWorkload {
    fn request(&self, index: u64) -> RequestSpec {
        let batch = u64::from(self.batch.max(1));
        let specs: Vec<RequestSpec> = (0..batch)
            .map(|j| self.inner.request(index * batch + j))
            .collect();
        let prompts = specs
            .iter()
            .map(|spec| match &spec.input {
                RequestInput::Text(text) => text.clone(),
                RequestInput::Messages(messages) => messages
                    .iter()
                    .map(|m| m.content.text())
                    .collect::<Vec<_>>()
                    .join("\n"),
                RequestInput::Batch(prompts) => prompts.join("\n"),
            })
            .collect();
        RequestSpec {
            index,
            input: RequestInput::Batch(prompts),
            expected_input_tokens: specs.iter().map(|s| s.expected_input_tokens).sum(),
            max_output_tokens: specs.first().and_then(|s| s.max_output_tokens),
            turn: None,
            tags: specs.into_iter().next().map(|s| s.tags).unwrap_or_default(),
        }
    }

    fn describe(&self) -> std::collections::BTreeMap<String, serde_json::Value> {
        let mut described = self.inner.describe();
        described.insert("batch".into(), self.batch.into());
        described
    }

    fn labels(&self, index: u64) -> crate::workload::mix::Labels {
        self.inner.labels(index * u64::from(self.batch.max(1)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::SyntheticWorkload;

    #[test]
    fn step_lists_and_ranges() {
        assert_eq!(parse_steps("1,2,4").unwrap(), vec![1.0, 2.0, 4.0]);
        assert_eq!(
            parse_steps("1..16x2").unwrap(),
            vec![1.0, 2.0, 4.0, 8.0, 16.0]
        );
        assert_eq!(
            parse_steps("10..40+10").unwrap(),
            vec![10.0, 20.0, 30.0, 40.0]
        );
        for bad in ["", "1,x", "4,2", "1..16x1", "0,1", "1..5"] {
            assert!(parse_steps(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn batches_group_consecutive_prompts() {
        let inner = Arc::new(SyntheticWorkload {
            input_tokens: 4,
            output_tokens: Some(2),
            seed: 3,
        });
        let batched = BatchedWorkload {
            inner: inner.clone(),
            batch: 3,
        };
        let spec = batched.request(2);
        let RequestInput::Batch(prompts) = &spec.input else {
            panic!("batch")
        };
        assert_eq!(prompts.len(), 3);
        let RequestInput::Text(seventh) = inner.request(7).input else {
            panic!("text")
        };
        assert_eq!(prompts[1], seventh);
        assert_eq!(spec.expected_input_tokens, Some(12));
    }

    #[test]
    fn a_batch_asks_for_its_first_prompts_model_and_class() {
        use crate::workload::mix::{Mix, Mixed, Shares};
        let inner: Arc<dyn Workload> = Arc::new(SyntheticWorkload {
            input_tokens: 4,
            output_tokens: Some(2),
            seed: 3,
        });
        let mix = Mix {
            models: Some(Shares::parse("a=50%,b=50%", false).unwrap()),
            classes: Some(Shares::parse("x=50%,y=50%", false).unwrap()),
            ..Mix::default()
        };
        let mixed = Mixed::wrap(inner, mix, 9);
        let batched = BatchedWorkload {
            inner: Arc::clone(&mixed),
            batch: 3,
        };
        for index in 0..8 {
            let labels = mixed.labels(index * 3);
            assert_eq!(batched.labels(index), labels);
            assert_eq!(batched.request(index).tags.model, labels.model);
            assert!(labels.class.is_some());
        }
    }
}
