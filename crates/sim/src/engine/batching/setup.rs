//! A slot's setup before its request's first step ([`BatchingConfig::slot_setup_us`]): a
//! request that reaches the engine waits for a free sequence slot, holds it for the setup,
//! then waits to be scheduled like any other — the slot busy all along, the other sequences
//! unslowed.
//!
//! [`BatchingConfig::slot_setup_us`]: crate::config::BatchingConfig::slot_setup_us

use std::collections::VecDeque;
use std::time::Duration;

use super::{BatchingEngine, Sequence};
use crate::config::QueueOrder;
use crate::engine::SimTime;

/// Requests before their first step: waiting for a slot, then holding one for the setup.
#[derive(Debug, Default)]
pub(super) struct Setup {
    /// The setup's length.
    length: Duration,
    /// Requests waiting for a slot, in the configured queue order.
    unslotted: VecDeque<Sequence>,
    /// Requests holding a slot, with when their setup ends (in order).
    holding: VecDeque<(SimTime, Sequence)>,
}

impl Setup {
    /// Setups of `us` microseconds.
    pub(super) fn new(us: f64) -> Self {
        Setup {
            length: Duration::from_secs_f64(us.max(0.0) * 1e-6),
            ..Setup::default()
        }
    }

    /// When the next setup ends.
    pub(super) fn next_ready(&self) -> Option<SimTime> {
        self.holding.front().map(|(at, _)| *at)
    }

    /// Requests waiting for a slot.
    pub(super) fn unslotted(&self) -> usize {
        self.unslotted.len()
    }

    /// Requests holding a slot for their setup.
    pub(super) fn holding(&self) -> usize {
        self.holding.len()
    }

    /// Removes request `id` wherever it waits; whether it was here.
    pub(super) fn cancel(&mut self, id: crate::engine::RequestId) -> bool {
        if let Some(pos) = self.unslotted.iter().position(|s| s.request.id == id) {
            self.unslotted.remove(pos);
            return true;
        }
        if let Some(pos) = self.holding.iter().position(|(_, s)| s.request.id == id) {
            self.holding.remove(pos);
            return true;
        }
        false
    }
}

impl BatchingEngine {
    /// Takes a request that reached the engine at `at`: into the waiting queue at its place in
    /// the configured queue order, or — with a slot setup — to wait for a slot there, taking
    /// one at once if it is free.
    pub(super) fn enqueue(&mut self, at: SimTime, seq: Sequence) {
        let order = self.config.queue_order;
        match &mut self.setup {
            Some(setup) => {
                insert_in_order(&mut setup.unslotted, seq, order);
                self.take_slots(at);
            }
            None => insert_in_order(&mut self.waiting, seq, order),
        }
    }

    /// Starts the setup of every request waiting for a slot while one is free (a sequence
    /// holds its slot from its setup to its end; every one waiting to be scheduled has one).
    pub(super) fn take_slots(&mut self, now: SimTime) {
        let max = self.config.max_num_seqs() as usize;
        let busy = self.running.len() + self.waiting.len();
        let Some(setup) = &mut self.setup else {
            return;
        };
        while busy + setup.holding.len() < max {
            let Some(seq) = setup.unslotted.pop_front() else {
                break;
            };
            setup.holding.push_back((now + setup.length, seq));
        }
    }

    /// The request whose setup ended at `at` waits to be scheduled; an idle engine starts a
    /// step once every setup and arrival of that instant is in.
    pub(super) fn end_setup(&mut self, at: SimTime) {
        let Some(setup) = &mut self.setup else {
            return;
        };
        if let Some((_, seq)) = setup.holding.pop_front() {
            self.waiting.push_back(seq);
        }
        self.start_when_all_in(at);
    }
}

/// Puts `seq` into `queue` at its place in `order`, which compares the prompt and the answer
/// asked for.
fn insert_in_order(queue: &mut VecDeque<Sequence>, seq: Sequence, order: QueueOrder) {
    let keys = |seq: &Sequence| (seq.request.prompt_tokens, seq.request.max_output_tokens);
    let at = order.position(queue.iter().map(keys), keys(&seq));
    queue.insert(at, seq);
}
