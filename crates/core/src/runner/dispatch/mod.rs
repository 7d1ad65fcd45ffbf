//! Dispatchers: closed loop (N workers, each sends its next request when the previous ends)
//! and open loop (a precomputed schedule, one task per arrival, optional client-side
//! concurrency cap; paced by [`super::pacer`] on a multi-threaded runtime), trace replay and
//! phase profiles (open loop over their own offsets), multi-turn sessions (`sessions`), plus
//! the no-progress watchdog.

mod sessions;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::RunMonitor;
use super::request::{Due, RequestContext, Ticket, execute};
use crate::backend::Activity;
use crate::config::{LoadSpec, RunConfig};
use crate::record::{Phase, RequestRecord};
use crate::schedule::open_loop_arrivals;
use crate::shard::Shard;
use crate::workload::{Workload, note_request};

/// What the dispatcher needs.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    pub(super) config: RunConfig,
    pub(super) workload: Arc<dyn Workload>,
    pub(super) monitor: Arc<RunMonitor>,
    pub(super) context: RequestContext,
    /// Cancelled to stop scheduling while scheduled requests finish.
    pub(super) finish: CancellationToken,
    /// The part of the global schedule this process sends.
    pub(super) shard: Shard,
}

impl Plan {
    /// This shard's part of a client-side cap of `total` requests in flight.
    fn client_cap(&self, total: u32) -> usize {
        self.shard.split(total).max(1) as usize
    }

    /// Whether request `index`, due at `due`, may still be scheduled and then its ticket
    /// (warm-up read from the same offset as the admission).
    fn admit(&self, index: u64, due: Due) -> Option<Ticket> {
        self.config
            .admits(index, due.offset)
            .then(|| self.ticket(index, due))
    }

    fn ticket(&self, index: u64, scheduled: Due) -> Ticket {
        let phase = if self.config.is_warmup(index, scheduled.offset) {
            Phase::Warmup
        } else {
            Phase::Measure
        };
        Ticket {
            index,
            phase,
            scheduled,
        }
    }
}

type RecordSender = mpsc::UnboundedSender<RequestRecord>;

/// Schedules every request of the run; returns once the last one is scheduled (they may
/// still be running).
pub(super) async fn dispatch(plan: Plan, sender: RecordSender, stop: CancellationToken) {
    let plan = Arc::new(plan);
    if plan.workload.conversations().is_some() {
        return sessions::dispatch_sessions(plan, sender, stop).await;
    }
    if let LoadSpec::Closed { concurrency } = plan.config.load {
        return closed_loop(plan, concurrency, sender, stop).await;
    }
    let replayed = plan.workload.arrival_offsets();
    if let Some((schedule, max_concurrency)) =
        open_loop_arrivals(&plan.config.load, plan.config.seed, replayed)
    {
        let limit = max_concurrency.map(|n| Arc::new(Semaphore::new(plan.client_cap(n))));
        open_loop(plan, schedule, limit, sender, stop).await;
    }
}

async fn open_loop(
    plan: Arc<Plan>,
    schedule: impl Iterator<Item = Duration> + Send + 'static,
    limit: Option<Arc<Semaphore>>,
    sender: RecordSender,
    stop: CancellationToken,
) {
    if super::pacer::available() {
        let (admitted, timed) = (Arc::clone(&plan), Arc::clone(&plan));
        let shard = plan.shard;
        let arrivals = (0u64..)
            .zip(schedule)
            .take_while(move |(index, offset)| admitted.config.admits(*index, *offset))
            .filter(move |(index, _)| shard.owns(*index))
            .map(move |(index, offset)| (index, timed.context.due_at(offset)));
        let (pacer_stop, finish) = (stop.clone(), plan.finish.clone());
        let stopped = move || pacer_stop.is_cancelled() || finish.is_cancelled();
        let launch_one = move |index, due| launch(&plan, index, due, &limit, &sender, &stop);
        return super::pacer::pace(arrivals, launch_one, stopped).await;
    }
    for (index, offset) in (0u64..).zip(schedule) {
        if !plan.config.admits(index, offset) {
            break;
        }
        if !plan.shard.owns(index) {
            continue;
        }
        let due = plan.context.due_at(offset);
        tokio::select! {
            biased;
            () = stop.cancelled() => break,
            () = plan.finish.cancelled() => break,
            () = tokio::time::sleep_until(due.at) => {}
        }
        launch(&plan, index, due, &limit, &sender, &stop);
    }
}

/// Schedules request `index` due at `due` and spawns its task on the runtime.
fn launch(
    plan: &Arc<Plan>,
    index: u64,
    due: Due,
    limit: &Option<Arc<Semaphore>>,
    sender: &RecordSender,
    stop: &CancellationToken,
) {
    let ticket = plan.ticket(index, due);
    plan.monitor.scheduled();
    let (plan, sender, stop, limit) = (
        Arc::clone(plan),
        sender.clone(),
        stop.clone(),
        limit.clone(),
    );
    tokio::spawn(async move {
        let spec = plan.workload.request(index);
        let mut record = execute(&plan.context, ticket, spec, limit, &stop).await;
        note_request(plan.workload.as_ref(), index, &mut record);
        let _ = sender.send(record);
    });
}

async fn closed_loop(
    plan: Arc<Plan>,
    concurrency: u32,
    sender: RecordSender,
    stop: CancellationToken,
) {
    let next = Arc::new(AtomicU64::new(0));
    let workers_here = plan.shard.split(concurrency);
    let mut workers = Vec::with_capacity(workers_here as usize);
    for _ in 0..workers_here {
        let (plan, sender, stop, next) = (
            Arc::clone(&plan),
            sender.clone(),
            stop.clone(),
            Arc::clone(&next),
        );
        workers.push(tokio::spawn(async move {
            while !stop.is_cancelled() && !plan.finish.is_cancelled() {
                let index = plan
                    .shard
                    .global_index(next.fetch_add(1, Ordering::Relaxed));
                let due = plan.context.due_now(Instant::now());
                let Some(ticket) = plan.admit(index, due) else {
                    break;
                };
                plan.monitor.scheduled();
                let spec = plan.workload.request(index);
                let mut record = execute(&plan.context, ticket, spec, None, &stop).await;
                note_request(plan.workload.as_ref(), index, &mut record);
                if sender.send(record).is_err() {
                    break;
                }
            }
        }));
    }
    drop(sender);
    for worker in workers {
        let _ = worker.await;
    }
}

/// Cancels the run when requests are in flight and no activity was seen for `deadline`,
/// looking every `tick`. Returns whether it fired.
pub(super) async fn watch_progress(
    activity: Arc<Activity>,
    monitor: Arc<RunMonitor>,
    (deadline, tick): (Duration, Duration),
    abandoned: Arc<AtomicBool>,
    stop: CancellationToken,
) -> bool {
    let mut last_count = activity.count();
    let mut last_change = Instant::now();
    loop {
        tokio::select! {
            () = stop.cancelled() => return false,
            () = tokio::time::sleep(tick) => {}
        }
        let count = activity.count();
        let idle = monitor.progress().in_flight == 0;
        if count != last_count || idle {
            last_count = count;
            last_change = Instant::now();
        } else if last_change.elapsed() >= deadline {
            abandoned.store(true, Ordering::Relaxed);
            stop.cancel();
            return true;
        }
    }
}
