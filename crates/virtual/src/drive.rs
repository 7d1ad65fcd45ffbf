//! The client side of a virtual-time run: the load's arrivals (open loop, phase profiles,
//! trace replay) or closed-loop workers, the workload's requests — single prompts, batches
//! and multi-turn sessions whose turns carry the server's replies after a think time — a
//! client-side cap on requests in flight, and each request's timeout, all on the engine's
//! virtual clock. What a live runner does with sleeps and sockets, done with a queue of
//! due events.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::Duration;

use goodput_core::backend::RequestSpec;
use goodput_core::backend::openai::request_body;
use goodput_core::config::{LoadSpec, RunConfig};
use goodput_core::record::{Phase, RequestRecord, TokenSource};
use goodput_core::schedule::{Offsets, open_loop_arrivals};
use goodput_core::workload::history::{History, TurnRequest};
use goodput_core::workload::{Conversation, note_request};
use goodput_sim::build_engine;
use goodput_sim::engine::{EngineEvent, RequestId, SimTime};
use goodput_sim::http::frontend::{Admission, Frontend};
use goodput_sim::virtual_time::Simulation;

use super::VirtualTarget;
use super::record::{Sent, record};

/// How long a request refused before reaching the engine keeps its closed-loop worker.
const REFUSAL_ROUND_TRIP: Duration = Duration::from_millis(1);

/// A session between turns.
struct Playing {
    session: u64,
    script: Conversation,
    next_turn: usize,
    history: History,
}

/// Something the client does at a due time.
enum Job {
    /// The next open-loop arrival.
    Arrival,
    /// A closed-loop worker is free.
    Worker,
    /// A session's next turn (its think time is over).
    Turn(Box<Playing>),
    /// A request's timeout.
    Deadline(u64),
}

/// A request on the wire: what was sent, its engine requests, and its session.
struct InFlight {
    sent: Sent,
    engine_ids: Vec<RequestId>,
    number: u64,
    session: Option<(Box<Playing>, TurnRequest)>,
    /// The key of its timeout in the due queue.
    deadline: (SimTime, u64),
    /// Its engine requests still running.
    remaining: usize,
}

/// One virtual-time run of `config` against `target`.
pub(crate) struct VirtualRun<'a> {
    target: &'a VirtualTarget,
    config: &'a RunConfig,
    sim: Simulation,
    frontend: Frontend,
    arrivals: Option<Offsets>,
    /// Closed loop: a request or session that ends frees a worker.
    closed: bool,
    /// Due jobs by (time, order of queueing).
    due: BTreeMap<(SimTime, u64), Job>,
    queued: u64,
    /// Requests due but held by the client-side cap, in order.
    held: VecDeque<(SimTime, Job)>,
    cap: Option<usize>,
    in_flight: HashMap<u64, InFlight>,
    owner: HashMap<RequestId, u64>,
    next_index: u64,
    next_session: u64,
    next_engine_id: RequestId,
    /// Takes each request's record as it ends; `false` finishes the run (nothing more is
    /// sent; requests in flight end).
    sink: &'a mut dyn FnMut(RequestRecord) -> bool,
    /// The sink has finished the run.
    finished: bool,
}

impl<'a> VirtualRun<'a> {
    /// A run of `config` against `target`, nothing sent yet.
    pub(crate) fn new(
        target: &'a VirtualTarget,
        config: &'a RunConfig,
        sink: &'a mut dyn FnMut(RequestRecord) -> bool,
    ) -> Self {
        let replayed = target.requests.workload.arrival_offsets();
        let (arrivals, cap) = match open_loop_arrivals(&config.load, config.seed, replayed) {
            Some((offsets, cap)) => (Some(offsets), cap.map(|n| n.max(1) as usize)),
            None => (None, None),
        };
        VirtualRun {
            target,
            config,
            sim: Simulation::new(build_engine(&target.sim)),
            frontend: Frontend::new(&target.sim),
            arrivals,
            closed: matches!(config.load, LoadSpec::Closed { .. }),
            due: BTreeMap::new(),
            queued: 0,
            held: VecDeque::new(),
            cap,
            in_flight: HashMap::new(),
            owner: HashMap::new(),
            next_index: 0,
            next_session: 0,
            next_engine_id: 0,
            sink,
            finished: false,
        }
    }

    /// Runs until nothing is due and the engine is idle, handing every request's record to
    /// the sink as it ends.
    pub(crate) fn run(mut self) {
        self.start();
        loop {
            let engine_at = self.sim.engine().next_event_at();
            let job_at = self.due.keys().next().map(|(at, _)| *at);
            match (engine_at, job_at) {
                (None, None) => break,
                // At one instant the client acts before the engine, so requests sent together
                // share a step; a timeout waits, so a request ending at its deadline has ended.
                (Some(engine), Some(job))
                    if job < engine || job == engine && !self.deadline_due() =>
                {
                    self.run_job();
                }
                (None, Some(_)) => self.run_job(),
                (Some(engine), _) => self.advance_engine(engine),
            }
        }
    }

    fn start(&mut self) {
        match self.config.load {
            LoadSpec::Closed { concurrency } => {
                for _ in 0..concurrency {
                    let _ = self.schedule(Duration::ZERO, Job::Worker);
                }
            }
            _ => self.next_arrival(),
        }
    }

    fn schedule(&mut self, at: SimTime, job: Job) -> (SimTime, u64) {
        let key = (at, self.queued);
        self.due.insert(key, job);
        self.queued += 1;
        key
    }

    fn next_arrival(&mut self) {
        if let Some(at) = self.arrivals.as_mut().and_then(Iterator::next) {
            let _ = self.schedule(at, Job::Arrival);
        }
    }

    /// Whether the first due job is a request's timeout.
    fn deadline_due(&self) -> bool {
        matches!(self.due.first_key_value(), Some((_, Job::Deadline(_))))
    }

    fn run_job(&mut self) {
        let Some(((at, _), job)) = self.due.pop_first() else {
            return;
        };
        self.sim.reach(at);
        if let Job::Deadline(index) = job {
            return self.time_out(index);
        }
        if let Job::Arrival = job {
            self.next_arrival();
        }
        if self.cap.is_some_and(|cap| self.in_flight.len() >= cap) {
            self.held.push_back((at, job));
        } else {
            self.begin(at, job);
        }
    }

    /// Starts `job`, scheduled at `scheduled`, now.
    fn begin(&mut self, scheduled: SimTime, job: Job) {
        if self.finished {
            return;
        }
        let sessions = self.target.requests.workload.conversations().is_some();
        match job {
            Job::Turn(playing) => self.send_turn(scheduled, playing),
            Job::Arrival | Job::Worker if sessions => {
                let session = self.next_session;
                self.next_session += 1;
                let Some(conversations) = self.target.requests.workload.conversations() else {
                    return;
                };
                let script = conversations.conversation(session);
                let history = History::new(script.system.clone(), session);
                let playing = Playing {
                    session,
                    script,
                    next_turn: 0,
                    history,
                };
                self.send_turn(scheduled, Box::new(playing));
            }
            Job::Arrival | Job::Worker => {
                let index = self.next_index;
                if !self.config.admits(index, scheduled) {
                    return self.stop_arrivals();
                }
                self.next_index += 1;
                let spec = self.target.requests.workload.request(index);
                self.send(scheduled, spec, None);
            }
            Job::Deadline(_) => {}
        }
    }

    /// No request may start any more: open-loop arrivals end (workers end by themselves).
    fn stop_arrivals(&mut self) {
        self.arrivals = None;
        self.due.retain(|_, job| !matches!(job, Job::Arrival));
    }

    fn send_turn(&mut self, scheduled: SimTime, mut playing: Box<Playing>) {
        // A session without turns ends its worker, as in a live run (no endless loop of
        // empty sessions).
        let Some(turn) = playing.script.turns.get(playing.next_turn).cloned() else {
            return;
        };
        let index = self.next_index;
        if !self.config.admits(index, scheduled) {
            return self.stop_arrivals();
        }
        self.next_index += 1;
        let images = self.target.requests.workload.images(index);
        let request = playing
            .history
            .request(&turn, playing.next_turn, index, &images);
        playing.next_turn += 1;
        let spec = request.spec.clone();
        self.send(scheduled, spec, Some((playing, request)));
    }

    /// Hands `spec` to the server's front end and its engine now.
    fn send(
        &mut self,
        scheduled: SimTime,
        spec: RequestSpec,
        session: Option<(Box<Playing>, TurnRequest)>,
    ) {
        let now = self.sim.now();
        let phase = if self.config.is_warmup(spec.index, scheduled) {
            Phase::Warmup
        } else {
            Phase::Measure
        };
        let admitted = self.admit(&spec);
        let mut sent = Sent {
            spec,
            phase,
            scheduled,
            sent: now,
            input_tokens: 0,
            stream: self.target.requests.openai.stream,
            cached_details: false,
            encoder: false,
            cached_tokens: 0,
            invalid: None,
            timed_out: None,
        };
        let index = sent.spec.index;
        let (engine_ids, remaining, number) = match admitted {
            Ok(admission) => {
                sent.input_tokens = admission
                    .requests
                    .iter()
                    .map(|r| u64::from(r.prompt_tokens))
                    .sum();
                sent.stream = admission.stream;
                sent.cached_details = admission.cached_details;
                sent.encoder = admission.encoder;
                let (ids, open) = self.submit(index, admission.requests);
                (ids, open, admission.number)
            }
            Err(message) => {
                sent.invalid = Some(message);
                (Vec::new(), 0, 0)
            }
        };
        let deadline = self.schedule(now + self.config.request_timeout, Job::Deadline(index));
        let pending = InFlight {
            sent,
            engine_ids,
            number,
            session,
            deadline,
            remaining,
        };
        self.in_flight.insert(index, pending);
        self.settle(index);
    }

    fn admit(&mut self, spec: &RequestSpec) -> Result<Admission, String> {
        let requests = &self.target.requests;
        let bytes = match &requests.tensors {
            Some(tensors) => serde_json::to_vec(&tensors.body(spec).0),
            None => {
                let body =
                    request_body(&requests.openai, spec).map_err(|failure| failure.message)?;
                serde_json::to_vec(&body)
            }
        }
        .map_err(|e| e.to_string())?;
        self.frontend.admit(requests.api, &bytes)
    }

    /// Submits a request's engine requests now; returns their ids and how many the engine
    /// took (a refused one never ends, so it is not waited for).
    fn submit(
        &mut self,
        index: u64,
        requests: Vec<goodput_sim::EngineRequest>,
    ) -> (Vec<RequestId>, usize) {
        let now = self.sim.now();
        let mut ids = Vec::with_capacity(requests.len());
        for mut request in requests {
            let id = self.next_engine_id;
            self.next_engine_id += 1;
            request.id = id;
            self.sim.submit(now, request);
            self.owner.insert(id, index);
            ids.push(id);
        }
        let refused: Vec<RequestId> = ids
            .iter()
            .copied()
            .filter(|id| self.sim.timeline(*id).is_none_or(|t| t.rejected.is_some()))
            .collect();
        for id in &refused {
            self.owner.remove(id);
        }
        let open = ids.len() - refused.len();
        (ids, open)
    }

    fn advance_engine(&mut self, at: SimTime) {
        let mut events = Vec::new();
        self.sim.run_until_collecting(at, &mut events);
        for event in events {
            match event {
                EngineEvent::Scheduled {
                    id, cached_tokens, ..
                } => {
                    if let Some(pending) = self
                        .owner
                        .get(&id)
                        .and_then(|index| self.in_flight.get_mut(index))
                    {
                        pending.sent.cached_tokens += u64::from(cached_tokens);
                    }
                }
                EngineEvent::Tokens {
                    id,
                    finished: Some(_),
                    ..
                }
                | EngineEvent::Aborted { id, .. } => self.engine_request_ended(id),
                _ => {}
            }
        }
    }

    fn engine_request_ended(&mut self, id: RequestId) {
        let Some(index) = self.owner.remove(&id) else {
            return;
        };
        if let Some(pending) = self.in_flight.get_mut(&index) {
            pending.remaining = pending.remaining.saturating_sub(1);
        }
        self.settle(index);
    }

    fn time_out(&mut self, index: u64) {
        let now = self.sim.now();
        let Some(pending) = self.in_flight.get_mut(&index) else {
            return;
        };
        pending.sent.timed_out = Some(now);
        for id in pending.engine_ids.clone() {
            if self.owner.remove(&id).is_some() {
                self.sim.cancel(id);
            }
        }
        pending.remaining = 0;
        self.settle(index);
    }

    /// Notes on request `index`'s record what the workload knows of it (as the live runner
    /// does): the prefix it expects reusable, its images' sizes, and no input tokens for
    /// tensors that are not text (`--api v2`; the wire carries no usage).
    fn note_workload(&self, index: u64, record: &mut RequestRecord) {
        let requests = &self.target.requests;
        note_request(requests.workload.as_ref(), index, record);
        if requests.tensors.as_ref().is_some_and(|t| !t.carries_text()) {
            record.input_tokens = None;
            record.input_tokens_source = TokenSource::None;
            record.expected_input_tokens = None;
        }
    }

    /// Ends request `index` if all its engine requests have ended.
    fn settle(&mut self, index: u64) {
        if self.in_flight.get(&index).is_none_or(|p| p.remaining > 0) {
            return;
        }
        let Some(mut pending) = self.in_flight.remove(&index) else {
            return;
        };
        self.due.remove(&pending.deadline);
        let timelines: Vec<_> = pending
            .engine_ids
            .iter()
            .filter_map(|id| self.sim.take_timeline(*id))
            .collect();
        let timelines: Vec<_> = timelines.iter().collect();
        let mut record = record(&pending.sent, &timelines);
        self.note_workload(index, &mut record);
        // A request refused at once frees its worker a round trip later, as over a socket:
        // a closed loop against a server refusing everything must still advance in time.
        let now = self.sim.now();
        let free_at = if now <= pending.sent.sent {
            now + REFUSAL_ROUND_TRIP
        } else {
            now
        };
        match pending.session.take() {
            Some((playing, request)) => {
                self.turn_ended(&mut record, (pending.number, free_at), playing, request)
            }
            None if self.closed => {
                let _ = self.schedule(free_at, Job::Worker);
            }
            None => {}
        }
        if !(self.sink)(record) && !self.finished {
            self.finished = true;
            self.stop_arrivals();
            self.held.clear();
        }
        self.release_held();
    }

    fn turn_ended(
        &mut self,
        record: &mut RequestRecord,
        (number, free_at): (u64, SimTime),
        mut playing: Box<Playing>,
        request: TurnRequest,
    ) {
        record.session = Some(playing.session);
        record.expected_prefix_tokens = request.expected_prefix_tokens;
        record.tool_result_turn = request.tool_result;
        record.images.clone_from(&request.images);
        let now = self.sim.now();
        let next = playing.script.turns.get(playing.next_turn);
        match next {
            Some(turn) if record.is_ok() => {
                let think = turn.think_time;
                let tokens = u32::try_from(record.output_tokens).unwrap_or(u32::MAX);
                let reply = self.frontend.answer_text(number, 0, tokens);
                playing
                    .history
                    .answered(&request, reply, false, record.output_tokens);
                let _ = self.schedule(now + think, Job::Turn(playing));
            }
            _ => self.session_ended(free_at),
        }
    }

    /// A closed-loop worker starts its next session; open-loop sessions end.
    fn session_ended(&mut self, at: SimTime) {
        if self.closed {
            let _ = self.schedule(at, Job::Worker);
        }
    }

    fn release_held(&mut self) {
        while self.cap.is_none_or(|cap| self.in_flight.len() < cap) {
            let Some((scheduled, job)) = self.held.pop_front() else {
                break;
            };
            self.begin(scheduled, job);
        }
    }
}
