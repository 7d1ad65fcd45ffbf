//! [`Prober`]: runs one capacity probe — a measured step at a load level, warmed up, at most
//! long enough for the attainment target, ended as soon as the sequential test has decided
//! it — against any backend, journaling every request with its step index.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::watch::{ProbeSink, Stopping};
use super::{Criteria, Dimension, ProbeError, ProbeRun};
use crate::backend::Backend;
use crate::config::{Arrival, LoadSpec, RunConfig, Warmup};
use crate::metrics::StepAggregator;
use crate::metrics::aggregate::Compliance;
use crate::report::{LoadReport, StepReport};
use crate::runner::{EndReason, RecordSink, Runner};
use crate::tokens::TokenCounter;
use crate::workload::Workload;

/// How probes are shaped: everything but the target.
#[derive(Debug, Clone)]
pub struct ProbePlan {
    /// Timeouts, seed, window, time scale and SLO of every probe.
    pub base: RunConfig,
    /// Rate or concurrency.
    pub dimension: Dimension,
    /// Arrival process of rate probes.
    pub arrival: Arrival,
    /// Client-side cap of rate probes.
    pub max_concurrency: Option<u32>,
    /// Measured requests per probe.
    pub measured_requests: u64,
    /// Warmup before each rate probe, in target time (at least 20 requests).
    pub warmup: Duration,
    /// Shortest measurement of a rate probe, in target time: long enough for the stability
    /// test to see a trend (at least `measured_requests` are measured either way).
    pub min_duration: Duration,
    /// Longest a probe may run (target time); a probe cut short is judged on what it measured.
    pub max_probe_duration: Duration,
    /// How a probe is judged.
    pub criteria: Criteria,
}

/// Probes one target.
#[derive(Debug, Clone)]
pub struct Prober {
    /// How probes are shaped.
    pub plan: ProbePlan,
    /// The target.
    pub backend: Arc<dyn Backend>,
    /// What to send.
    pub workload: Arc<dyn Workload>,
    /// Fallback token counting.
    pub counter: Arc<dyn TokenCounter>,
    /// Whether the backend streams.
    pub streamed: bool,
}

/// How long each probe warms up, measures at least and runs at most (target time); recorded
/// in `run.json`'s capacity plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProbeTiming {
    /// Warmup before each rate probe (at least 20 requests; a concurrency probe warms up with
    /// two requests per client).
    #[serde(with = "crate::units::serde_ms")]
    pub warmup: Duration,
    /// Shortest measurement of a rate probe.
    #[serde(with = "crate::units::serde_ms")]
    pub min_duration: Duration,
    /// Longest a probe may run.
    #[serde(with = "crate::units::serde_ms")]
    pub max_duration: Duration,
}

impl ProbePlan {
    /// Probes around `base`: rate probes keep its arrival process and client cap (Poisson and
    /// uncapped when `base` is not open loop); `measured_requests` per probe.
    pub fn around(
        base: RunConfig,
        dimension: Dimension,
        criteria: Criteria,
        measured_requests: u64,
        timing: ProbeTiming,
    ) -> ProbePlan {
        let (arrival, max_concurrency) = base.load.open_loop_shape();
        ProbePlan {
            base,
            dimension,
            arrival,
            max_concurrency,
            measured_requests,
            warmup: timing.warmup,
            min_duration: timing.min_duration,
            max_probe_duration: timing.max_duration,
            criteria,
        }
    }

    /// The rate probes of a capacity plan (`plan --simulate`): Poisson arrivals, uncapped, from
    /// `seed`, judged by `criteria` over enough requests for its attainment target
    /// ([`probe_requests`](super::early_stopping::probe_requests)); a 10 s warmup (as
    /// `goodput capacity`'s default), at least a minute measured (twice its default, so a plan
    /// rests on a longer look at stability) and at most ten.
    pub fn for_planning(seed: u64, criteria: Criteria) -> ProbePlan {
        let base = RunConfig {
            seed,
            slo: Some(criteria.slo.clone()),
            ..RunConfig::default()
        };
        let measured =
            super::early_stopping::probe_requests(criteria.attainment, criteria.confidence);
        let timing = ProbeTiming {
            warmup: Duration::from_secs(10),
            min_duration: Duration::from_secs(60),
            max_duration: Duration::from_secs(600),
        };
        ProbePlan::around(base, Dimension::Rate, criteria, measured, timing)
    }

    /// How long each probe warms up and runs.
    pub fn timing(&self) -> ProbeTiming {
        ProbeTiming {
            warmup: self.warmup,
            min_duration: self.min_duration,
            max_duration: self.max_probe_duration,
        }
    }

    /// The run configuration of `call`: [`config_for_run`](Self::config_for_run), scheduling
    /// nothing past the time left of the budget.
    pub fn config_for(&self, call: &ProbeRun) -> RunConfig {
        let mut config = self.config_for_run(call.load, call.run);
        if let Some(left) = call.time_left {
            // A zero duration is refused; the search starts no run once the budget is spent.
            let left = left.max(Duration::from_millis(1));
            config.duration = config.duration.map(|d| d.min(left)).or(Some(left));
        }
        config
    }

    /// The run configuration of run `run` (1, 2, …) of a probe at `load`: each extension of
    /// an undecided probe measures twice as many requests as the run before.
    pub fn config_for_run(&self, load: f64, run: u32) -> RunConfig {
        let mut config = self.config_at(load);
        if run > 1 {
            let warmup = match config.warmup {
                Warmup::Requests(n) => n,
                _ => 0,
            };
            let measured = config.max_requests.unwrap_or(0).saturating_sub(warmup);
            let factor = 1u64 << (run - 1).min(16);
            // Still bounded by --max-probe-duration (`duration`).
            config.max_requests = Some(warmup + measured.saturating_mul(factor));
        }
        config
    }

    /// When a probe at `load` may end early: once its targets are decided, a proof only after
    /// a rate probe's `min_duration` of arrivals (its stability verdict needs a trend).
    pub fn stopping(&self, load: f64) -> Stopping {
        let proof_floor = match self.dimension {
            Dimension::Rate => (load * self.min_duration.as_secs_f64()).ceil() as u64,
            Dimension::Concurrency => 0,
        };
        Stopping {
            criteria: self.criteria.clone(),
            proof_floor,
            load: LoadReport::from(&self.config_at(load).load),
        }
    }

    /// The run configuration of a probe at `load`.
    pub fn config_at(&self, load: f64) -> RunConfig {
        let (load_spec, warmup_requests) = match self.dimension {
            Dimension::Rate => {
                let spec = LoadSpec::Open {
                    rate_per_sec: load,
                    arrival: self.arrival,
                    max_concurrency: self.max_concurrency,
                };
                // An arrival process needs a few tens of arrivals to show its queue.
                let warmup = (load * self.warmup.as_secs_f64()).ceil() as u64;
                (spec, warmup.max(20))
            }
            Dimension::Concurrency => {
                // A closed loop is in its steady state once every client has sent two
                // requests: twenty more only lengthen every probe (a slow server's probes at
                // concurrency 2 took a minute each).
                let concurrency = load.round().max(1.0) as u32;
                (LoadSpec::Closed { concurrency }, 2 * u64::from(concurrency))
            }
        };
        let measured = match self.dimension {
            Dimension::Rate => self
                .measured_requests
                .max((load * self.min_duration.as_secs_f64()).ceil() as u64),
            Dimension::Concurrency => self.measured_requests,
        };
        RunConfig {
            load: load_spec,
            max_requests: Some(warmup_requests + measured),
            duration: Some(self.max_probe_duration),
            warmup: Warmup::Requests(warmup_requests),
            slo: Some(self.criteria.slo.clone()),
            ..self.base.clone()
        }
    }
}

impl Prober {
    /// Runs `call` (a run of a probe step at a load), feeding `journal` too; `cancel` aborts
    /// it.
    pub async fn probe(
        &self,
        call: ProbeRun,
        journal: Option<&mut dyn RecordSink>,
        cancel: &CancellationToken,
    ) -> Result<(StepReport, Compliance), ProbeError> {
        let (index, load) = (call.index, call.load);
        let config = self.plan.config_for(&call);
        let runner = Runner::new(
            config.clone(),
            Arc::clone(&self.backend),
            Arc::clone(&self.workload),
            Arc::clone(&self.counter),
            self.streamed,
        )
        .with_step(u32::try_from(index).unwrap_or(u32::MAX));
        let aggregator = StepAggregator::new(config.slo.clone(), config.window);
        let stopping = self.plan.stopping(load);
        let mut sink = ProbeSink::new(aggregator, Some(stopping), runner.finish_token());
        let outcome = match journal {
            Some(journal) => runner.run(&mut [&mut sink, journal], cancel.clone()).await,
            None => runner.run(&mut [&mut sink], cancel.clone()).await,
        };
        if outcome.end_reason != EndReason::Completed {
            let message = format!("the run ended: {}", outcome.end_reason.as_str());
            return Err(ProbeError { load, message });
        }
        let (aggregator, judged) = sink.into_parts();
        Ok((aggregator.report(LoadReport::from(&config.load)), judged))
    }
}
