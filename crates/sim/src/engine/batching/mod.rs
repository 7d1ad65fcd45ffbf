//! The continuous-batching engine: an iteration-level scheduler over a paged KV cache, timed
//! by the per-operator cost model, with the admission of the configured engine policy.
//!
//! Each step: decode sequences first (1 token, plus draft tokens with speculative decoding),
//! then running prompt chunks, then waiting requests in the queue order (FIFO unless configured
//! otherwise: `queue_order`), all under the step's token budget and `max_num_seqs`; under
//! SGLang a step with prompts carries only prompts. Admission keeps a watermark of blocks free
//! and, by policy, reserves blocks for part (SGLang) or all (TensorRT-LLM) of each answer. When
//! a running sequence needs a KV block and none is free, the newest running sequence is
//! preempted (its KV freed, recomputed later) and put back at the head of the waiting queue.
//! Requests reach the queue after the policy's frontend latency; the queue is bounded and
//! refuses requests beyond it.

use std::collections::{HashMap, VecDeque};
use std::time::Duration;

mod admission;
mod setup;
mod slots;

use super::cost::StepCostModel;
use super::kv::{BlockId, BlockPool, blocks_for};
use super::speculative::AcceptanceSampler;
use super::{
    Engine, EngineEvent, EngineRequest, EngineStats, Rejection, RequestId, SimTime, StepSummary,
};
use crate::config::BatchingConfig;

#[derive(Debug, Clone)]
struct Sequence {
    request: EngineRequest,
    target_output: u32,
    generated: u32,
    computed: u32,
    blocks: Vec<BlockId>,
    registered_blocks: usize,
    admitted_once: bool,
    /// Its slot, with [`BatchingConfig::slot_ubatch_tokens`] (0 otherwise).
    slot: u32,
    /// Its prompt's KV arrived from a prefill replica: admitted without computing it.
    prefilled: bool,
}

impl Sequence {
    fn new(request: EngineRequest) -> Self {
        Sequence {
            target_output: request.output_tokens(),
            request,
            generated: 0,
            computed: 0,
            blocks: Vec::new(),
            registered_blocks: 0,
            admitted_once: false,
            slot: 0,
            prefilled: false,
        }
    }

    fn total_tokens(&self) -> u32 {
        self.request.prompt_tokens + self.generated
    }

    fn pending(&self) -> u32 {
        self.total_tokens() - self.computed
    }

    fn is_prefill(&self) -> bool {
        self.generated == 0 || self.pending() > 1
    }
}

#[derive(Debug, Clone, Copy)]
struct Scheduled {
    id: RequestId,
    new_tokens: u32,
    drafts: u32,
    context: u32,
    is_prefill: bool,
    samples: bool,
    slot: u32,
}

#[derive(Debug, Clone)]
struct ActiveStep {
    ends_at: SimTime,
    entries: Vec<Scheduled>,
    summary: StepSummary,
}

/// The continuous-batching engine.
#[derive(Debug)]
pub struct BatchingEngine {
    config: BatchingConfig,
    cost: StepCostModel,
    pool: BlockPool,
    token_budget: u32,
    watermark_blocks: u32,
    frontend: Duration,
    arriving: VecDeque<(SimTime, Sequence)>,
    waiting: VecDeque<Sequence>,
    running: Vec<Sequence>,
    step: Option<ActiveStep>,
    /// [`BatchingConfig::launch_window_us`].
    launch_window: Option<Duration>,
    /// When the step held open by the launch window starts.
    launch_at: Option<SimTime>,
    /// The slots, with [`BatchingConfig::slot_ubatch_tokens`].
    slots: Option<slots::SlotTable>,
    /// Requests before their slot's setup ends, with [`BatchingConfig::slot_setup_us`].
    setup: Option<setup::Setup>,
    speculative: Option<AcceptanceSampler>,
    pending_events: Vec<EngineEvent>,
    preemptions: u64,
    prefix_queries: u64,
    prefix_hits: u64,
}

impl BatchingEngine {
    /// An idle engine; `config` must have passed [`BatchingConfig::validate`].
    pub fn new(mut config: BatchingConfig, seed: u64) -> Self {
        // The engine's own defaults, resolved once: admission reads them every step.
        config.max_num_seqs = Some(config.max_num_seqs());
        config.max_num_batched_tokens = Some(config.max_num_batched_tokens());
        let blocks = u32::try_from(config.kv_blocks()).unwrap_or(u32::MAX);
        let token_budget = config.max_num_batched_tokens();
        let launch_window = config
            .launch_window_us
            .map(|us| Duration::from_secs_f64(us.max(0.0) * 1e-6));
        let slot_table = config
            .slot_ubatch_tokens
            .map(|_| slots::SlotTable::new(config.max_num_seqs(), config.slot_prompt_similarity));
        BatchingEngine {
            slots: slot_table,
            setup: config.slot_setup_us.map(setup::Setup::new),
            cost: StepCostModel::new(&config),
            pool: BlockPool::new(blocks),
            token_budget,
            watermark_blocks: (f64::from(blocks) * config.watermark).floor() as u32,
            frontend: Duration::from_secs_f64(
                config.effective_overheads().frontend_us.max(0.0) * 1e-6,
            ),
            arriving: VecDeque::new(),
            speculative: config
                .speculative
                .as_ref()
                .map(|s| AcceptanceSampler::new(s, seed)),
            config,
            waiting: VecDeque::new(),
            running: Vec::new(),
            step: None,
            launch_window,
            launch_at: None,
            pending_events: Vec::new(),
            preemptions: 0,
            prefix_queries: 0,
            prefix_hits: 0,
        }
    }

    /// Takes the request at the head of `arriving` into the waiting queue; an idle engine
    /// starts a step once every request reaching it at that same instant is in, so identical
    /// requests sent together share their first step as on a real server.
    fn admit_arrival(&mut self, at: SimTime) {
        if let Some((_, seq)) = self.arriving.pop_front() {
            self.enqueue(at, seq);
        }
        self.start_when_all_in(at);
    }

    /// Starts a step at `at` on an idle engine once every arrival and every slot setup of that
    /// instant is in.
    fn start_when_all_in(&mut self, at: SimTime) {
        let set_up = self.setup.as_ref().and_then(setup::Setup::next_ready);
        let more_now = self.arriving.front().is_some_and(|(next, _)| *next <= at)
            || set_up.is_some_and(|next| next <= at);
        if self.step.is_none() && self.launch_at.is_none() && !more_now {
            self.start_step(at);
        }
    }

    /// Starts the step after one that ended at `at`: at once, or — with a launch window, when
    /// a request waits and a sequence slot is free for it — once the window has gathered what
    /// reaches the engine meanwhile.
    fn next_step(&mut self, at: SimTime) {
        let free = self.running.len() < self.config.max_num_seqs() as usize;
        match self.launch_window {
            Some(window) if free && !self.waiting.is_empty() => self.launch_at = Some(at + window),
            _ => self.start_step(at),
        }
    }

    /// The engine's configuration.
    pub fn config(&self) -> &BatchingConfig {
        &self.config
    }

    fn check(&self, request: &EngineRequest) -> Result<(), Rejection> {
        if request.prompt_tokens == 0 {
            return Err(Rejection::Invalid("the prompt is empty".into()));
        }
        if request.max_output_tokens == 0 {
            return Err(Rejection::Invalid("max_tokens must be at least 1".into()));
        }
        let limit = self.config.effective_max_model_len();
        let wanted = u64::from(request.prompt_tokens) + u64::from(request.max_output_tokens);
        if wanted > u64::from(limit) {
            return Err(Rejection::TooLong(format!(
                "This model's maximum context length is {limit} tokens. However, you requested \
                 {wanted} tokens ({} in the messages, {} in the completion). Please reduce the \
                 length of the messages or completion.",
                request.prompt_tokens, request.max_output_tokens
            )));
        }
        let needed = blocks_for(
            request.prompt_tokens + request.output_tokens(),
            self.block_size(),
        );
        if needed > self.pool.total() {
            return Err(Rejection::TooLong(format!(
                "the request needs {needed} KV blocks but the whole cache holds {}",
                self.pool.total()
            )));
        }
        let unslotted = self.setup.as_ref().map_or(0, setup::Setup::unslotted);
        let waiting = self.waiting.len() + self.arriving.len() + unslotted;
        if waiting >= self.config.max_waiting {
            return Err(Rejection::QueueFull {
                waiting,
                retry_after: Duration::from_secs(1),
            });
        }
        Ok(())
    }

    fn block_size(&self) -> u32 {
        self.config.block_size
    }

    /// Draft tokens to propose for a decode sequence this step.
    fn drafts_for(&self, seq: &Sequence) -> u32 {
        let k = self
            .speculative
            .as_ref()
            .map_or(0, AcceptanceSampler::num_draft_tokens);
        k.min(seq.target_output.saturating_sub(seq.generated + 1))
    }

    /// Builds the next batch and starts its step at `now`, if there is anything to run.
    fn start_step(&mut self, now: SimTime) {
        debug_assert!(self.step.is_none());
        let mut entries = Vec::new();
        let mut budget = self.token_budget;
        let preempted = self.schedule_running(now, &mut entries, &mut budget);
        if !preempted {
            self.admit_waiting(now, &mut entries, &mut budget);
        }
        if self.config.runs_prompts_alone() && entries.iter().any(|e| e.is_prefill) {
            entries.retain(|e| e.is_prefill); // the decodes keep their blocks for the next step
        }
        if entries.is_empty() {
            self.abort_unschedulable(now);
            return;
        }
        let duration = self.step_duration(&entries);
        let summary = StepSummary {
            started: now,
            duration,
            sequences: u32::try_from(entries.len()).unwrap_or(u32::MAX),
            batched_tokens: entries.iter().map(|e| e.new_tokens).sum(),
            prefill_tokens: entries
                .iter()
                .filter(|e| e.is_prefill)
                .map(|e| e.new_tokens)
                .sum(),
        };
        self.step = Some(ActiveStep {
            ends_at: now + duration,
            entries,
            summary,
        });
    }

    /// Tokens `entry` takes of the step's budget: none for a decode where prompts run in steps
    /// of their own — a prompt displaces it and has the whole budget (SGLang's `PrefillAdder`
    /// without mixed chunks, vLLM V0's `_schedule_prefills`).
    fn charged(&self, entry: &Scheduled) -> u32 {
        if self.config.runs_prompts_alone() && !entry.is_prefill {
            return 0;
        }
        entry.new_tokens
    }

    /// Schedules running sequences, decodes first. Returns whether anything was preempted.
    fn schedule_running(
        &mut self,
        now: SimTime,
        entries: &mut Vec<Scheduled>,
        budget: &mut u32,
    ) -> bool {
        let is_prefill = |seqs: &[Sequence], i: usize| seqs[i].is_prefill();
        let mut order: Vec<usize> = (0..self.running.len())
            .filter(|&i| !is_prefill(&self.running, i))
            .collect();
        order.extend((0..self.running.len()).filter(|&i| is_prefill(&self.running, i)));
        let mut preempted = false;
        for index in order {
            if index >= self.running.len() || *budget == 0 {
                continue;
            }
            let alone = !entries.last().is_some_and(|e| e.is_prefill); // prompts come last
            let Some(entry) = self.plan_running(index, *budget, alone) else {
                continue;
            };
            let seq = &self.running[index];
            let need = blocks_for(seq.computed + entry.new_tokens, self.block_size())
                .saturating_sub(u32::try_from(seq.blocks.len()).unwrap_or(u32::MAX));
            while self.pool.free() < need {
                let victim = self.running.len() - 1;
                self.preempt_last(now, entries, budget);
                preempted = true;
                if victim == index {
                    return true;
                }
            }
            if let Some(blocks) = self.pool.allocate(need) {
                self.running[index].blocks.extend(blocks);
                *budget = budget.saturating_sub(self.charged(&entry));
                entries.push(entry);
            }
        }
        preempted
    }

    /// What running sequence `index` would compute this step with `budget` tokens left:
    /// its next prompt chunk, or one decode token plus drafts. `None` when an unchunked
    /// prompt does not fit (one longer than the whole budget runs `alone`, as the step's only
    /// prompt).
    fn plan_running(&self, index: usize, budget: u32, alone: bool) -> Option<Scheduled> {
        let seq = &self.running[index];
        if seq.is_prefill() {
            let new = if self.config.chunked_prefill {
                seq.pending().min(budget)
            } else {
                seq.pending()
            };
            return (new <= budget || alone).then_some(Scheduled {
                id: seq.request.id,
                new_tokens: new,
                drafts: 0,
                context: seq.computed,
                is_prefill: true,
                samples: new == seq.pending(),
                slot: seq.slot,
            });
        }
        let drafts = self.drafts_for(seq).min(budget.saturating_sub(1));
        Some(Scheduled {
            id: seq.request.id,
            new_tokens: 1 + drafts,
            drafts,
            context: seq.computed,
            is_prefill: false,
            samples: true,
            slot: seq.slot,
        })
    }

    /// Preempts the newest running sequence: frees its KV and requeues it at the front.
    fn preempt_last(&mut self, now: SimTime, entries: &mut Vec<Scheduled>, budget: &mut u32) {
        let Some(mut seq) = self.running.pop() else {
            return;
        };
        if let Some(pos) = entries.iter().position(|e| e.id == seq.request.id) {
            let entry = entries.remove(pos);
            *budget += self.charged(&entry);
        }
        self.pool.release(&seq.blocks);
        self.release_slots(vec![seq.slot]);
        seq.blocks.clear();
        seq.registered_blocks = 0;
        seq.computed = 0;
        self.preemptions += 1;
        self.pending_events.push(EngineEvent::Preempted {
            id: seq.request.id,
            at: now,
        });
        self.waiting.push_front(seq);
    }

    /// Nothing could be scheduled although work is waiting: drop the head so the engine cannot
    /// stall forever (cannot happen with a validated configuration; a guard, not a policy).
    fn abort_unschedulable(&mut self, now: SimTime) {
        if !self.running.is_empty() {
            return;
        }
        if let Some(seq) = self.waiting.pop_front() {
            self.pending_events.push(EngineEvent::Aborted {
                id: seq.request.id,
                at: now,
                reason: "the request cannot be scheduled with this engine configuration".into(),
            });
        }
    }

    /// Applies a finished step: advances every sequence it carried and emits their tokens.
    fn complete_step(&mut self, step: ActiveStep) {
        let at = step.ends_at;
        let by_id: HashMap<RequestId, Scheduled> =
            step.entries.iter().map(|e| (e.id, *e)).collect();
        let mut finished = Vec::new();
        for index in 0..self.running.len() {
            let Some(entry) = by_id.get(&self.running[index].request.id) else {
                continue;
            };
            let accepted = match (&mut self.speculative, entry.drafts) {
                (Some(sampler), drafts) if drafts > 0 => sampler.verify(drafts),
                _ => 0,
            };
            let seq = &mut self.running[index];
            seq.computed += entry.new_tokens - entry.drafts + accepted;
            let produced = if seq.computed >= seq.total_tokens() {
                // Every known token is computed: the step sampled new ones.
                let produced = (1 + accepted).min(seq.target_output - seq.generated);
                seq.generated += produced;
                seq.computed = seq.computed.min(seq.total_tokens() - 1);
                produced
            } else {
                0
            };
            let done = seq.generated >= seq.target_output;
            if produced > 0 {
                let reason = done.then(|| seq.request.finish_reason());
                self.pending_events.push(EngineEvent::Tokens {
                    id: seq.request.id,
                    at,
                    count: produced,
                    finished: reason,
                });
            }
            self.register_prompt_blocks(index);
            if done {
                finished.push(index);
            }
        }
        let mut freed = Vec::with_capacity(finished.len());
        for index in finished.into_iter().rev() {
            let seq = self.running.remove(index);
            self.pool.release(&seq.blocks);
            freed.push(seq.slot);
        }
        self.release_slots(freed);
        self.take_slots(at);
        self.pending_events.push(EngineEvent::Step(step.summary));
    }

    /// Frees the slots of sequences that left the batch (with slots configured).
    fn release_slots(&mut self, freed: Vec<u32>) {
        if let Some(table) = &mut self.slots {
            table.release(freed);
        }
    }

    /// Publishes the hashes of prompt blocks that are now fully computed.
    fn register_prompt_blocks(&mut self, index: usize) {
        if !self.config.prefix_caching {
            return;
        }
        let block_size = self.block_size();
        let seq = &mut self.running[index];
        let full = (seq.computed.min(seq.request.prompt_tokens) / block_size) as usize;
        let limit = full
            .min(seq.request.block_hashes.len())
            .min(seq.blocks.len());
        while seq.registered_blocks < limit {
            let i = seq.registered_blocks;
            self.pool
                .register(seq.blocks[i], seq.request.block_hashes[i]);
            seq.registered_blocks += 1;
        }
    }
}

impl Engine for BatchingEngine {
    fn submit(&mut self, now: SimTime, request: EngineRequest) -> Result<(), Rejection> {
        self.check(&request)?;
        // Through the frontend; with none the request still waits for `advance` at `now`, so
        // requests submitted at the same instant start their step together.
        self.arriving
            .push_back((now + self.frontend, Sequence::new(request)));
        Ok(())
    }

    /// A decode replica's request: its prompt and first token computed, its KV transferred; it
    /// reaches the queue at once (the frontend was the prefill replica's) and is admitted
    /// with blocks for its whole context but computes only its next token.
    fn submit_prefilled(&mut self, now: SimTime, request: EngineRequest) -> Result<(), Rejection> {
        self.check(&request)?;
        if request.output_tokens() <= 1 {
            return Err(Rejection::Invalid("nothing left to decode".into()));
        }
        let mut seq = Sequence::new(request);
        seq.generated = 1;
        seq.prefilled = true;
        let at = self.arriving.partition_point(|(at, _)| *at <= now);
        self.arriving.insert(at, (now, seq));
        Ok(())
    }

    fn cancel(&mut self, now: SimTime, id: RequestId) {
        if self.setup.as_mut().is_some_and(|setup| setup.cancel(id)) {
            // Its slot (if it held one) goes to the next request waiting for one, below.
        } else if let Some(pos) = self.arriving.iter().position(|(_, s)| s.request.id == id) {
            self.arriving.remove(pos);
        } else if let Some(pos) = self.waiting.iter().position(|s| s.request.id == id) {
            if let Some(seq) = self.waiting.remove(pos) {
                self.pool.release(&seq.blocks);
            }
        } else if let Some(pos) = self.running.iter().position(|s| s.request.id == id) {
            let seq = self.running.remove(pos);
            self.pool.release(&seq.blocks);
            self.release_slots(vec![seq.slot]);
        }
        self.take_slots(now);
    }

    fn next_event_at(&self) -> Option<SimTime> {
        let step = self.step.as_ref().map(|step| step.ends_at);
        let arrival = self.arriving.front().map(|(at, _)| *at);
        let set_up = self.setup.as_ref().and_then(setup::Setup::next_ready);
        [step, arrival, self.launch_at, set_up]
            .into_iter()
            .flatten()
            .min()
    }

    fn advance(&mut self, now: SimTime, events: &mut Vec<EngineEvent>) {
        events.append(&mut self.pending_events);
        loop {
            let step_end = self.step.as_ref().map(|step| step.ends_at);
            let arrival = self.arriving.front().map(|(at, _)| *at);
            // A request through the frontend by the end of a step (or of the launch window
            // after it) joins that step's successor.
            let launch = self.launch_at;
            let joins = |at: &SimTime| {
                *at <= now && step_end.is_none_or(|e| *at <= e) && launch.is_none_or(|l| *at <= l)
            };
            let set_up = self.setup.as_ref().and_then(setup::Setup::next_ready);
            if let Some(at) = arrival.filter(joins) {
                self.admit_arrival(at);
            } else if let Some(at) = set_up.filter(joins) {
                self.end_setup(at);
            } else if let Some(step) = self.step.take_if(|step| step.ends_at <= now) {
                let ends_at = step.ends_at;
                self.complete_step(step);
                if !self.running.is_empty() || !self.waiting.is_empty() {
                    self.next_step(ends_at);
                }
            } else if let Some(at) = launch.filter(|at| *at <= now) {
                self.launch_at = None;
                self.start_step(at);
            } else {
                break;
            }
            events.append(&mut self.pending_events);
        }
    }

    fn stats(&self) -> EngineStats {
        let (holding, unslotted) = self
            .setup
            .as_ref()
            .map_or((0, 0), |s| (s.holding(), s.unslotted()));
        EngineStats {
            running: self.running.len() + holding,
            waiting: self.waiting.len() + self.arriving.len() + unslotted,
            kv_usage: self.pool.usage(),
            kv_blocks_total: u64::from(self.pool.total()),
            block_size: self.block_size(),
            preemptions_total: self.preemptions,
            prefix_queries_tokens: self.prefix_queries,
            prefix_hits_tokens: self.prefix_hits,
            speculative: self
                .speculative
                .as_ref()
                .map(|s| s.stats().clone())
                .unwrap_or_default(),
        }
    }
}
