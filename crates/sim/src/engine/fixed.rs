//! The fixed-timing engine: `slots` requests are served at once; a request that gets a slot at
//! `t` delivers its first token at `t + ttft` and every further token `itl` after the previous
//! one (in chunks of `tokens_per_chunk`); requests beyond the slots wait in FIFO order. Client
//! measurements against it can be checked exactly.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::time::Duration;

use super::{Engine, EngineEvent, EngineRequest, EngineStats, Rejection, RequestId, SimTime};
use crate::config::FixedTimingConfig;

#[derive(Debug, Clone)]
struct Active {
    request: EngineRequest,
    next_at: SimTime,
    emitted: u32,
    total: u32,
}

/// The fixed-timing engine. Every operation is O(log slots), so it serves tens of thousands of
/// concurrent streams (the client benchmarks need that many).
#[derive(Debug)]
pub struct FixedTimingEngine {
    config: FixedTimingConfig,
    slots: Vec<Option<Active>>,
    /// Free slots; the lowest is taken first.
    free: BTreeSet<usize>,
    /// `(next_at, slot)` of every busy slot: the earliest is the next to deliver.
    due: BTreeSet<(SimTime, usize)>,
    /// Slot of each running request.
    slot_of: HashMap<RequestId, usize>,
    waiting: VecDeque<EngineRequest>,
    pending_events: Vec<EngineEvent>,
    /// Requests submitted with their prompt already computed: first token `itl` after a slot.
    prefilled: HashSet<RequestId>,
}

impl FixedTimingEngine {
    /// An idle engine; `config` must have passed [`FixedTimingConfig::validate`].
    pub fn new(config: FixedTimingConfig) -> Self {
        FixedTimingEngine {
            slots: vec![None; config.slots as usize],
            free: (0..config.slots as usize).collect(),
            due: BTreeSet::new(),
            slot_of: HashMap::new(),
            waiting: VecDeque::new(),
            pending_events: Vec::new(),
            prefilled: HashSet::new(),
            config,
        }
    }

    /// Service time of a request with `output_tokens` tokens: `ttft + (n − 1) · itl`.
    pub fn service_time(&self, output_tokens: u32) -> Duration {
        self.config.ttft + self.config.itl * output_tokens.saturating_sub(1)
    }

    fn start(&mut self, slot: usize, now: SimTime, request: EngineRequest) {
        self.pending_events.push(EngineEvent::Scheduled {
            id: request.id,
            at: now,
            cached_tokens: 0,
        });
        let total = request.output_tokens();
        let first_chunk = self.config.tokens_per_chunk.min(total);
        let first = if self.prefilled.remove(&request.id) {
            self.config.itl
        } else {
            self.config.ttft
        };
        let next_at = now + first + self.config.itl * (first_chunk - 1);
        self.free.remove(&slot);
        self.due.insert((next_at, slot));
        self.slot_of.insert(request.id, slot);
        self.slots[slot] = Some(Active {
            request,
            next_at,
            emitted: 0,
            total,
        });
    }

    /// Delivers the next chunk of the slot whose turn it is, at its scheduled time.
    fn deliver(&mut self, slot: usize) {
        let Some(active) = self.slots[slot].as_mut() else {
            return;
        };
        let at = active.next_at;
        let count = self
            .config
            .tokens_per_chunk
            .min(active.total - active.emitted);
        active.emitted += count;
        let done = active.emitted >= active.total;
        let finished = done.then(|| active.request.finish_reason());
        self.pending_events.push(EngineEvent::Tokens {
            id: active.request.id,
            at,
            count,
            finished,
        });
        self.due.remove(&(at, slot));
        if done {
            self.release(slot, at);
        } else {
            let next_chunk = self
                .config
                .tokens_per_chunk
                .min(active.total - active.emitted);
            active.next_at = at + self.config.itl * next_chunk;
            self.due.insert((active.next_at, slot));
        }
    }

    /// Frees `slot` at `now` and gives it to the first waiting request.
    fn release(&mut self, slot: usize, now: SimTime) {
        if let Some(active) = self.slots[slot].take() {
            self.due.remove(&(active.next_at, slot));
            self.slot_of.remove(&active.request.id);
        }
        self.free.insert(slot);
        if let Some(next) = self.waiting.pop_front() {
            self.start(slot, now, next);
        }
    }

    fn earliest_slot(&self) -> Option<(usize, SimTime)> {
        self.due.first().map(|&(at, slot)| (slot, at))
    }
}

impl Engine for FixedTimingEngine {
    fn submit(&mut self, now: SimTime, request: EngineRequest) -> Result<(), Rejection> {
        if request.max_output_tokens == 0 {
            return Err(Rejection::Invalid("max_tokens must be at least 1".into()));
        }
        let wanted = u64::from(request.prompt_tokens) + u64::from(request.max_output_tokens);
        if wanted > u64::from(self.config.max_model_len) {
            return Err(Rejection::TooLong(format!(
                "This model's maximum context length is {} tokens. However, you requested {wanted} tokens.",
                self.config.max_model_len
            )));
        }
        match self.free.first().copied() {
            Some(slot) => self.start(slot, now, request),
            None if self.waiting.len() >= self.config.max_waiting => {
                return Err(Rejection::QueueFull {
                    waiting: self.waiting.len(),
                    retry_after: self.service_time(1).max(Duration::from_millis(100)),
                });
            }
            None => self.waiting.push_back(request),
        }
        Ok(())
    }

    /// The remaining tokens of a request whose prompt was computed elsewhere: the first `itl`
    /// after it gets a slot (a decode step, not a prefill), the rest `itl` apart.
    fn submit_prefilled(&mut self, now: SimTime, request: EngineRequest) -> Result<(), Rejection> {
        let request = super::one_token_fewer(request);
        let id = request.id;
        self.prefilled.insert(id);
        let submitted = self.submit(now, request);
        if submitted.is_err() {
            self.prefilled.remove(&id);
        }
        submitted
    }

    fn cancel(&mut self, now: SimTime, id: RequestId) {
        self.prefilled.remove(&id);
        if let Some(pos) = self.waiting.iter().position(|r| r.id == id) {
            self.waiting.remove(pos);
            return;
        }
        if let Some(&slot) = self.slot_of.get(&id) {
            self.release(slot, now);
        }
    }

    fn next_event_at(&self) -> Option<SimTime> {
        self.earliest_slot().map(|(_, at)| at)
    }

    fn advance(&mut self, now: SimTime, events: &mut Vec<EngineEvent>) {
        events.append(&mut self.pending_events);
        while let Some((slot, at)) = self.earliest_slot() {
            if at > now {
                break;
            }
            self.deliver(slot);
            events.append(&mut self.pending_events);
        }
    }

    fn stats(&self) -> EngineStats {
        EngineStats {
            running: self.slot_of.len(),
            waiting: self.waiting.len(),
            ..EngineStats::default()
        }
    }
}
