//! In-process measurement: times any async call (a model's forward pass, a `generate`
//! function, a library call) through the same runner, records, metrics and report as a run
//! against a server, so its figures have the same definitions (`docs/metrics.md`).
//!
//! Each call is one request: it is scheduled by the load (closed loop at a concurrency, or
//! open loop at a rate), sent when the call starts, and its last output is when the call
//! finished. What the call returns — tokens generated, items processed — becomes the record's
//! token and item counts; an error becomes a failed request of its kind ([`OutcomeKind::Error`]
//! unless the caller says otherwise). Warm-up calls are made and journaled but excluded from
//! every figure, as in a run.
//!
//! ```
//! use std::time::Duration;
//! use goodput_core::config::{LoadSpec, RunConfig, Warmup};
//! use goodput_core::measure::{Completion, MeasureSpec, measure};
//! use tokio_util::sync::CancellationToken;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), goodput_core::measure::MeasureError> {
//! let config = RunConfig {
//!     load: LoadSpec::Closed { concurrency: 4 },
//!     max_requests: Some(24), // 4 warm-up calls + 20 measured
//!     warmup: Warmup::Requests(4),
//!     ..RunConfig::default()
//! };
//! let spec = MeasureSpec::new("sleep 2ms, 16 tokens").with_batch_size(8);
//! let report = measure(&config, &spec, |_index| async {
//!     tokio::time::sleep(Duration::from_millis(2)).await;
//!     Ok(Completion::tokens(16))
//! }, CancellationToken::new()).await?;
//! let step = &report.steps[0];
//! assert_eq!(step.requests.completed, 20);
//! assert_eq!(step.tokens.output_total, 20 * 16);
//! assert!(step.throughput.items_per_sec > step.throughput.requests_per_sec);
//! # Ok(())
//! # }
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::SystemTime;

use goodput_protocol::Usage;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::assemble::{ReportInputs, assemble};
use crate::backend::{Activity, Backend, BoxFuture, RequestInput, RequestSpec};
use crate::config::{ConfigError, RunConfig};
use crate::metrics::StepAggregator;
use crate::observe::overhead::ClientOverhead;
use crate::record::{Exchange, Failure, OutcomeKind};
use crate::report::{LoadReport, Report, RunInfo, ToolInfo};
use crate::runner::{RecordSink, Runner};
use crate::tokens::TokenCounter;
use crate::workload::Workload;

/// What one successful call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Completion {
    /// Tokens it generated, when it counts them (tokens/s, TPOT-free E2E otherwise).
    pub output_tokens: Option<u64>,
    /// Tokens it read, when it counts them.
    pub input_tokens: Option<u64>,
    /// Items it processed (a batch's size); the spec's batch size when `None`.
    pub items: Option<u32>,
    /// When the work started, when the caller knows it more precisely than the future's
    /// first poll (e.g. a call handed to another thread).
    pub started: Option<Instant>,
    /// When the work finished, when the caller knows it more precisely than the future's
    /// completion (e.g. a call handed to another thread).
    pub finished: Option<Instant>,
}

impl Completion {
    /// A call that counted nothing.
    pub fn done() -> Self {
        Completion::default()
    }

    /// A call that generated `output_tokens`.
    pub fn tokens(output_tokens: u64) -> Self {
        Completion {
            output_tokens: Some(output_tokens),
            ..Completion::default()
        }
    }
}

/// What is being measured, for the report.
#[derive(Debug, Clone, PartialEq)]
pub struct MeasureSpec {
    /// Names the measured call (the report's target and model).
    pub label: String,
    /// Items per call when a call does not say (`Completion::items`).
    pub batch_size: u32,
    /// User tags (hardware, precision…), as `--tag` in a run.
    pub tags: BTreeMap<String, String>,
    /// Extra workload description (e.g. the number of distinct inputs).
    pub description: BTreeMap<String, serde_json::Value>,
    /// The command line or call that started the measurement, for the report.
    pub command_line: Vec<String>,
}

impl MeasureSpec {
    /// A spec named `label`, one item per call.
    pub fn new(label: impl Into<String>) -> Self {
        MeasureSpec {
            label: label.into(),
            batch_size: 1,
            tags: BTreeMap::new(),
            description: BTreeMap::new(),
            command_line: Vec::new(),
        }
    }

    /// Each call processes `batch_size` items.
    pub fn with_batch_size(mut self, batch_size: u32) -> Self {
        self.batch_size = batch_size;
        self
    }
}

/// A measurement that could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MeasureError {
    /// The run configuration is unusable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The batch size is zero.
    #[error("batch_size: must be at least 1")]
    BatchSize,
}

/// Measures `call` under `config` (load, stop, warm-up, window, SLO) and returns the report a
/// run with the same records would produce. `call` gets the request index (warm-up calls
/// first, from 0). Cancelling `cancel` stops the measurement: calls in flight are recorded as
/// cancelled and the report covers what finished (`run.end_reason` = `interrupted`).
pub async fn measure<F, Fut>(
    config: &RunConfig,
    spec: &MeasureSpec,
    call: F,
    cancel: CancellationToken,
) -> Result<Report, MeasureError>
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Completion, Failure>> + Send + 'static,
{
    config.validate()?;
    if spec.batch_size == 0 {
        return Err(MeasureError::BatchSize);
    }
    let started_at = SystemTime::now();
    let backend = Arc::new(CallBackend {
        call,
        batch_size: spec.batch_size,
    });
    let workload = Arc::new(Calls {
        description: spec.description.clone(),
        batch_size: spec.batch_size,
    });
    let runner = Runner::new(
        config.clone(),
        backend,
        workload.clone(),
        Arc::new(NoText),
        false,
    );
    let mut aggregator = StepAggregator::new(config.slo.clone(), config.window);
    // The process's CPU is the measured call's, not overhead: only dispatch lag is judged.
    let mut overhead = ClientOverhead::from_records_only();
    let outcome = {
        let mut sinks: Vec<&mut dyn RecordSink> = vec![&mut aggregator, &mut overhead];
        runner.run(&mut sinks, cancel).await
    };
    let steps = vec![aggregator.report(LoadReport::from(&config.load))];
    let mut run = run_info(config, spec, workload.as_ref(), started_at);
    run.end_reason = outcome.end_reason.as_str().to_string();
    let inputs = ReportInputs {
        tool: tool_info(),
        run,
        config,
        end: outcome.end_reason,
        extra_warnings: &[],
        overhead: Some(&overhead),
    };
    Ok(assemble(inputs, steps))
}

/// The report's tool section for goodput-core itself.
fn tool_info() -> ToolInfo {
    ToolInfo {
        name: "goodput".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        git_sha: option_env!("GOODPUT_GIT_SHA").map(str::to_string),
    }
}

fn run_info(
    config: &RunConfig,
    spec: &MeasureSpec,
    workload: &Calls,
    started_at: SystemTime,
) -> RunInfo {
    RunInfo {
        started_at: crate::units::rfc3339(started_at),
        command_line: spec.command_line.clone(),
        seed: config.seed,
        target: format!("in-process: {}", spec.label),
        api: "in-process".into(),
        model: spec.label.clone(),
        stream: false,
        workload: workload.describe(),
        slo: config.slo.as_ref().map(ToString::to_string),
        window_secs: config.window.as_secs_f64(),
        time_scale: config.time_scale,
        item_unit: "items".into(),
        end_reason: "running".into(),
        tags: spec.tags.clone(),
        client_host: Some(crate::observe::environment::HostInfo::collect()),
        server_info: None,
        classes: Vec::new(),
    }
}

/// The workload of an in-process measurement: request `i` is call `i` (the caller maps the
/// index to its own inputs).
#[derive(Debug)]
struct Calls {
    description: BTreeMap<String, serde_json::Value>,
    batch_size: u32,
}

impl Workload for Calls {
    fn request(&self, index: u64) -> RequestSpec {
        RequestSpec {
            index,
            input: RequestInput::Text(String::new()),
            expected_input_tokens: None,
            max_output_tokens: None,
            turn: None,
            tags: Default::default(),
        }
    }

    fn describe(&self) -> BTreeMap<String, serde_json::Value> {
        let mut described = self.description.clone();
        described.insert("kind".into(), "in-process".into());
        described.insert("batch_size".into(), self.batch_size.into());
        described
    }
}

/// Calls have no text to count.
#[derive(Debug)]
struct NoText;

impl TokenCounter for NoText {
    fn count(&self, _text: &str) -> u64 {
        0
    }

    fn name(&self) -> &str {
        "none"
    }
}

/// The backend of an in-process measurement: sends a request by making the call.
struct CallBackend<F> {
    call: F,
    batch_size: u32,
}

impl<F> fmt::Debug for CallBackend<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallBackend")
            .field("batch_size", &self.batch_size)
            .finish_non_exhaustive()
    }
}

impl<F, Fut> Backend for CallBackend<F>
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Completion, Failure>> + Send + 'static,
{
    fn send<'a>(
        &'a self,
        request: &'a RequestSpec,
        exchange: &'a mut Exchange,
        activity: &'a Activity,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            exchange.untokenized = true;
            let now = Instant::now();
            exchange.sent_at = Some(now);
            let result = (self.call)(request.index).await;
            activity.bump();
            match result {
                Ok(done) => self.complete(exchange, &done, now),
                Err(failure) => exchange.fail(failure),
            }
        })
    }
}

impl<F> CallBackend<F> {
    /// Fills the exchange of a successful call: one output at its end carrying its tokens.
    fn complete(&self, exchange: &mut Exchange, done: &Completion, polled: Instant) {
        let finished = done.finished.unwrap_or_else(Instant::now);
        let started = done.started.unwrap_or(polled).min(finished);
        exchange.sent_at = Some(started);
        exchange.response_at = Some(finished);
        let tokens = done.output_tokens.unwrap_or(0);
        exchange.push_output(finished, "", Some(tokens));
        let input = done.input_tokens.unwrap_or(0);
        exchange.usage = Some(Usage {
            prompt_tokens: input,
            completion_tokens: tokens,
            total_tokens: input + tokens,
            ..Usage::default()
        });
        exchange.choices = done.items.unwrap_or(self.batch_size);
    }
}

/// A failure of an in-process call with `message` (kind [`OutcomeKind::Error`]).
pub fn call_error(message: impl Into<String>) -> Failure {
    Failure::new(OutcomeKind::Error, message)
}

#[cfg(test)]
mod tests;
