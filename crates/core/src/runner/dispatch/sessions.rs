//! Multi-turn sessions: the load starts sessions (open loop and replay: one per arrival;
//! closed loop: each of N workers plays one session after another), and each session sends
//! its turns one by one: turn `k + 1` is scheduled the think time after turn `k`'s reply
//! ended, and carries the whole history with the server's *actual* reply text (handed back
//! by the request executor, never stored in the record).
//!
//! Request indices are claimed from one counter as turns are sent, so `--requests` counts
//! requests (turns), not sessions, and warmup by index works as for single requests. A
//! session ends after its last turn, at its first failed turn (later turns would lack a
//! reply to build on), or when the run stops scheduling (`--requests`, `--duration`, Ctrl-C).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Plan, RecordSender};
use crate::config::LoadSpec;
use crate::runner::request::{Due, execute_keeping_reply};
use crate::schedule::open_loop_arrivals;
use crate::workload::history::History;

/// Counters shared by every session of a run.
#[derive(Debug, Default)]
struct Counters {
    next_request: AtomicU64,
    next_session: AtomicU64,
}

impl Counters {
    /// The global index of the next request this shard sends.
    fn claim_request(&self, shard: crate::shard::Shard) -> u64 {
        shard.global_index(self.next_request.fetch_add(1, Ordering::Relaxed))
    }
}

/// What a session task shares.
struct SessionContext {
    plan: Arc<Plan>,
    counters: Arc<Counters>,
    limit: Option<Arc<Semaphore>>,
    sender: RecordSender,
    stop: CancellationToken,
}

/// Starts sessions as the load says; returns once no session can start any more (sessions
/// started in open loop may still be running).
pub(super) async fn dispatch_sessions(
    plan: Arc<Plan>,
    sender: RecordSender,
    stop: CancellationToken,
) {
    let counters = Arc::new(Counters::default());
    let context = |limit: Option<u32>| SessionContext {
        plan: Arc::clone(&plan),
        counters: Arc::clone(&counters),
        limit: limit.map(|n| Arc::new(Semaphore::new(plan.client_cap(n)))),
        sender: sender.clone(),
        stop: stop.clone(),
    };
    if let LoadSpec::Closed { concurrency } = plan.config.load {
        let workers = (0..plan.shard.split(concurrency))
            .map(|_| tokio::spawn(closed_worker(context(None))))
            .collect::<Vec<_>>();
        for worker in workers {
            let _ = worker.await;
        }
        return;
    }
    let replayed = plan.workload.arrival_offsets();
    if let Some((schedule, max_concurrency)) =
        open_loop_arrivals(&plan.config.load, plan.config.seed, replayed)
    {
        open_sessions(context(max_concurrency), schedule).await;
    }
}

impl SessionContext {
    /// Whether a session may start `offset` after the run start.
    fn may_start(&self, offset: Duration) -> bool {
        let next = self.counters.next_request.load(Ordering::Relaxed);
        self.plan
            .config
            .admits(self.plan.shard.global_index(next), offset)
    }

    fn share(&self) -> SessionContext {
        SessionContext {
            plan: Arc::clone(&self.plan),
            counters: Arc::clone(&self.counters),
            limit: self.limit.clone(),
            sender: self.sender.clone(),
            stop: self.stop.clone(),
        }
    }
}

async fn open_sessions(context: SessionContext, arrivals: impl Iterator<Item = Duration>) {
    for (session, offset) in (0u64..).zip(arrivals) {
        if !context.may_start(offset) {
            break;
        }
        if !context.plan.shard.owns(session) {
            continue;
        }
        let due = context.plan.context.due_at(offset);
        tokio::select! {
            biased;
            () = context.stop.cancelled() => break,
            () = tokio::time::sleep_until(due.at) => {}
        }
        let shared = context.share();
        tokio::spawn(async move { play(&shared, session, due).await });
    }
}

async fn closed_worker(context: SessionContext) {
    while !context.stop.is_cancelled() {
        let due = context.plan.context.due_now(Instant::now());
        if !context.may_start(due.offset) {
            break;
        }
        let local = context
            .counters
            .next_session
            .fetch_add(1, Ordering::Relaxed);
        let session = context.plan.shard.global_index(local);
        if !play(&context, session, due).await {
            break;
        }
    }
}

/// Plays session `session` from `first` (when its opening turn is due). Returns whether the
/// run may go on (false once scheduling has stopped).
async fn play(context: &SessionContext, session: u64, first: Due) -> bool {
    let plan = &context.plan;
    let Some(conversations) = plan.workload.conversations() else {
        return false;
    };
    let script = conversations.conversation(session);
    if script.turns.is_empty() {
        return false;
    }
    let mut history = History::new(script.system, session);
    let mut scheduled = first;
    for (turn_index, turn) in script.turns.into_iter().enumerate() {
        if turn_index > 0 {
            let at = plan.context.real_after(Instant::now(), turn.think_time);
            scheduled = plan.context.due_now(at);
            if !sleep_until(&context.stop, scheduled.at).await {
                return false;
            }
        }
        let index = context.counters.claim_request(plan.shard);
        let Some(ticket) = plan.admit(index, scheduled) else {
            return false;
        };
        let request = history.request(&turn, turn_index, index, &plan.workload.images(index));
        plan.monitor.scheduled();
        let limit = context.limit.clone();
        let (mut record, reply) = execute_keeping_reply(
            &plan.context,
            ticket,
            request.spec.clone(),
            limit,
            &context.stop,
            true,
        )
        .await;
        record.session = Some(session);
        record.expected_prefix_tokens = request.expected_prefix_tokens;
        record.tool_result_turn = request.tool_result;
        record.images.clone_from(&request.images);
        let (ok, output_tokens) = (record.is_ok(), record.output_tokens);
        let called_tool = record.ended_in_tool_call;
        if context.sender.send(record).is_err() {
            return false;
        }
        if !ok {
            return !context.stop.is_cancelled();
        }
        history.answered(&request, reply, called_tool, output_tokens);
    }
    true
}

/// Sleeps until `at` (the user has thought); false when the run stops first.
async fn sleep_until(stop: &CancellationToken, at: Instant) -> bool {
    tokio::select! {
        biased;
        () = stop.cancelled() => false,
        () = tokio::time::sleep_until(at) => true,
    }
}
