//! LoRA adapters on one replica, as an [`Engine`] around it: each request uses one of
//! `count` adapters; the replica holds `slots` at once (vLLM's `max_loras`). A request whose
//! adapter is loaded goes straight in; one whose adapter is missing waits while it loads
//! (`load` each, one at a time), and a load needs a free slot or one whose adapter no request
//! in flight uses (the least recently used goes). Waiting requests keep their order; one whose
//! adapter is loaded passes those still waiting for theirs, as vLLM's scheduler skips a
//! request whose LoRA cannot join the batch.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

use super::{Engine, EngineEvent, EngineRequest, EngineStats, Rejection, RequestId, SimTime};

/// The adapter request `id` uses, of `count`, drawn uniformly from `seed` and the id.
pub fn adapter_of(seed: u64, id: RequestId, count: u32) -> u32 {
    let mut x = seed ^ id.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    ((x ^ (x >> 31)) % u64::from(count.max(1))) as u32
}

/// A replica with adapter slots.
#[derive(Debug)]
pub struct Adapters {
    inner: Box<dyn Engine>,
    count: u32,
    slots: usize,
    load: Duration,
    seed: u64,
    /// Loaded adapters, the least recently used first.
    resident: Vec<u32>,
    /// Requests in flight by adapter.
    users: HashMap<u32, usize>,
    adapter: HashMap<RequestId, u32>,
    /// Requests waiting for their adapter, in arrival order (`true`: prefilled).
    waiting: VecDeque<(EngineRequest, bool)>,
    /// The load under way: when it ends, and which adapter.
    loading: Option<(SimTime, u32)>,
    loads: u64,
    pending: Vec<EngineEvent>,
}

impl Adapters {
    /// `inner` holding `slots` of `count` adapters, `load` to load one; the requests'
    /// adapters drawn from `seed`.
    pub fn new(inner: Box<dyn Engine>, count: u32, slots: u32, load: Duration, seed: u64) -> Self {
        Adapters {
            inner,
            count,
            slots: slots.max(1) as usize,
            load,
            seed,
            resident: Vec::new(),
            users: HashMap::new(),
            adapter: HashMap::new(),
            waiting: VecDeque::new(),
            loading: None,
            loads: 0,
            pending: Vec::new(),
        }
    }

    /// Adapter loads so far (misses).
    pub fn loads(&self) -> u64 {
        self.loads
    }

    fn hand_in(
        &mut self,
        now: SimTime,
        request: EngineRequest,
        prefilled: bool,
    ) -> Result<(), Rejection> {
        let id = request.id;
        let Some(&adapter) = self.adapter.get(&id) else {
            return Ok(());
        };
        let handed = if prefilled {
            self.inner.submit_prefilled(now, request)
        } else {
            self.inner.submit(now, request)
        };
        match handed {
            Ok(()) => {
                *self.users.entry(adapter).or_default() += 1;
                if let Some(at) = self.resident.iter().position(|a| *a == adapter) {
                    let used = self.resident.remove(at);
                    self.resident.push(used);
                }
            }
            Err(_) => {
                self.adapter.remove(&id);
            }
        }
        handed
    }

    /// Hands in every waiting request whose adapter is loaded, then starts the next load.
    fn dispatch(&mut self, now: SimTime) {
        let mut still = VecDeque::new();
        while let Some((request, prefilled)) = self.waiting.pop_front() {
            let loaded = self
                .adapter
                .get(&request.id)
                .is_some_and(|a| self.resident.contains(a));
            if !loaded {
                still.push_back((request, prefilled));
                continue;
            }
            let id = request.id;
            if let Err(refused) = self.hand_in(now, request, prefilled) {
                self.pending.push(EngineEvent::Aborted {
                    id,
                    at: now,
                    reason: refused.to_string(),
                });
            }
        }
        self.waiting = still;
        self.start_load(now);
    }

    /// Starts loading the first waiting request's adapter when the loader and a slot are free.
    fn start_load(&mut self, now: SimTime) {
        if self.loading.is_some() {
            return;
        }
        let Some(wanted) = self
            .waiting
            .front()
            .and_then(|(r, _)| self.adapter.get(&r.id).copied())
        else {
            return;
        };
        if self.resident.len() >= self.slots {
            let idle = self
                .resident
                .iter()
                .position(|a| self.users.get(a).is_none_or(|n| *n == 0));
            let Some(idle) = idle else {
                return; // every slot's adapter is in use: wait for one to finish
            };
            self.resident.remove(idle);
        }
        self.loads += 1;
        self.loading = Some((now + self.load, wanted));
    }

    fn submit_either(
        &mut self,
        now: SimTime,
        request: EngineRequest,
        prefilled: bool,
    ) -> Result<(), Rejection> {
        let adapter = adapter_of(self.seed, request.id, self.count);
        self.adapter.insert(request.id, adapter);
        if self.resident.contains(&adapter) {
            return self.hand_in(now, request, prefilled);
        }
        self.waiting.push_back((request, prefilled));
        self.start_load(now);
        Ok(())
    }

    fn finished(&mut self, id: RequestId) {
        if let Some(adapter) = self.adapter.remove(&id)
            && let Some(users) = self.users.get_mut(&adapter)
        {
            *users = users.saturating_sub(1);
        }
    }
}

impl Engine for Adapters {
    fn submit(&mut self, now: SimTime, request: EngineRequest) -> Result<(), Rejection> {
        self.submit_either(now, request, false)
    }

    fn submit_prefilled(&mut self, now: SimTime, request: EngineRequest) -> Result<(), Rejection> {
        self.submit_either(now, request, true)
    }

    fn cancel(&mut self, now: SimTime, id: RequestId) {
        if let Some(at) = self.waiting.iter().position(|(r, _)| r.id == id) {
            self.waiting.remove(at);
            self.adapter.remove(&id);
            return;
        }
        self.inner.cancel(now, id);
        self.finished(id);
        self.start_load(now);
    }

    fn next_event_at(&self) -> Option<SimTime> {
        let load = self.loading.map(|(at, _)| at);
        [self.inner.next_event_at(), load]
            .into_iter()
            .flatten()
            .min()
    }

    fn advance(&mut self, now: SimTime, events: &mut Vec<EngineEvent>) {
        events.append(&mut self.pending);
        loop {
            let inner = self.inner.next_event_at().filter(|at| *at <= now);
            let load = self.loading.map(|(at, _)| at).filter(|at| *at <= now);
            let Some(at) = [inner, load].into_iter().flatten().min() else {
                break;
            };
            let start = events.len();
            self.inner.advance(at, events);
            for event in &events[start..] {
                if let EngineEvent::Tokens {
                    id,
                    finished: Some(_),
                    ..
                }
                | EngineEvent::Aborted { id, .. } = event
                {
                    self.finished(*id);
                }
            }
            if let Some((_, adapter)) = self.loading.take_if(|(done, _)| *done <= at) {
                self.resident.push(adapter);
            }
            self.dispatch(at);
            events.append(&mut self.pending);
        }
        self.inner.advance(now, events);
    }

    fn stats(&self) -> EngineStats {
        let mut stats = self.inner.stats();
        stats.waiting += self.waiting.len();
        stats
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::config::FixedTimingConfig;
    use crate::engine::fixed::FixedTimingEngine;
    use crate::virtual_time::Simulation;

    const MS: Duration = Duration::from_millis(1);

    fn request(id: u64) -> EngineRequest {
        EngineRequest {
            id,
            prompt_tokens: 32,
            block_hashes: Vec::new(),
            max_output_tokens: 11,
            stop_after_tokens: 11,
        }
    }

    /// Two requests on one adapter-slot replica (fixed timing: 100 ms TTFT, 10 ms a token,
    /// 4 slots), each on another adapter, loads 50 ms: the first loads its adapter (0–50 ms)
    /// and runs 50–250 ms; the second's load waits for that adapter to go idle at 250 ms,
    /// then runs 300–500 ms. A third request on the first adapter, sent at 10 ms while it
    /// loads, goes in with it at 50 ms.
    #[test]
    fn a_miss_pays_the_load_and_waits_for_a_free_slot() {
        let (a, b) = (
            (0..).find(|id| adapter_of(0, *id, 2) == 0).unwrap(),
            (0..).find(|id| adapter_of(0, *id, 2) == 1).unwrap(),
        );
        let same = (a + 1..).find(|id| adapter_of(0, *id, 2) == 0).unwrap();
        let fixed = FixedTimingEngine::new(FixedTimingConfig {
            slots: 4,
            ..FixedTimingConfig::default()
        });
        let engine = Adapters::new(Box::new(fixed), 2, 1, MS * 50, 0);
        let arrivals = [
            (Duration::ZERO, request(a)),
            (Duration::ZERO, request(b)),
            (MS * 10, request(same)),
        ];
        let sim = Simulation::run_open_loop(Box::new(engine), arrivals);
        let end = |id| sim.timeline(id).unwrap().finished.unwrap().0;
        assert_eq!((end(a), end(same), end(b)), (MS * 250, MS * 250, MS * 500));
    }

    /// With as many slots as adapters, each adapter loads once and nothing waits after.
    #[test]
    fn enough_slots_load_each_adapter_once() {
        let fixed = FixedTimingEngine::new(FixedTimingConfig {
            slots: 64,
            ..FixedTimingConfig::default()
        });
        let mut engine = Adapters::new(Box::new(fixed), 3, 3, MS * 50, 7);
        let mut events = Vec::new();
        for id in 0..30 {
            let now = MS * 100 * id as u32;
            engine.advance(now, &mut events);
            engine.submit(now, request(id)).unwrap();
        }
        engine.advance(MS * 10_000, &mut events);
        assert_eq!(engine.loads(), 3);
        assert_eq!(engine.stats().running, 0);
    }
}
