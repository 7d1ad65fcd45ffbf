//! Admission of waiting requests: in queue order under the token budget, `max_num_seqs`, the block
//! watermark and the blocks the engine policy reserves for each answer.

use super::{BatchingEngine, Scheduled, Sequence};
use crate::engine::kv::{BlockId, blocks_for};
use crate::engine::{EngineEvent, SimTime};

/// How a waiting sequence would be admitted.
#[derive(Debug, Clone, Copy)]
pub(super) struct Admission {
    reusable_blocks: usize,
    cached_tokens: u32,
    new_tokens: u32,
    new_blocks: u32,
}

impl BatchingEngine {
    /// Admits waiting requests in queue order (the head first) while budget, sequence slots and blocks allow.
    pub(super) fn admit_waiting(
        &mut self,
        now: SimTime,
        entries: &mut Vec<Scheduled>,
        budget: &mut u32,
    ) {
        let max_seqs = self.config.max_num_seqs() as usize;
        let mut outstanding = self.outstanding_reservations();
        while *budget > 0 && self.running.len() < max_seqs {
            let Some(admission) = self.waiting.front().and_then(|seq| {
                let alone = !entries.last().is_some_and(|e| e.is_prefill); // prompts come last
                self.plan_admission(seq, *budget, outstanding, alone)
            }) else {
                break;
            };
            let Some(mut seq) = self.waiting.pop_front() else {
                break;
            };
            let Some(blocks) = self.acquire_blocks(&seq, &admission) else {
                self.waiting.push_front(seq);
                break;
            };
            let cached = admission.cached_tokens;
            let prefilled = std::mem::take(&mut seq.prefilled);
            if !prefilled {
                self.prefix_queries += u64::from(seq.request.prompt_tokens);
                self.prefix_hits += u64::from(cached.min(seq.request.prompt_tokens));
            }
            seq.blocks = blocks;
            if let Some(table) = &mut self.slots {
                seq.slot = table.take(seq.request.prompt_tokens);
            }
            seq.registered_blocks = admission.reusable_blocks;
            seq.computed = cached;
            if !seq.admitted_once {
                seq.admitted_once = true;
                self.pending_events.push(EngineEvent::Scheduled {
                    id: seq.request.id,
                    at: now,
                    cached_tokens: cached.min(seq.request.prompt_tokens),
                });
            }
            let new_tokens = admission.new_tokens;
            outstanding += self
                .reservation(&seq)
                .saturating_sub(block_count(&seq.blocks));
            entries.push(Scheduled {
                id: seq.request.id,
                new_tokens,
                drafts: 0,
                context: cached,
                is_prefill: !prefilled,
                samples: new_tokens == seq.pending(),
                slot: seq.slot,
            });
            *budget = budget.saturating_sub(new_tokens);
            self.running.push(seq);
        }
    }

    /// The blocks `seq` is admitted with: its reusable prefix and fresh ones (none taken
    /// when the fresh ones are not there).
    fn acquire_blocks(&mut self, seq: &Sequence, admission: &Admission) -> Option<Vec<BlockId>> {
        let mut blocks = self
            .pool
            .acquire_cached(&seq.request.block_hashes, admission.reusable_blocks);
        match self.pool.allocate(admission.new_blocks) {
            Some(fresh) => {
                blocks.extend(fresh);
                Some(blocks)
            }
            None => {
                self.pool.release(&blocks);
                None
            }
        }
    }

    /// Blocks reserved for running sequences' answers but not yet allocated.
    fn outstanding_reservations(&self) -> u32 {
        self.running
            .iter()
            .map(|seq| {
                self.reservation(seq)
                    .saturating_sub(block_count(&seq.blocks))
            })
            .sum()
    }

    /// Blocks the policy reserves for `seq`: its tokens so far plus the policy's share of the
    /// rest of its `max_tokens` answer (0 when the policy allocates on demand).
    fn reservation(&self, seq: &Sequence) -> u32 {
        let fraction = self.config.policy.reserved_output_fraction();
        if fraction <= 0.0 {
            return 0;
        }
        let rest = seq.request.max_output_tokens.saturating_sub(seq.generated);
        let reserved = (f64::from(rest) * fraction).ceil() as u32;
        blocks_for(seq.total_tokens() + reserved, self.block_size())
    }

    /// Whether `seq` can be admitted with `budget` tokens left: its reusable prefix, first
    /// chunk (an unchunked prompt longer than the budget only `alone`) and the blocks it needs (and those the policy reserves for its answer, on top of
    /// the `outstanding` reservations of running sequences), keeping the watermark free.
    fn plan_admission(
        &self,
        seq: &Sequence,
        budget: u32,
        outstanding: u32,
        alone: bool,
    ) -> Option<Admission> {
        let total = seq.total_tokens();
        let reusable_blocks = if seq.prefilled {
            0
        } else if self.config.prefix_caching {
            let limit = ((total - 1) / self.block_size()) as usize;
            self.pool
                .cached_prefix_len(&seq.request.block_hashes)
                .min(limit)
        } else {
            0
        };
        let reusable = u32::try_from(reusable_blocks).unwrap_or(u32::MAX);
        let cached_tokens = if seq.prefilled {
            seq.request.prompt_tokens
        } else {
            reusable * self.block_size()
        };
        let pending = total - cached_tokens;
        let new_tokens = if self.config.chunked_prefill {
            pending.min(budget)
        } else {
            pending
        };
        if new_tokens > budget && !alone {
            return None;
        }
        let new_blocks =
            blocks_for(cached_tokens + new_tokens, self.block_size()).saturating_sub(reusable);
        let reserved = self.reservation(seq).saturating_sub(new_blocks + reusable);
        let needed = new_blocks + reusable + self.watermark_blocks + outstanding + reserved;
        (self.pool.free() >= needed).then_some(Admission {
            reusable_blocks,
            cached_tokens,
            new_tokens,
            new_blocks,
        })
    }
}

fn block_count(blocks: &[BlockId]) -> u32 {
    u32::try_from(blocks.len()).unwrap_or(u32::MAX)
}
