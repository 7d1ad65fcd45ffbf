//! Runs an engine in real (or scaled) time: a task owns the `Box<dyn Engine>`, and cloneable
//! [`DriverHandle`]s submit requests, cancel them, and read [`EngineStats`] and the
//! server-side metrics.
//!
//! Simulated time is `(tokio::time::Instant::now() − start) × time_scale`. The task loop:
//! advance the engine to the current simulated time, forward each request's events to its
//! channel, then wait for either a command or the real instant of the engine's next event.
//! Everything uses `tokio::time`, so tests can run it under `tokio::time::pause()`. A request
//! whose [`RequestEvents`] is dropped (the client went away) is cancelled in the engine.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::time::{Instant, sleep_until};

use crate::engine::{
    Engine, EngineEvent, EngineRequest, EngineStats, FinishReason, Rejection, RequestId, SimTime,
};
use crate::server_metrics::ServerMetrics;
use crate::server_metrics::replicas::ReplicaView;

pub use crate::clock::SimClock;

/// What happens to one submitted request, as its client sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestUpdate {
    /// `count` tokens were generated; `finished` is set with the last ones.
    Tokens {
        /// Tokens generated at once.
        count: u32,
        /// Why generation ended, on the last tokens.
        finished: Option<FinishReason>,
    },
    /// The request was admitted with this many prompt tokens from the prefix cache.
    Admitted {
        /// Cached prompt tokens.
        cached_tokens: u32,
    },
    /// The engine dropped the request; nothing more will come.
    Aborted {
        /// Why.
        reason: String,
    },
}

impl RequestUpdate {
    fn is_final(&self) -> bool {
        matches!(
            self,
            RequestUpdate::Aborted { .. }
                | RequestUpdate::Tokens {
                    finished: Some(_),
                    ..
                }
        )
    }
}

/// Why a submission failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SubmitError {
    /// The engine refused one of the requests (none of them was kept).
    #[error(transparent)]
    Rejected(#[from] Rejection),
    /// The driver task has stopped (the runtime is shutting down).
    #[error("the simulated engine has stopped")]
    Stopped,
}

/// The updates of a group of requests submitted together, tagged with each request's position
/// in the group. Dropping it cancels the requests that have not finished.
#[derive(Debug)]
pub struct RequestEvents {
    updates: mpsc::UnboundedReceiver<(usize, RequestUpdate)>,
    /// Engine id of each request still running, by position.
    live: Vec<Option<RequestId>>,
    /// The replica that took the group's first request (a fleet; `None`: one engine).
    replica: Option<usize>,
    commands: mpsc::UnboundedSender<Command>,
}

impl RequestEvents {
    /// The next update; `None` once every request has finished (or the driver stopped).
    pub async fn recv(&mut self) -> Option<(usize, RequestUpdate)> {
        let (position, update) = self.updates.recv().await?;
        if update.is_final()
            && let Some(slot) = self.live.get_mut(position)
        {
            *slot = None;
        }
        Some((position, update))
    }

    /// The replica that took the group's first request (`None`: one engine).
    pub fn replica(&self) -> Option<usize> {
        self.replica
    }

    /// Number of requests in the group.
    pub fn len(&self) -> usize {
        self.live.len()
    }

    /// Whether the group is empty.
    pub fn is_empty(&self) -> bool {
        self.live.is_empty()
    }

    /// Cancels every request of the group that has not finished; no more updates follow.
    pub fn cancel(&mut self) {
        let ids: Vec<RequestId> = self.live.iter_mut().filter_map(Option::take).collect();
        if !ids.is_empty() {
            let _ = self.commands.send(Command::Cancel { ids });
        }
        self.updates.close();
    }
}

impl Drop for RequestEvents {
    fn drop(&mut self) {
        self.cancel();
    }
}

#[derive(Debug)]
enum Command {
    Submit {
        requests: Vec<EngineRequest>,
        reply: oneshot::Sender<Result<RequestEvents, SubmitError>>,
        /// When it was sent, simulated time.
        at: SimTime,
    },
    Cancel {
        ids: Vec<RequestId>,
    },
}

/// State the driver publishes for handles to read.
#[derive(Debug)]
struct Published {
    stats: EngineStats,
    metrics: ServerMetrics,
    /// Each replica's state and the requests routed to it, with more than one replica.
    replicas: ReplicaView,
}

/// Publishes the engine's state, whole and by replica.
fn publish(published: &mut Published, engine: &dyn Engine) {
    published.stats = engine.stats();
    published.replicas.update(engine);
}

/// Talks to the driver task. Cheap to clone.
#[derive(Debug, Clone)]
pub struct DriverHandle {
    commands: mpsc::UnboundedSender<Command>,
    published: Arc<Mutex<Published>>,
    clock: SimClock,
}

impl DriverHandle {
    /// Spawns the driver of `engine` on `runtime`, with simulated time 0 now.
    pub fn spawn(
        runtime: &tokio::runtime::Handle,
        engine: Box<dyn Engine>,
        time_scale: f64,
        metrics: ServerMetrics,
    ) -> DriverHandle {
        Self::spawn_on(runtime, engine, (time_scale, false), metrics)
    }

    /// [`spawn`](Self::spawn) on a paused clock when `settle`: a request arriving at an idle
    /// engine waits until every task runnable at its instant has run (one tick of the clock),
    /// so requests sent at one instant share the step that starts then, as the client's side
    /// of one instant comes before the engine's.
    pub fn spawn_on(
        runtime: &tokio::runtime::Handle,
        engine: Box<dyn Engine>,
        (time_scale, settle): (f64, bool),
        metrics: ServerMetrics,
    ) -> DriverHandle {
        let clock = SimClock::new(Instant::now(), time_scale);
        let (commands, receiver) = mpsc::unbounded_channel();
        let published = Arc::new(Mutex::new(Published {
            stats: engine.stats(),
            metrics,
            replicas: ReplicaView::default(),
        }));
        let driver = Driver {
            engine,
            clock,
            commands: receiver,
            command_sender: commands.downgrade(),
            routes: HashMap::new(),
            published: Arc::clone(&published),
            next_id: 0,
            now: SimTime::ZERO,
            settle,
        };
        runtime.spawn(driver.run());
        DriverHandle {
            commands,
            published,
            clock,
        }
    }

    /// Submits a group of requests (one per prompt). Their `id`s are replaced by unique ids
    /// the driver assigns. Either all are accepted or none is (the first rejection is returned).
    pub async fn submit(&self, requests: Vec<EngineRequest>) -> Result<RequestEvents, SubmitError> {
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(Command::Submit {
                requests,
                reply,
                at: self.clock.now(),
            })
            .map_err(|_| SubmitError::Stopped)?;
        answer.await.unwrap_or(Err(SubmitError::Stopped))
    }

    /// The engine's state as of its last advance.
    pub fn stats(&self) -> EngineStats {
        self.lock().stats.clone()
    }

    /// The Prometheus exposition of the server-side metrics.
    pub fn render_metrics(&self) -> String {
        let published = self.lock();
        let mut out = published.metrics.render(&published.stats);
        published
            .replicas
            .render(&mut out, published.metrics.labels());
        out
    }

    /// Counts a request refused before it reached the engine.
    pub fn record_rejection(&self, reason: &str) {
        self.lock().metrics.record_rejection(reason);
    }

    /// The clock mapping real to simulated time.
    pub fn clock(&self) -> SimClock {
        self.clock
    }

    fn lock(&self) -> MutexGuard<'_, Published> {
        self.published
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Where a request's updates go.
#[derive(Debug)]
struct Route {
    updates: mpsc::UnboundedSender<(usize, RequestUpdate)>,
    position: usize,
}

/// The task that owns the engine.
#[derive(Debug)]
struct Driver {
    engine: Box<dyn Engine>,
    clock: SimClock,
    commands: mpsc::UnboundedReceiver<Command>,
    /// Handed to [`RequestEvents`] so they can cancel; weak so it does not keep the loop alive.
    command_sender: mpsc::WeakUnboundedSender<Command>,
    routes: HashMap<RequestId, Route>,
    published: Arc<Mutex<Published>>,
    next_id: RequestId,
    /// The simulated time the engine was last advanced to (never goes backwards).
    now: SimTime,
    /// On a paused clock: let an instant settle before an idle engine starts a step.
    settle: bool,
}

impl Driver {
    async fn run(mut self) {
        let mut reached = None;
        loop {
            self.advance(reached.take());
            let command = match self.engine.next_event_at() {
                // At one instant a request submitted joins the step that starts then (the
                // client acts before the engine), and the order never depends on chance.
                Some(at) => tokio::select! {
                    biased;
                    command = self.commands.recv() => command,
                    () = sleep_until(self.clock.instant_of(at)) => {
                        reached = Some(at);
                        continue;
                    }
                },
                None => self.commands.recv().await,
            };
            let Some(command) = command else { break };
            let idle = self.engine.next_event_at().is_none();
            self.handle(command);
            if self.settle && idle {
                // Every task runnable at this instant runs before the clock moves one tick;
                // what they submitted then joins this instant's step.
                tokio::time::sleep(Duration::from_nanos(1)).await;
                while let Ok(command) = self.commands.try_recv() {
                    self.handle(command);
                }
            }
        }
    }

    fn handle(&mut self, command: Command) {
        match command {
            Command::Submit {
                requests,
                reply,
                at,
            } => self.submit(requests, reply, at),
            Command::Cancel { ids } => self.cancel(&ids),
        }
    }

    /// Advances the engine to the current simulated time (at least `reached`, the event time a
    /// timer just fired for, so rounding in the clock conversion cannot stall the loop), then
    /// delivers what happened and publishes the new state.
    fn advance(&mut self, reached: Option<SimTime>) {
        let now = self.clock.now().max(reached.unwrap_or_default());
        self.advance_to(now);
    }

    /// [`advance`](Self::advance) to `at` (never backwards).
    fn advance_to(&mut self, at: SimTime) {
        self.now = self.now.max(at);
        let mut events = Vec::new();
        self.engine.advance(self.now, &mut events);
        let mut published = self
            .published
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for event in &events {
            if deliver(&mut self.routes, event) {
                published.metrics.record_event(event);
            } else if let Some(id) = event_request(event) {
                // The client went away: stop generating for it (its tokens were not delivered).
                self.engine.cancel(self.now, id);
                published.metrics.record_abort(id);
            }
        }
        publish(&mut published, &*self.engine);
    }
}

/// Forwards a request event to its client; `false` when the client is gone.
fn deliver(routes: &mut HashMap<RequestId, Route>, event: &EngineEvent) -> bool {
    let (id, update) = match event {
        EngineEvent::Tokens {
            id,
            count,
            finished,
            ..
        } => (
            *id,
            RequestUpdate::Tokens {
                count: *count,
                finished: *finished,
            },
        ),
        EngineEvent::Aborted { id, reason, .. } => (
            *id,
            RequestUpdate::Aborted {
                reason: reason.clone(),
            },
        ),
        EngineEvent::Scheduled {
            id, cached_tokens, ..
        } => (
            *id,
            RequestUpdate::Admitted {
                cached_tokens: *cached_tokens,
            },
        ),
        _ => return true,
    };
    let Some(route) = routes.get(&id) else {
        return true;
    };
    let last = update.is_final();
    let sent = route.updates.send((route.position, update)).is_ok();
    if last || !sent {
        routes.remove(&id);
    }
    sent
}

impl Driver {
    fn submit(
        &mut self,
        requests: Vec<EngineRequest>,
        reply: oneshot::Sender<Result<RequestEvents, SubmitError>>,
        at: SimTime,
    ) {
        // Only when time has moved: advancing to the instant the engine is at would start
        // its step before a request of that instant joined it.
        if at > self.now {
            self.advance_to(at);
        }
        let Some(commands) = self.command_sender.upgrade() else {
            return;
        };
        let (updates, receiver) = mpsc::unbounded_channel();
        let mut accepted: Vec<RequestId> = Vec::with_capacity(requests.len());
        let shared = Arc::clone(&self.published);
        let mut published = shared.lock().unwrap_or_else(PoisonError::into_inner);
        for (position, mut request) in requests.into_iter().enumerate() {
            request.id = self.next_id;
            self.next_id += 1;
            let (id, prompt_tokens) = (request.id, request.prompt_tokens);
            if let Err(rejection) = self.engine.submit(self.now, request) {
                self.refuse(&accepted, &mut published, &rejection);
                let _ = reply.send(Err(SubmitError::Rejected(rejection)));
                return;
            }
            published
                .metrics
                .record_arrival(id, self.now, prompt_tokens);
            self.routes.insert(
                id,
                Route {
                    updates: updates.clone(),
                    position,
                },
            );
            accepted.push(id);
        }
        publish(&mut published, &*self.engine);
        let replica = accepted
            .first()
            .and_then(|id| self.engine.replica_serving(*id));
        if let Some(replica) = replica {
            published.replicas.routed(replica);
        }
        drop(published);
        let live = accepted.iter().copied().map(Some).collect();
        let events = RequestEvents {
            replica,
            updates: receiver,
            live,
            commands,
        };
        if let Err(Ok(mut events)) = reply.send(Ok(events)) {
            // The submitter is gone already.
            events.cancel();
        }
    }

    /// Takes back the requests of a group `accepted` before one of it was refused.
    fn refuse(&mut self, accepted: &[RequestId], published: &mut Published, rejection: &Rejection) {
        for &id in accepted {
            self.engine.cancel(self.now, id);
            self.routes.remove(&id);
            published.metrics.forget(id);
        }
        published
            .metrics
            .record_rejection(rejection_reason(rejection));
        publish(published, &*self.engine);
    }

    fn cancel(&mut self, ids: &[RequestId]) {
        self.advance(None);
        let mut published = self
            .published
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for id in ids {
            if self.routes.remove(id).is_some() {
                self.engine.cancel(self.now, *id);
                published.metrics.record_abort(*id);
            }
        }
        publish(&mut published, &*self.engine);
    }
}

/// The request an event is about, for events that are delivered to clients.
fn event_request(event: &EngineEvent) -> Option<RequestId> {
    match event {
        EngineEvent::Tokens { id, .. } | EngineEvent::Aborted { id, .. } => Some(*id),
        _ => None,
    }
}

/// The `reason` label of `goodput_sim:requests_rejected_total` for an engine rejection.
pub fn rejection_reason(rejection: &Rejection) -> &'static str {
    match rejection {
        Rejection::QueueFull { .. } => "queue_full",
        Rejection::TooLong(_) => "too_long",
        Rejection::Invalid(_) => "invalid",
    }
}

#[cfg(test)]
#[path = "driver_tests.rs"]
mod tests;
