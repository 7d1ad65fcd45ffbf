//! The live half of `goodput calibrate`: what the server says about itself
//! ([`server_facts`]: llama.cpp `/props` and `/v1/models` metadata, where available) and one
//! probe measured on it ([`measure`]: a closed loop of identical synthetic requests, their
//! median TTFT, TPOT and E2E as the server counted the prompt). The fit itself is the
//! simulator's (`goodput_sim::calibrate`), which this crate never sees; the CLI joins them.
//! [`capacity`] is the live half of `--check`'s capacity comparison; [`combine_passes`] joins
//! probes measured in several passes and says how closely the server repeated them;
//! [`batch_limit`] finds how many requests a server that does not say runs at once, and
//! [`step_budget`] how many tokens one of its steps carries; [`slot_split`] whether a llama.cpp
//! server runs its slots as micro-batches of their own, and [`kv_sharing`] whether they share
//! one KV cache; [`queue_order`] which queued request a freed slot takes.

mod batch;
mod budget;
mod cache;
pub mod capacity;
mod facts;
mod limits;
mod passes;
mod queue;
mod slots;

pub use batch::{BatchLimit, MIN_SPAN_US, WAVES, batch_limit, running_at_once};
pub use budget::{BudgetProbe, StepBudget, read_budget, step_budget};
pub use cache::{CacheReading, MAX_CACHE_PROBE_TOKENS, cache_probe, kv_sharing, read_cache};
pub use capacity::{
    CAPACITY_SPREAD, CapacityCheck, CapacityComparison, CapacityShape, CheckPlan, PatternCapacity,
    SpeedBand, StepPattern,
};
pub use facts::{ServerFacts, server_facts};
pub use limits::{MetricLimits, metric_limits};
pub use passes::{Repeatability, combine_passes};
pub use queue::{
    GAP_STEPS, MAX_SLOTS, QUEUED, QueueProbe, QueueReading, expected_sequence, queue_order,
    read_order, served_sequence,
};
pub use slots::{SPLIT_FACTOR, SlotSplit, slot_split};

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use crate::backend::openai::{OpenAiBackend, OpenAiConfig};
use crate::config::{LoadSpec, RunConfig};
use crate::http::HttpClient;
use crate::metrics::StepAggregator;
use crate::record::RequestRecord;
use crate::report::{LoadReport, StepReport};
use crate::runner::{EndReason, RecordSink, Runner};
use crate::tokens::Tiktoken;
use crate::workload::Workload;
use crate::workload::synthetic::SyntheticWorkload;

/// One probe: `requests` identical requests from `concurrency` closed-loop clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CalibrationProbe {
    /// Clients.
    pub concurrency: u32,
    /// Prompt length in `cl100k_base` tokens (the server may count differently).
    pub input_tokens: u32,
    /// Answer tokens (EOS ignored).
    pub output_tokens: u32,
    /// Requests in all.
    pub requests: u32,
}

/// The tail of one latency distribution, seconds (0 when not measured).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Tail {
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
}

/// What one probe measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ProbeMeasurement {
    /// The probe.
    pub probe: CalibrationProbe,
    /// Mean prompt tokens as the server counted them (`usage.prompt_tokens`).
    pub prompt_tokens: f64,
    /// Median time to first token, seconds.
    pub ttft: f64,
    /// Median time per output token after the first, seconds.
    pub tpot: f64,
    /// Median end-to-end latency, seconds.
    pub e2e: f64,
    /// Requests completed per second.
    pub requests_per_sec: f64,
    /// TTFT, TPOT and E2E tails, in that order.
    pub tails: [Tail; 3],
}

/// A probe that measured nothing usable.
#[derive(Debug, thiserror::Error)]
pub enum CalibrateError {
    /// The backend could not be configured.
    #[error("backend configuration: {0}")]
    Backend(String),
    /// The run ended early or its requests failed.
    #[error("probe {probe:?}: {message}")]
    Probe {
        /// The probe.
        probe: CalibrationProbe,
        /// What went wrong.
        message: String,
    },
    /// The step-budget probe's run ended early or a request failed.
    #[error("step-budget probe: {0}")]
    Budget(String),
    /// The queue-order probe's run ended early or a request failed.
    #[error("queue-order probe: {0}")]
    Queue(String),
}

/// The run configuration of a probe (no warmup: the medians are over every request).
pub fn probe_config(probe: &CalibrationProbe, seed: u64) -> RunConfig {
    RunConfig {
        load: LoadSpec::Closed {
            concurrency: probe.concurrency.max(1),
        },
        max_requests: Some(u64::from(probe.requests.max(1))),
        request_timeout: Duration::from_secs(600),
        seed,
        ..RunConfig::default()
    }
}

/// Runs `probe` against `client`'s target (model `model`, streamed chat completions with
/// `ignore_eos`) and returns its medians.
pub async fn measure(
    client: HttpClient,
    model: &str,
    probe: &CalibrationProbe,
    seed: u64,
    cancel: CancellationToken,
) -> Result<ProbeMeasurement, CalibrateError> {
    let backend = (client, probe_openai(model));
    measure_with(backend, probe, (seed, cancel), &mut NoSink).await
}

/// A sink that keeps nothing.
struct NoSink;

impl RecordSink for NoSink {
    fn record(&mut self, _: &RequestRecord) -> std::io::Result<()> {
        Ok(())
    }
}

/// [`measure`] with the backend `openai` (a probe's, [`probe_openai`], with whatever it adds),
/// every record also given to `extra`.
async fn measure_with(
    backend: (HttpClient, OpenAiConfig),
    probe: &CalibrationProbe,
    (seed, cancel): (u64, CancellationToken),
    extra: &mut dyn RecordSink,
) -> Result<ProbeMeasurement, CalibrateError> {
    let step = run_probe(backend, probe, (seed, cancel), extra).await?;
    summarise(probe, &step)
}

/// Runs `probe`'s synthetic requests on `backend`, every record also given to `extra`: its
/// step, failed requests and all; a run that ended early is an error.
async fn run_probe(
    backend: (HttpClient, OpenAiConfig),
    probe: &CalibrationProbe,
    (seed, cancel): (u64, CancellationToken),
    extra: &mut dyn RecordSink,
) -> Result<StepReport, CalibrateError> {
    let workload = SyntheticWorkload {
        input_tokens: probe.input_tokens,
        output_tokens: Some(probe.output_tokens),
        seed,
    };
    let config = probe_config(probe, seed);
    let run = (config, Arc::new(workload) as Arc<dyn Workload>);
    run_streamed(backend, run, extra, cancel)
        .await
        .map_err(|failure| {
            failure.into_error(|message| CalibrateError::Probe {
                probe: *probe,
                message,
            })
        })
}

/// Why a run of streamed requests measured nothing.
enum ProbeFailure {
    /// The backend could not be configured.
    Backend(String),
    /// The run ended before its last request.
    Ended(String),
}

impl ProbeFailure {
    /// The error of the probe that failed: a run ended early is `ended`'s.
    fn into_error(self, ended: impl FnOnce(String) -> CalibrateError) -> CalibrateError {
        match self {
            ProbeFailure::Backend(e) => CalibrateError::Backend(e),
            ProbeFailure::Ended(e) => ended(e),
        }
    }
}

/// The backend of every probe: streamed chat completions of `model` with `ignore_eos`.
fn probe_openai(model: &str) -> OpenAiConfig {
    OpenAiConfig {
        model: model.to_string(),
        ignore_eos: true,
        ..OpenAiConfig::default()
    }
}

/// Runs `workload` under `config` against `client`'s target with the backend `openai`, every
/// record also given to `extra`; its step report.
async fn run_streamed(
    (client, openai): (HttpClient, OpenAiConfig),
    (config, workload): (RunConfig, Arc<dyn Workload>),
    extra: &mut dyn RecordSink,
    cancel: CancellationToken,
) -> Result<StepReport, ProbeFailure> {
    let backend =
        OpenAiBackend::new(openai, client).map_err(|e| ProbeFailure::Backend(e.to_string()))?;
    let runner = Runner::new(
        config.clone(),
        Arc::new(backend),
        workload,
        Arc::new(Tiktoken::cl100k()),
        true,
    );
    let mut aggregator = StepAggregator::new(None, config.window);
    let outcome = {
        let mut sinks: [&mut dyn RecordSink; 2] = [&mut aggregator, extra];
        runner.run(&mut sinks, cancel).await
    };
    if outcome.end_reason != EndReason::Completed {
        return Err(ProbeFailure::Ended(format!(
            "the run ended early: {}",
            outcome.end_reason.as_str()
        )));
    }
    Ok(aggregator.report(LoadReport::from(&config.load)))
}

/// Runs `workload`'s first `requests` at their arrival offsets (a replay, no client limit)
/// against the probe backend of `model`, every record kept; a run ended early, or any request
/// failed, is an error made by `error`.
async fn replay_probe(
    (client, model): (&HttpClient, &str),
    (workload, requests): (Arc<dyn Workload>, u64),
    (seed, cancel): (u64, &CancellationToken),
    error: fn(String) -> CalibrateError,
) -> Result<Vec<RequestRecord>, CalibrateError> {
    let config = RunConfig {
        load: LoadSpec::Replay {
            max_concurrency: None,
        },
        max_requests: Some(requests),
        request_timeout: Duration::from_secs(600),
        seed,
        ..RunConfig::default()
    };
    let mut kept = Kept::default();
    let backend = (client.clone(), probe_openai(model));
    let step = run_streamed(backend, (config, workload), &mut kept, cancel.clone())
        .await
        .map_err(|failure| failure.into_error(error))?;
    if step.requests.failed > 0 {
        return Err(error(format!(
            "{} of {requests} requests failed ({:?})",
            step.requests.failed, step.requests.failed_by_kind
        )));
    }
    Ok(kept.0)
}

/// A sink that keeps every record.
#[derive(Default)]
struct Kept(Vec<RequestRecord>);

impl RecordSink for Kept {
    fn record(&mut self, record: &RequestRecord) -> std::io::Result<()> {
        self.0.push(record.clone());
        Ok(())
    }
}

/// The medians of a probe's step.
pub fn summarise(
    probe: &CalibrationProbe,
    step: &StepReport,
) -> Result<ProbeMeasurement, CalibrateError> {
    let failed = |message: String| CalibrateError::Probe {
        probe: *probe,
        message,
    };
    if step.requests.failed > 0 || step.requests.completed == 0 {
        return Err(failed(format!(
            "{} of {} requests failed ({:?})",
            step.requests.failed, step.requests.sent, step.requests.failed_by_kind
        )));
    }
    let latency = &step.latency_ms;
    let secs = |v: Option<f64>| v.map(|ms| ms / 1e3);
    let (Some(ttft), Some(e2e)) = (secs(latency.ttft.p50), secs(latency.e2e.p50)) else {
        return Err(failed("no TTFT measured (is the answer streamed?)".into()));
    };
    Ok(ProbeMeasurement {
        probe: *probe,
        prompt_tokens: step
            .tokens
            .input_per_request
            .mean
            .unwrap_or(f64::from(probe.input_tokens)),
        ttft,
        tpot: secs(latency.tpot.p50).unwrap_or(0.0),
        e2e,
        requests_per_sec: step.throughput.requests_per_sec,
        tails: [&latency.ttft, &latency.tpot, &latency.e2e].map(|stats| Tail {
            p95: secs(stats.p95).unwrap_or(0.0),
            p99: secs(stats.p99).unwrap_or(0.0),
        }),
    })
}
