//! The capacity half of `goodput calibrate --check`: which held-out shapes are searched and
//! where each search starts ([`capacity_shapes`]), the capacity search run on the live server
//! ([`live_capacity`]: [`find_capacity`] over [`Prober`] probes, fresh prompts every probe),
//! and the live verdict beside the one the caller searched on the calibrated simulator in
//! virtual time, with the error and each search's own resolution ([`CapacityComparison`]).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::{CalibrateError, ProbeMeasurement};
use crate::backend::Backend;
use crate::backend::openai::{OpenAiBackend, OpenAiConfig};
use crate::decide::capacity::calibration::calibrated_start;
use crate::decide::capacity::{
    CapacityReport, Criteria, Dimension, MAX_RUNS, Probe, ProbePlan, ProbeRun, ProbeTiming, Prober,
    SearchConfig, find_capacity,
};
use crate::http::HttpClient;
use crate::report::StepReport;
use crate::tokens::Tiktoken;
use crate::workload::{GeneratedWorkload, LengthDistribution, PromptVocabulary};

/// How far each request's lengths spread either side of a capacity shape's: drawn uniformly
/// within ±25 % of its prompt and its answer. Alike requests run in synchronized rounds, so
/// under a median SLO a closed loop's attainment jumps by whole rounds and ties at exactly half
/// between them: a few per cent of speed then move the capacity from one round to the next
/// (5 or 9 clients of 256 → 24 on 4 slots under one SLO, docs/validation.md). Spread, the
/// rounds come apart and the median latency rises smoothly with the load, so the capacity moves
/// with the speed no more than in proportion.
pub const CAPACITY_SPREAD: f64 = 0.25;

/// The request shape of one capacity search: its mean lengths, and how far each request's
/// spread either side of them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CapacityShape {
    /// Mean prompt length in `cl100k_base` tokens.
    pub input_tokens: u32,
    /// Mean answer tokens (EOS ignored).
    pub output_tokens: u32,
    /// Each request's lengths are drawn uniformly within this fraction of the means (0: every
    /// request alike).
    #[serde(default)]
    pub spread: f64,
}

impl CapacityShape {
    /// The shape `--check` searches around these mean lengths: spread by [`CAPACITY_SPREAD`].
    pub fn around(input_tokens: u32, output_tokens: u32) -> Self {
        CapacityShape {
            input_tokens,
            output_tokens,
            spread: CAPACITY_SPREAD,
        }
    }

    /// The prompt and answer length distributions: uniform over the integers within `spread`
    /// of the means (at least one token), or fixed.
    pub fn lengths(&self) -> (LengthDistribution, LengthDistribution) {
        let spread = self.spread.clamp(0.0, 1.0);
        let within = |mean: u32| {
            let at = |factor: f64| ((f64::from(mean) * factor).round() as u32).max(1);
            match (at(1.0 - spread), at(1.0 + spread)) {
                (min, max) if min < max => LengthDistribution::Uniform { min, max },
                _ => LengthDistribution::Fixed(mean),
            }
        };
        (within(self.input_tokens), within(self.output_tokens))
    }

    /// Synthetic chat prompts of this shape: the workload of both searches (live and
    /// virtual), so they draw their lengths alike.
    pub fn workload(&self, seed: u64) -> GeneratedWorkload {
        let (input, output) = self.lengths();
        GeneratedWorkload {
            input,
            output: Some(output),
            prefix: None,
            vocabulary: Arc::new(PromptVocabulary::cl100k()),
            seed,
        }
    }
}

impl std::fmt::Display for CapacityShape {
    /// `256-token prompts, 24 answer tokens (each within ±25 %)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}-token prompts, {} answer tokens",
            self.input_tokens, self.output_tokens
        )?;
        match self.lengths() {
            (LengthDistribution::Fixed(_), LengthDistribution::Fixed(_)) => Ok(()),
            _ => write!(f, " (each within ±{:.0} %)", self.spread * 100.0),
        }
    }
}

/// The shapes whose capacity `--check` searches — the held-out shapes that fill every slot
/// (prompts four times longer, answers four times longer), their lengths spread by
/// [`CAPACITY_SPREAD`] — each with where its search
/// starts: the slots (concurrency) or just under the throughput measured on that shape with
/// every slot busy (rate, as `goodput capacity` starts from a calibration run's throughput).
/// Both searches start there, so they probe the same loads until their verdicts differ.
pub fn capacity_shapes(
    held_out: &[ProbeMeasurement],
    slots: u32,
    dimension: Dimension,
) -> Vec<(CapacityShape, Option<f64>)> {
    held_out
        .iter()
        .filter(|m| m.probe.concurrency == slots.max(1))
        .map(|m| {
            let shape = CapacityShape::around(m.probe.input_tokens, m.probe.output_tokens);
            let start = match dimension {
                Dimension::Concurrency => Some(f64::from(slots.max(1))),
                Dimension::Rate => calibrated_start(m.requests_per_sec),
            };
            (shape, start)
        })
        .collect()
}

/// Searches the capacity of `server` (a client of its target and the model: streamed chat
/// completions with `ignore_eos`) for `shape`, probes shaped by `plan`. Every probe run sends prompts of its
/// own seed (from `seed`), so a server that caches prompts (llama.cpp slots, vLLM prefix
/// caching) never answers one from an earlier probe — the calibrated simulator models no
/// cache. `on_probe` sees each judged probe.
pub async fn live_capacity(
    (client, model): (HttpClient, &str),
    shape: CapacityShape,
    plan: &ProbePlan,
    search: SearchConfig,
    seed: u64,
    cancel: &CancellationToken,
    on_probe: impl FnMut(&Probe),
) -> Result<(CapacityReport, Vec<StepReport>), CalibrateError> {
    let openai = OpenAiConfig {
        model: model.to_string(),
        ignore_eos: true,
        ..OpenAiConfig::default()
    };
    let backend: Arc<dyn Backend> = Arc::new(
        OpenAiBackend::new(openai, client).map_err(|e| CalibrateError::Backend(e.to_string()))?,
    );
    let mut prober = Prober {
        plan: plan.clone(),
        backend,
        workload: Arc::new(shape.workload(seed)),
        counter: Arc::new(Tiktoken::cl100k()),
        streamed: true,
    };
    let probe = async |call: ProbeRun| {
        prober.workload = Arc::new(shape.workload(run_seed(seed, &call)));
        prober.probe(call, None, cancel).await
    };
    Ok(find_capacity(
        plan.dimension,
        search,
        &plan.criteria,
        plan.measured_requests,
        probe,
        on_probe,
    )
    .await)
}

/// The prompt seed of one probe run of a search seeded `seed`: its own for every probe and
/// every run of it, so a server's prompt cache never answers one from an earlier run. The
/// virtual-time search takes the same, so while both searches probe the same loads they send
/// the same requests (and, spread, the same lengths).
pub fn run_seed(seed: u64, call: &ProbeRun) -> u64 {
    let runs = u64::from(MAX_RUNS);
    seed.wrapping_add(1 + call.index as u64 * runs + u64::from(call.run))
}

/// The relative width of a search's final bracket, `(upper − lower) / lower`: the finest
/// difference it can tell (one step at a concurrency `c` is `1/c`). `None` when the search
/// found no bracket (no passing load, or none failing above it).
pub fn resolution(report: &CapacityReport) -> Option<f64> {
    let lower = report.lower_bound.filter(|l| *l > 0.0)?;
    Some((report.upper_bound? - lower) / lower)
}

/// How the check searched (the same for every shape but each search's start).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckPlan {
    /// What was searched.
    pub dimension: Dimension,
    /// What a probe had to show.
    pub criteria: Criteria,
    /// Measured requests per probe.
    pub requests_per_probe: u64,
    /// How long each probe warmed up and ran.
    pub timing: ProbeTiming,
    /// Bounds, tolerance and probes of every search; `start` is the given one, or 0 when each
    /// shape starts where [`capacity_shapes`] puts it.
    pub search: SearchConfig,
}

/// One shape's capacity, measured on the server and predicted in virtual time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityComparison {
    /// The requests.
    pub shape: CapacityShape,
    /// The first load both searches probed.
    pub start: f64,
    /// The live search's verdict.
    pub measured: CapacityReport,
    /// The virtual-time search's verdict on the calibrated simulator.
    pub predicted: CapacityReport,
    /// `predicted / measured − 1` of the capacities (`None` when either found none).
    pub error: Option<f64>,
    /// [`resolution`] of the live search.
    pub measured_resolution: Option<f64>,
    /// [`resolution`] of the virtual-time search.
    pub predicted_resolution: Option<f64>,
    /// The same virtual-time search on the simulator at the server's speed now (the speed
    /// reference's factor divided out), when the check measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_at_speed: Option<CapacityReport>,
    /// `predicted_at_speed / measured − 1` of the capacities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_at_speed: Option<f64>,
    /// How the predicted capacity at the server's speed moves if that speed is off by a
    /// margin: the conditioning of the comparison (an SLO on a step of a staircase moves it a
    /// whole step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_band: Option<SpeedBand>,
    /// The capacity the same search finds with the server's other step pattern beyond its
    /// slots (at its speed now when measured): which of the two the server runs is a race it
    /// decides round by round, so both bound what a live search can find.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_pattern: Option<PatternCapacity>,
}

/// How a server with sequence slots runs closed-loop clients beyond them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepPattern {
    /// Requests re-sent as answers end join the step that launches the waiting request: rounds
    /// of prompts in one step, then decode steps with no prompt in them.
    InStep,
    /// A request arriving as that step starts waits for the next: one client's prompt rides
    /// in the others' decode steps.
    Staggered,
}

impl StepPattern {
    /// The pattern's name in tables.
    pub fn name(self) -> &'static str {
        match self {
            StepPattern::InStep => "in step",
            StepPattern::Staggered => "staggered",
        }
    }
}

/// A capacity predicted with a given step pattern.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PatternCapacity {
    /// The pattern.
    pub pattern: StepPattern,
    /// The capacity (`None`: none found).
    pub capacity: Option<f64>,
}

/// The capacity predicted with the server a margin slower and a margin faster than measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SpeedBand {
    /// The relative margin (0.1: ±10 %).
    pub margin: f64,
    /// The capacity predicted at `1 − margin` times the speed (`None`: none found).
    pub slower: Option<f64>,
    /// The capacity predicted at `1 + margin` times the speed.
    pub faster: Option<f64>,
}

impl SpeedBand {
    /// Whether `capacity` lies within the band, from the lower of its ends to the higher (a
    /// missing end is no capacity, 0).
    pub fn contains(&self, capacity: f64) -> bool {
        let (a, b) = (self.slower.unwrap_or(0.0), self.faster.unwrap_or(0.0));
        (a.min(b)..=a.max(b)).contains(&capacity)
    }
}

impl CapacityComparison {
    /// The two verdicts side by side.
    pub fn new(
        shape: CapacityShape,
        start: f64,
        measured: CapacityReport,
        predicted: CapacityReport,
    ) -> Self {
        CapacityComparison {
            shape,
            start,
            measured_resolution: resolution(&measured),
            predicted_resolution: resolution(&predicted),
            error: capacity_error(&measured, &predicted),
            measured,
            predicted,
            predicted_at_speed: None,
            error_at_speed: None,
            speed_band: None,
            other_pattern: None,
        }
    }

    /// With the verdict of the same search on the simulator at the server's speed now, and
    /// the band of its capacity a margin either side of that speed.
    pub fn with_prediction_at_speed(
        mut self,
        predicted: CapacityReport,
        band: Option<SpeedBand>,
    ) -> Self {
        self.error_at_speed = capacity_error(&self.measured, &predicted);
        self.predicted_at_speed = Some(predicted);
        self.speed_band = band;
        self
    }

    /// With the capacity predicted with the other step pattern.
    pub fn with_other_pattern(mut self, other: PatternCapacity) -> Self {
        self.other_pattern = Some(other);
        self
    }
}

/// `predicted / measured − 1` of two searches' capacities (`None` when either found none).
fn capacity_error(measured: &CapacityReport, predicted: &CapacityReport) -> Option<f64> {
    match (measured.lower_bound, predicted.lower_bound) {
        (Some(m), Some(p)) if m > 0.0 => Some(p / m - 1.0),
        _ => None,
    }
}

/// The capacity part of a check: how it searched and each shape's verdicts, or why it did
/// not search.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityCheck {
    /// How it searched (`None` when it did not).
    pub plan: Option<CheckPlan>,
    /// Why capacity was not searched, or why a shape was skipped.
    pub not_searched: Option<String>,
    /// One entry per searched shape.
    pub shapes: Vec<CapacityComparison>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decide::calibrate::{CalibrationProbe, Tail};

    fn held_out(concurrency: u32, input: u32, output: u32, rps: f64) -> ProbeMeasurement {
        ProbeMeasurement {
            probe: CalibrationProbe {
                concurrency,
                input_tokens: input,
                output_tokens: output,
                requests: 3 * concurrency,
            },
            prompt_tokens: f64::from(input),
            ttft: 0.1,
            tpot: 0.01,
            e2e: 0.5,
            requests_per_sec: rps,
            tails: [Tail::default(); 3],
        }
    }

    #[test]
    fn the_shapes_filling_every_slot_are_searched_from_the_slots_or_just_under_their_throughput() {
        let measured = [
            held_out(4, 256, 24, 6.0),
            held_out(4, 64, 96, 2.0),
            held_out(8, 64, 24, 9.0),
        ];
        let by_rate = capacity_shapes(&measured, 4, Dimension::Rate);
        let shapes: Vec<_> = by_rate
            .iter()
            .map(|(s, _)| (s.input_tokens, s.output_tokens))
            .collect();
        assert_eq!(shapes, [(256, 24), (64, 96)]);
        assert_eq!(by_rate[0].1, Some(6.0 * 0.95));
        assert_eq!(by_rate[1].1, Some(2.0 * 0.95));
        let by_concurrency = capacity_shapes(&measured, 4, Dimension::Concurrency);
        assert!(by_concurrency.iter().all(|(_, start)| *start == Some(4.0)));
        assert!(by_rate.iter().all(|(s, _)| s.spread == CAPACITY_SPREAD));
    }

    #[test]
    fn every_probe_run_has_its_own_prompt_seed() {
        let call = |index, run| ProbeRun {
            index,
            load: 4.0,
            run,
            time_left: None,
        };
        let mut seeds: Vec<u64> = (0..8)
            .flat_map(|index| (0..MAX_RUNS).map(move |run| (index, run)))
            .map(|(index, run)| run_seed(11, &call(index, run)))
            .collect();
        let count = seeds.len();
        assert!(
            !seeds.contains(&11),
            "the search's own seed is never a probe's"
        );
        seeds.sort_unstable();
        seeds.dedup();
        assert_eq!(seeds.len(), count, "no two runs share a seed");
        // The same call, the same seed: the live and the virtual search agree on it.
        assert_eq!(run_seed(11, &call(3, 1)), run_seed(11, &call(3, 1)));
    }

    #[test]
    fn a_shape_spreads_its_lengths_uniformly_around_its_means() {
        let shape = |input, output, spread| CapacityShape {
            input_tokens: input,
            output_tokens: output,
            spread,
        };
        let uniform = |min, max| LengthDistribution::Uniform { min, max };
        assert_eq!(
            shape(256, 24, 0.25).lengths(),
            (uniform(192, 320), uniform(18, 30))
        );
        assert_eq!(
            shape(64, 96, 0.25).lengths(),
            (uniform(48, 80), uniform(72, 120))
        );
        // Alike when nothing spreads, or too little to reach another integer; never 0 tokens.
        let fixed = LengthDistribution::Fixed;
        assert_eq!(shape(256, 24, 0.0).lengths(), (fixed(256), fixed(24)));
        assert_eq!(shape(1, 1, 0.25).lengths(), (fixed(1), fixed(1)));
        assert_eq!(shape(2, 4, 1.0).lengths(), (uniform(1, 4), uniform(1, 8)));
        // The workload draws within those bounds, the same lengths for the same seed.
        let workload = shape(256, 24, 0.25).workload(7);
        assert_eq!(workload.input, uniform(192, 320));
        assert_eq!(workload.output, Some(uniform(18, 30)));
        assert_eq!(
            shape(256, 24, 0.25).to_string(),
            "256-token prompts, 24 answer tokens (each within ±25 %)"
        );
        assert_eq!(
            shape(256, 24, 0.0).to_string(),
            "256-token prompts, 24 answer tokens"
        );
    }

    #[test]
    fn resolution_is_the_brackets_relative_width() {
        let report = |lower: Option<f64>, upper: Option<f64>| CapacityReport {
            dimension: Dimension::Concurrency,
            max_sustainable_rate_per_sec: None,
            max_sustainable_concurrency: lower.map(|c| c as u32),
            lower_bound: lower,
            upper_bound: upper,
            undecided_loads: Vec::new(),
            spent_secs: 0.0,
            slo: "e2e=1s".into(),
            attainment_target: 0.5,
            confidence: 0.5,
            requests_per_probe: 8,
            conclusion: crate::decide::capacity::Conclusion::Converged,
            goodput_at_capacity_per_sec: None,
            distserve_goodput_per_sec: None,
            accelerators: None,
            per_accelerator: None,
            probes: Vec::new(),
            first_probe_step: 0,
        };
        assert_eq!(resolution(&report(Some(4.0), Some(5.0))), Some(0.25));
        assert_eq!(resolution(&report(Some(4.0), None)), None);
        assert_eq!(resolution(&report(None, Some(1.0))), None);
        let compared = CapacityComparison::new(
            CapacityShape {
                input_tokens: 8,
                output_tokens: 8,
                spread: 0.0,
            },
            4.0,
            report(Some(4.0), Some(5.0)),
            report(Some(5.0), Some(6.0)),
        );
        assert_eq!(compared.error, Some(0.25));
        assert_eq!(compared.predicted_resolution, Some(0.2));
        assert_eq!(compared.error_at_speed, None);
        let band = SpeedBand {
            margin: 0.1,
            slower: Some(3.0),
            faster: None,
        };
        let at_speed = compared.with_prediction_at_speed(report(Some(3.0), Some(4.0)), Some(band));
        assert_eq!(at_speed.error_at_speed, Some(-0.25));
        assert!(band.contains(0.0) && band.contains(3.0) && !band.contains(3.5));
        assert_eq!(at_speed.error, Some(0.25));
    }
}
