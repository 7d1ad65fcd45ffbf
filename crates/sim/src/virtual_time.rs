//! Virtual-time simulation: drives an engine through its events with no HTTP and no sleeping,
//! so an hour of traffic takes as long as the engine's arithmetic. Used by tests and by
//! planning features that need a capacity figure in seconds.

use std::collections::HashMap;

use crate::engine::{
    Engine, EngineEvent, EngineRequest, FinishReason, Rejection, RequestId, SimTime, StepSummary,
};

/// Everything that happened to one request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RequestTimeline {
    /// Request id.
    pub id: RequestId,
    /// When it was submitted.
    pub arrival: SimTime,
    /// When it first left the waiting queue.
    pub scheduled: Option<SimTime>,
    /// Each token delivery: when, and how many tokens.
    pub deliveries: Vec<(SimTime, u32)>,
    /// When and why it finished.
    pub finished: Option<(SimTime, FinishReason)>,
    /// Why it was refused, if it was.
    pub rejected: Option<Rejection>,
    /// Why the engine dropped it, if it did.
    pub aborted: Option<String>,
    /// How often it was preempted.
    pub preemptions: u32,
}

impl RequestTimeline {
    /// Arrival to first token.
    pub fn ttft(&self) -> Option<SimTime> {
        self.deliveries.first().map(|(at, _)| *at - self.arrival)
    }

    /// Arrival to last token.
    pub fn e2e(&self) -> Option<SimTime> {
        self.finished.map(|(at, _)| at - self.arrival)
    }

    /// Arrival to leaving the waiting queue.
    pub fn queue_time(&self) -> Option<SimTime> {
        self.scheduled.map(|at| at - self.arrival)
    }

    /// Tokens delivered.
    pub fn output_tokens(&self) -> u32 {
        self.deliveries.iter().map(|(_, n)| n).sum()
    }

    /// Time per output token after the first: `(last − first) / (tokens − 1)`.
    pub fn tpot(&self) -> Option<SimTime> {
        let tokens = self.output_tokens();
        let (first, last) = (self.deliveries.first()?.0, self.deliveries.last()?.0);
        (tokens > 1).then(|| (last - first) / (tokens - 1))
    }

    /// Gaps between consecutive deliveries.
    pub fn delivery_gaps(&self) -> impl Iterator<Item = SimTime> + '_ {
        self.deliveries.windows(2).map(|pair| pair[1].0 - pair[0].0)
    }
}

/// An engine driven in virtual time.
#[derive(Debug)]
pub struct Simulation {
    engine: Box<dyn Engine>,
    now: SimTime,
    timelines: Vec<RequestTimeline>,
    index: HashMap<RequestId, usize>,
    steps: Vec<StepSummary>,
    events: Vec<EngineEvent>,
}

impl Simulation {
    /// A simulation at time zero.
    pub fn new(engine: Box<dyn Engine>) -> Self {
        Simulation {
            engine,
            now: SimTime::ZERO,
            timelines: Vec::new(),
            index: HashMap::new(),
            steps: Vec::new(),
            events: Vec::new(),
        }
    }

    /// Runs all arrivals (sorted by time) and then everything until the engine is idle.
    pub fn run_open_loop(
        engine: Box<dyn Engine>,
        arrivals: impl IntoIterator<Item = (SimTime, EngineRequest)>,
    ) -> Simulation {
        let mut sim = Simulation::new(engine);
        for (at, request) in arrivals {
            sim.submit(at, request);
        }
        sim.run_until_idle();
        sim
    }

    /// The current virtual time.
    pub fn now(&self) -> SimTime {
        self.now
    }

    /// The engine (for its statistics).
    pub fn engine(&self) -> &dyn Engine {
        self.engine.as_ref()
    }

    /// Advances to just before `at` (not before now) and submits `request` at `at`.
    pub fn submit(&mut self, at: SimTime, request: EngineRequest) {
        self.reach(at);
        let id = request.id;
        let mut timeline = RequestTimeline {
            id,
            arrival: self.now,
            ..RequestTimeline::default()
        };
        if let Err(rejection) = self.engine.submit(self.now, request) {
            timeline.rejected = Some(rejection);
        }
        self.index.insert(id, self.timelines.len());
        self.timelines.push(timeline);
    }

    /// Cancels a request now.
    pub fn cancel(&mut self, id: RequestId) {
        self.engine.cancel(self.now, id);
    }

    /// Processes every engine event before `at` and moves the clock to `at`; what happens at
    /// `at` itself waits, so requests submitted at that instant reach the engine together.
    pub fn reach(&mut self, at: SimTime) {
        let before = at.saturating_sub(SimTime::from_nanos(1));
        if before > self.now {
            self.run_until(before);
        }
        self.now = self.now.max(at);
    }

    /// Processes every engine event up to and including `until`.
    pub fn run_until(&mut self, until: SimTime) {
        self.now = self.now.max(until);
        self.engine.advance(self.now, &mut self.events);
        self.record_events();
    }

    /// Processes every engine event up to and including `until`, appending them to `out`.
    pub fn run_until_collecting(&mut self, until: SimTime, out: &mut Vec<EngineEvent>) {
        self.now = self.now.max(until);
        self.engine.advance(self.now, &mut self.events);
        out.extend(self.events.iter().cloned());
        self.record_events();
    }

    /// Advances to the engine's next event that produces something (a request reaching the
    /// engine through its frontend produces nothing by itself) and returns what happened
    /// (empty when idle).
    pub fn run_next(&mut self) -> Vec<EngineEvent> {
        while let Some(at) = self.engine.next_event_at() {
            self.now = self.now.max(at);
            self.engine.advance(self.now, &mut self.events);
            if !self.events.is_empty() {
                let happened = self.events.clone();
                self.record_events();
                return happened;
            }
        }
        Vec::new()
    }

    /// Runs until the engine has nothing left to do.
    pub fn run_until_idle(&mut self) {
        while let Some(at) = self.engine.next_event_at() {
            self.run_until(at);
        }
    }

    /// Every request submitted so far, in submission order.
    pub fn timelines(&self) -> &[RequestTimeline] {
        &self.timelines
    }

    /// One request's timeline.
    pub fn timeline(&self, id: RequestId) -> Option<&RequestTimeline> {
        self.index.get(&id).map(|&i| &self.timelines[i])
    }

    /// Hands over request `id`'s timeline and forgets it (its slot in [`Simulation::timelines`]
    /// is left empty), so a long run keeps only the requests still in flight.
    pub fn take_timeline(&mut self, id: RequestId) -> Option<RequestTimeline> {
        let index = self.index.remove(&id)?;
        Some(std::mem::take(&mut self.timelines[index]))
    }

    /// Every step the engine took (batching engine only).
    pub fn steps(&self) -> &[StepSummary] {
        &self.steps
    }

    fn record_events(&mut self) {
        for event in self.events.drain(..) {
            let timeline = |id: &RequestId| self.index.get(id).copied();
            match event {
                EngineEvent::Scheduled { id, at, .. } => {
                    if let Some(i) = timeline(&id) {
                        self.timelines[i].scheduled.get_or_insert(at);
                    }
                }
                EngineEvent::Tokens {
                    id,
                    at,
                    count,
                    finished,
                } => {
                    if let Some(i) = timeline(&id) {
                        let t = &mut self.timelines[i];
                        t.deliveries.push((at, count));
                        if let Some(reason) = finished {
                            t.finished = Some((at, reason));
                        }
                    }
                }
                EngineEvent::Preempted { id, .. } => {
                    if let Some(i) = timeline(&id) {
                        self.timelines[i].preemptions += 1;
                    }
                }
                EngineEvent::Aborted { id, reason, .. } => {
                    if let Some(i) = timeline(&id) {
                        self.timelines[i].aborted = Some(reason);
                    }
                }
                EngineEvent::Step(summary) => self.steps.push(summary),
            }
        }
    }
}
