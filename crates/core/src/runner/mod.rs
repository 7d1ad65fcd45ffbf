//! The runner: sends a workload on a schedule through a backend, bounds every request by its
//! timeout and the whole run by a no-progress deadline, and hands each finished request's
//! [`RequestRecord`] to the record sinks (journal, aggregator, progress) as it completes.
//!
//! It never prints and never computes statistics itself. Records flow over a channel from the
//! request tasks to the sinks, which run on the caller's task, so no lock is held on the hot
//! path.

mod channels;
mod dispatch;
pub mod journal;
mod pacer;
mod request;

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::backend::{Activity, Backend, RequestIds};
use crate::config::RunConfig;
use crate::record::RequestRecord;
use crate::shard::Shard;
use crate::tokens::TokenCounter;
use crate::workload::Workload;

pub use journal::{JournalWriter, read_journal};

/// The resolution of the runtime's timer.
const TIMER_TICK: Duration = Duration::from_millis(1);

/// Receives every finished request, in completion order.
pub trait RecordSink: Send {
    /// Takes one record. An error stops the run (a journal that cannot be written must not
    /// silently lose requests).
    fn record(&mut self, record: &RequestRecord) -> io::Result<()>;
}

impl RecordSink for JournalWriter {
    fn record(&mut self, record: &RequestRecord) -> io::Result<()> {
        self.append(record)
    }
}

impl RecordSink for crate::metrics::StepAggregator {
    fn record(&mut self, record: &RequestRecord) -> io::Result<()> {
        self.add(record);
        Ok(())
    }
}

/// Live counters of a run, readable from any thread while it runs.
#[derive(Debug, Default)]
pub struct RunMonitor {
    scheduled: AtomicU64,
    in_flight: AtomicU64,
    completed: AtomicU64,
    failed: AtomicU64,
    output_tokens: AtomicU64,
}

/// A copy of the live counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Progress {
    /// Requests scheduled so far.
    pub scheduled: u64,
    /// Scheduled and not finished (client queue included).
    pub in_flight: u64,
    /// Finished successfully.
    pub completed: u64,
    /// Finished with a failure.
    pub failed: u64,
    /// Output tokens of finished requests.
    pub output_tokens: u64,
}

impl RunMonitor {
    /// The counters now.
    pub fn progress(&self) -> Progress {
        Progress {
            scheduled: self.scheduled.load(Ordering::Relaxed),
            in_flight: self.in_flight.load(Ordering::Relaxed),
            completed: self.completed.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
            output_tokens: self.output_tokens.load(Ordering::Relaxed),
        }
    }

    fn scheduled(&self) {
        self.scheduled.fetch_add(1, Ordering::Relaxed);
        self.in_flight.fetch_add(1, Ordering::Relaxed);
    }

    fn finished(&self, record: &RequestRecord) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
        let counter = if record.is_ok() {
            &self.completed
        } else {
            &self.failed
        };
        counter.fetch_add(1, Ordering::Relaxed);
        self.output_tokens
            .fetch_add(record.output_tokens, Ordering::Relaxed);
    }
}

/// Why a run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndReason {
    /// Every scheduled request finished.
    Completed,
    /// Stopped from outside (Ctrl-C); in-flight requests were recorded as cancelled.
    Interrupted,
    /// Nothing was received for the no-progress timeout while requests were in flight.
    NoProgress,
    /// A record sink failed (e.g. the journal could not be written).
    SinkFailed,
}

impl EndReason {
    /// `completed`, `interrupted`, `no_progress` or `sink_failed`.
    pub fn as_str(self) -> &'static str {
        match self {
            EndReason::Completed => "completed",
            EndReason::Interrupted => "interrupted",
            EndReason::NoProgress => "no_progress",
            EndReason::SinkFailed => "sink_failed",
        }
    }
}

/// How a run went.
#[derive(Debug)]
pub struct RunOutcome {
    /// Why it ended.
    pub end_reason: EndReason,
    /// Records delivered to the sinks.
    pub records: u64,
    /// Wall-clock start.
    pub started_at: SystemTime,
    /// From start to the last record.
    pub elapsed: Duration,
    /// The sink error that stopped the run, if any.
    pub sink_error: Option<io::Error>,
    /// With a shared start time ([`Runner::with_start_at`]): how late the run began sending,
    /// by this machine's clock (zero when it was waiting at the start time).
    pub late_start: Option<Duration>,
}

impl RunOutcome {
    /// A run cancelled while it waited for its shared start: nothing was sent.
    fn stopped_before_start() -> Self {
        RunOutcome {
            end_reason: EndReason::Interrupted,
            records: 0,
            started_at: SystemTime::now(),
            elapsed: Duration::ZERO,
            sink_error: None,
            late_start: None,
        }
    }
}

/// Everything a run needs.
#[derive(Debug, Clone)]
pub struct Runner {
    config: RunConfig,
    backend: Arc<dyn Backend>,
    workload: Arc<dyn Workload>,
    counter: Arc<dyn TokenCounter>,
    streamed: bool,
    monitor: Arc<RunMonitor>,
    finish: CancellationToken,
    step: u32,
    shard: Shard,
    start_at: Option<SystemTime>,
    request_ids: Option<Arc<RequestIds>>,
    /// Timeouts are in the target's time (a clock `time_scale` faster than this machine's).
    target_time_timeouts: bool,
}

impl Runner {
    /// A runner; `config` must have passed [`RunConfig::validate`]. `streamed` says whether the
    /// backend streams (non-streamed requests have no TTFT).
    pub fn new(
        config: RunConfig,
        backend: Arc<dyn Backend>,
        workload: Arc<dyn Workload>,
        counter: Arc<dyn TokenCounter>,
        streamed: bool,
    ) -> Self {
        Runner {
            config,
            backend,
            workload,
            counter,
            streamed,
            monitor: Arc::default(),
            finish: CancellationToken::new(),
            step: 0,
            shard: Shard::SINGLE,
            start_at: None,
            request_ids: None,
            target_time_timeouts: false,
        }
    }

    /// Reads the request and no-progress timeouts in the target's time, as every figure is
    /// (virtual time, on a paused clock running at `time_scale`), not this machine's; a
    /// timeout due at the instant its request ends loses to it (it is due one tick of the
    /// clock's timer later), as a request ending at its deadline has ended.
    pub fn with_target_time_timeouts(mut self) -> Self {
        self.target_time_timeouts = true;
        self
    }

    /// `timeout` on the runtime's clock.
    fn real(&self, timeout: Duration) -> Duration {
        let scale = self.config.time_scale;
        if !self.target_time_timeouts || !scale.is_finite() || scale <= 0.0 {
            return timeout;
        }
        goodput_protocol::time_scale::to_clock(timeout, scale).saturating_add(TIMER_TICK)
    }

    /// Stamps every record with step `index` (sweeps and capacity probes).
    pub fn with_step(mut self, index: u32) -> Self {
        self.step = index;
        self
    }

    /// Sends every request with a correlation id ([`RequestIds::id`] of its step and index).
    pub fn with_request_ids(mut self, ids: RequestIds) -> Self {
        self.request_ids = Some(Arc::new(ids));
        self
    }

    /// Sends only `shard`'s part of the global schedule ([`crate::shard`]).
    pub fn with_shard(mut self, shard: Shard) -> Self {
        self.shard = shard;
        self
    }

    /// Starts the run's clock at wall-clock time `at` (shared by every shard): the runner waits
    /// until then, or, if `at` has passed, counts the schedule from it anyway (the arrivals
    /// already due are sent at once) and reports how late it began.
    pub fn with_start_at(mut self, at: SystemTime) -> Self {
        self.start_at = Some(at);
        self
    }

    /// A token that, once cancelled, stops scheduling new requests while those already
    /// scheduled run to their end (a graceful finish, unlike the run's cancellation).
    pub fn finish_token(&self) -> CancellationToken {
        self.finish.clone()
    }

    /// Live counters (clone the `Arc` to watch from another task).
    pub fn monitor(&self) -> Arc<RunMonitor> {
        Arc::clone(&self.monitor)
    }

    /// Runs to the end, feeding `sinks`. `cancel` stops the run (in-flight requests are
    /// recorded as cancelled).
    pub async fn run(
        &self,
        sinks: &mut [&mut dyn RecordSink],
        cancel: CancellationToken,
    ) -> RunOutcome {
        let Some((started_at, start, late_start)) = self.wait_for_start(&cancel).await else {
            return RunOutcome::stopped_before_start();
        };
        let stop = cancel.child_token();
        let activity = Arc::new(Activity::default());
        let abandoned = Arc::new(AtomicBool::new(false));
        let (sender, records) = mpsc::unbounded_channel();
        let plan = self.plan(start, (&activity, &abandoned));
        let dispatcher = tokio::spawn(dispatch::dispatch(plan, sender, stop.clone()));
        let watchdog = tokio::spawn(dispatch::watch_progress(
            activity,
            Arc::clone(&self.monitor),
            self.progress_deadline(),
            abandoned,
            stop.clone(),
        ));
        let (delivered, sink_error) = self.deliver(records, sinks, &stop).await;
        let elapsed = start.elapsed();
        let _ = dispatcher.await;
        watchdog.abort();
        let stalled = matches!(watchdog.await, Ok(true));
        let end_reason = match (&sink_error, cancel.is_cancelled(), stalled) {
            (Some(_), _, _) => EndReason::SinkFailed,
            (None, true, _) => EndReason::Interrupted,
            (None, false, true) => EndReason::NoProgress,
            (None, false, false) => EndReason::Completed,
        };
        RunOutcome {
            end_reason,
            records: delivered,
            started_at,
            elapsed,
            sink_error,
            late_start,
        }
    }

    /// What the dispatcher needs: the run's configuration and each request's context.
    fn plan(
        &self,
        start: Instant,
        (activity, abandoned): (&Arc<Activity>, &Arc<AtomicBool>),
    ) -> dispatch::Plan {
        dispatch::Plan {
            config: self.config.clone(),
            workload: Arc::clone(&self.workload),
            monitor: Arc::clone(&self.monitor),
            context: request::RequestContext {
                start,
                backend: Arc::clone(&self.backend),
                counter: Arc::clone(&self.counter),
                activity: Arc::clone(activity),
                request_timeout: self.config.request_timeout,
                real_request_timeout: self.real(self.config.request_timeout),
                timeout_grace: if self.target_time_timeouts {
                    TIMER_TICK
                } else {
                    Duration::ZERO
                },
                streamed: self.streamed,
                abandoned: Arc::clone(abandoned),
                no_progress_timeout: self.config.no_progress_timeout,
                time_scale: self.config.time_scale,
                step: self.step,
                request_ids: self.request_ids.clone(),
            },
            finish: self.finish.clone(),
            shard: self.shard,
        }
    }

    /// The no-progress deadline and how often it is checked — four times per deadline, at
    /// most once a second of the target's time — on the runtime's clock.
    fn progress_deadline(&self) -> (Duration, Duration) {
        let deadline = self.config.no_progress_timeout;
        let tick = (deadline / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
        (self.real(deadline), self.real(tick))
    }

    /// The run's start: now, or the shared start time (waited for; `None` if cancelled while
    /// waiting), with how late this process reached it.
    async fn wait_for_start(
        &self,
        cancel: &CancellationToken,
    ) -> Option<(SystemTime, Instant, Option<Duration>)> {
        let Some(at) = self.start_at else {
            return Some((SystemTime::now(), Instant::now(), None));
        };
        let (wall, now) = (SystemTime::now(), Instant::now());
        match at.duration_since(wall) {
            Ok(wait) => {
                tokio::select! {
                    biased;
                    () = cancel.cancelled() => return None,
                    () = tokio::time::sleep_until(now + wait) => {}
                }
                Some((at, now + wait, Some(Duration::ZERO)))
            }
            Err(past) => {
                let late = past.duration();
                let start = now.checked_sub(late).unwrap_or(now);
                Some((at, start, Some(late)))
            }
        }
    }

    /// Hands every record to the sinks until all request tasks are done; the first sink error
    /// stops the run (later records are still counted, not written).
    async fn deliver(
        &self,
        mut records: mpsc::UnboundedReceiver<RequestRecord>,
        sinks: &mut [&mut dyn RecordSink],
        stop: &CancellationToken,
    ) -> (u64, Option<io::Error>) {
        let mut delivered = 0;
        let mut sink_error = None;
        while let Some(record) = records.recv().await {
            self.monitor.finished(&record);
            delivered += 1;
            if sink_error.is_some() {
                continue;
            }
            for sink in sinks.iter_mut() {
                if let Err(error) = sink.record(&record) {
                    sink_error = Some(error);
                    stop.cancel();
                    break;
                }
            }
        }
        (delivered, sink_error)
    }
}
