//! llama.cpp's slots with a KV stream each: which slot a request takes (the free one released
//! longest ago) and how a step splits into micro-batches (its `split_equal`: each a run of
//! consecutive slots giving the same number of tokens, decodes first, then prompts).

use std::time::Duration;

use super::{BatchingEngine, Scheduled};
use crate::config::SlotPromptSimilarity;
use crate::engine::cost::BatchEntry;

/// Which slots are busy and when each was last released.
#[derive(Debug, Clone, Default)]
pub(super) struct SlotTable {
    /// Per slot: busy, and the release count when it was last released (0: never used).
    slots: Vec<(bool, u64)>,
    releases: u64,
    similarity: Option<SlotPromptSimilarity>,
}

impl SlotTable {
    /// `count` slots, none used yet, picked by `similarity` first when set.
    pub(super) fn new(count: u32, similarity: Option<SlotPromptSimilarity>) -> Self {
        SlotTable {
            slots: vec![(false, 0); count as usize],
            releases: 0,
            similarity,
        }
    }

    /// Takes a slot for a prompt of `prompt_tokens`: by similarity the lowest free slot that
    /// has held a prompt (see [`SlotPromptSimilarity`]), else the free slot released longest
    /// ago; among slots never used, the highest.
    pub(super) fn take(&mut self, prompt_tokens: u32) -> u32 {
        let similar = self
            .similarity
            .filter(|s| s.applies(prompt_tokens))
            .and_then(|_| self.slots.iter().position(|(busy, at)| !busy && *at > 0));
        let index = similar.or_else(|| self.oldest_free()).unwrap_or(0);
        if let Some(slot) = self.slots.get_mut(index) {
            slot.0 = true;
        }
        u32::try_from(index).unwrap_or(u32::MAX)
    }

    /// The free slot released longest ago; among slots never used, the highest.
    fn oldest_free(&self) -> Option<usize> {
        let mut best: Option<usize> = None;
        for (index, (busy, released)) in self.slots.iter().enumerate() {
            if !busy && best.is_none_or(|b| *released <= self.slots[b].1) {
                best = Some(index);
            }
        }
        best
    }

    /// Frees `slots`, in ascending order (as a step's slots finish one after the other).
    pub(super) fn release(&mut self, mut slots: Vec<u32>) {
        slots.sort_unstable();
        for slot in slots {
            if let Some(entry) = self.slots.get_mut(slot as usize) {
                self.releases += 1;
                *entry = (false, self.releases);
            }
        }
    }
}

/// The micro-batches a step of `entries` runs as, at most `cap` tokens each.
pub(super) fn micro_batches(entries: &[Scheduled], cap: u32) -> Vec<Vec<BatchEntry>> {
    let mut order: Vec<usize> = (0..entries.len()).collect();
    order.sort_by_key(|&i| (entries[i].is_prefill, entries[i].slot));
    let mut left: Vec<u32> = entries.iter().map(|e| e.new_tokens).collect();
    let mut done = vec![0u32; entries.len()];
    let mut batches = Vec::new();
    loop {
        let mut members = Vec::new();
        let mut last: Option<u32> = None;
        for &i in &order {
            if left[i] > 0 && last.is_none_or(|l| entries[i].slot == l + 1) {
                members.push(i);
                last = Some(entries[i].slot);
            }
        }
        let Some(fewest) = members.iter().map(|&i| left[i]).min() else {
            return batches;
        };
        let share = cap / u32::try_from(members.len()).unwrap_or(u32::MAX);
        let take = fewest.min(share.max(1));
        let batch = members
            .iter()
            .map(|&i| {
                let entry = &entries[i];
                let piece = BatchEntry {
                    new_tokens: take,
                    context: entry.context + done[i],
                    is_prefill: entry.is_prefill,
                    samples: entry.samples && left[i] == take,
                };
                left[i] -= take;
                done[i] += take;
                piece
            })
            .collect();
        batches.push(batch);
    }
}

impl BatchingEngine {
    /// How long a step of `entries` takes: one batch, or the sum of its micro-batches by slot.
    pub(super) fn step_duration(&self, entries: &[Scheduled]) -> Duration {
        let drafting = entries.iter().any(|e| e.drafts > 0);
        if let Some(cap) = self.config.slot_ubatch_tokens {
            return micro_batches(entries, cap)
                .iter()
                .map(|micro| self.cost.cost(micro, drafting).duration())
                .sum();
        }
        let batch: Vec<BatchEntry> = entries
            .iter()
            .map(|e| BatchEntry {
                new_tokens: e.new_tokens,
                context: e.context,
                is_prefill: e.is_prefill,
                samples: e.samples,
            })
            .collect();
        self.cost.cost(&batch, drafting).duration()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(slot: u32, context: u32) -> Scheduled {
        Scheduled {
            id: u64::from(slot),
            new_tokens: 1,
            drafts: 0,
            context,
            is_prefill: false,
            samples: true,
            slot,
        }
    }

    fn prompt(slot: u32, tokens: u32) -> Scheduled {
        Scheduled {
            new_tokens: tokens,
            context: 0,
            is_prefill: true,
            ..decode(slot, 0)
        }
    }

    /// (tokens, context, samples) of each member of each micro-batch.
    fn shape(entries: &[Scheduled], cap: u32) -> Vec<Vec<(u32, u32, bool)>> {
        micro_batches(entries, cap)
            .iter()
            .map(|b| {
                b.iter()
                    .map(|e| (e.new_tokens, e.context, e.samples))
                    .collect()
            })
            .collect()
    }

    #[test]
    fn decodes_in_consecutive_slots_share_a_micro_batch_and_a_gap_splits_them() {
        assert_eq!(shape(&[decode(0, 9), decode(1, 9)], 512).len(), 1);
        assert_eq!(shape(&[decode(2, 9), decode(0, 9)], 512).len(), 2);
        // Slots 1 and 3 decoding, slot 2 starting a prompt: {1, 2} one token each, then
        // {3}, then the rest of the prompt alone, which samples only at its end.
        assert_eq!(
            shape(&[decode(3, 40), prompt(2, 290), decode(1, 50)], 512),
            vec![
                vec![(1, 50, true), (1, 0, false)],
                vec![(1, 40, true)],
                vec![(289, 1, true)],
            ]
        );
    }

    #[test]
    fn prompts_together_go_in_equal_shares_of_the_micro_batch() {
        let four: Vec<Scheduled> = (0..4).map(|slot| prompt(slot, 290)).collect();
        let batches = shape(&four, 512);
        let sizes: Vec<(usize, u32)> = batches.iter().map(|b| (b.len(), b[0].0)).collect();
        assert_eq!(sizes, vec![(4, 128), (4, 128), (4, 34)]);
        assert!(batches[2].iter().all(|e| e.1 == 256 && e.2));
        assert!(batches[..2].iter().flatten().all(|e| !e.2));
    }

    #[test]
    fn a_request_takes_the_slot_released_longest_ago_and_never_used_slots_highest_first() {
        let mut table = SlotTable::new(4, None);
        let first: Vec<u32> = (0..3).map(|_| table.take(90)).collect();
        assert_eq!(first, vec![3, 2, 1]);
        table.release(vec![3, 1, 2]);
        let second: Vec<u32> = (0..3).map(|_| table.take(90)).collect();
        assert_eq!(second, vec![0, 1, 2]);
        table.release(vec![0, 1, 2]);
        let third: Vec<u32> = (0..3).map(|_| table.take(90)).collect();
        assert_eq!(third, vec![3, 0, 1]);
    }

    #[test]
    fn a_prompt_sharing_enough_takes_the_lowest_used_free_slot_and_a_longer_one_goes_by_age() {
        // 10 shared tokens: above 10 % of a 90-token prompt, below 10 % of a 290-token one.
        let similarity = SlotPromptSimilarity {
            threshold: 0.1,
            shared_prefix_tokens: 10,
        };
        let mut table = SlotTable::new(4, Some(similarity));
        // Nothing used yet: by age (never used, highest first), as llama.cpp skips empty slots.
        let first: Vec<u32> = (0..3).map(|_| table.take(90)).collect();
        assert_eq!(first, vec![3, 2, 1]);
        // Slot 2 released: a short prompt returns to it, not to never-used slot 0.
        table.release(vec![2]);
        assert_eq!(table.take(90), 2);
        // Slots 3 and 1 released: the lowest used one first, then the other.
        table.release(vec![3, 1]);
        assert_eq!((table.take(90), table.take(90)), (1, 3));
        // A long prompt shares too little: by age, never-used slot 0.
        table.release(vec![1]);
        assert_eq!(table.take(290), 0);
    }
}
