//! Paged KV cache: a fixed pool of blocks with reference counts and a prefix cache keyed by
//! chained block hashes. Freed blocks that carry a hash stay reusable until the allocator
//! evicts them, least recently freed first (vLLM's free-block queue). Blocks never used yet
//! come first in that queue, in index order, and cost nothing until they are: building a pool of
//! millions of blocks (an accelerator's whole memory) is free.

use std::collections::{BTreeMap, HashMap};

/// Index of one block in the pool.
pub type BlockId = u32;

#[derive(Debug, Clone, Default)]
struct Block {
    ref_count: u32,
    hash: Option<u64>,
    /// Position in the free queue while free.
    free_stamp: Option<u64>,
}

/// The pool of KV blocks.
#[derive(Debug, Clone)]
pub struct BlockPool {
    /// The blocks used at least once, by index; the rest (up to `total`) were never used.
    blocks: Vec<Block>,
    total: u32,
    /// Freed blocks in eviction order (oldest stamp first), after every never-used block.
    free_queue: BTreeMap<u64, BlockId>,
    next_stamp: u64,
    cached: HashMap<u64, BlockId>,
}

impl BlockPool {
    /// A pool of `total` empty blocks.
    pub fn new(total: u32) -> Self {
        BlockPool {
            blocks: Vec::new(),
            total,
            free_queue: BTreeMap::new(),
            next_stamp: 0,
            cached: HashMap::new(),
        }
    }

    /// Blocks in the pool.
    pub fn total(&self) -> u32 {
        self.total
    }

    /// Blocks never used yet.
    fn unused(&self) -> u32 {
        let used = u32::try_from(self.blocks.len()).unwrap_or(u32::MAX);
        self.total.saturating_sub(used)
    }

    /// Blocks not referenced by any sequence (including cached-but-free ones).
    pub fn free(&self) -> u32 {
        let freed = u32::try_from(self.free_queue.len()).unwrap_or(u32::MAX);
        freed.saturating_add(self.unused())
    }

    /// Fraction of blocks referenced by at least one sequence.
    pub fn usage(&self) -> f64 {
        if self.total == 0 {
            return 0.0;
        }
        f64::from(self.total() - self.free()) / f64::from(self.total())
    }

    /// How many leading hashes are in the cache (the reusable prefix, in blocks).
    pub fn cached_prefix_len(&self, hashes: &[u64]) -> usize {
        hashes
            .iter()
            .take_while(|hash| self.cached.contains_key(hash))
            .count()
    }

    /// Takes a reference on the cached blocks of the first `count` hashes.
    /// Callers must pass `count <= cached_prefix_len(hashes)`.
    pub fn acquire_cached(&mut self, hashes: &[u64], count: usize) -> Vec<BlockId> {
        let mut acquired = Vec::with_capacity(count);
        for hash in &hashes[..count] {
            let Some(&id) = self.cached.get(hash) else {
                break;
            };
            let block = &mut self.blocks[id as usize];
            if let Some(stamp) = block.free_stamp.take() {
                self.free_queue.remove(&stamp);
            }
            block.ref_count += 1;
            acquired.push(id);
        }
        acquired
    }

    /// Allocates `count` fresh blocks, evicting the oldest cached ones; `None` if too few are
    /// free (nothing is allocated then).
    pub fn allocate(&mut self, count: u32) -> Option<Vec<BlockId>> {
        if count > self.free() {
            return None;
        }
        let mut allocated = Vec::with_capacity(count as usize);
        for _ in 0..count {
            let id = if self.unused() > 0 {
                let id = u32::try_from(self.blocks.len()).ok()?;
                self.blocks.push(Block::default());
                id
            } else {
                self.free_queue.pop_first()?.1
            };
            let block = &mut self.blocks[id as usize];
            block.free_stamp = None;
            block.ref_count = 1;
            if let Some(hash) = block.hash.take()
                && self.cached.get(&hash) == Some(&id)
            {
                self.cached.remove(&hash);
            }
            allocated.push(id);
        }
        Some(allocated)
    }

    /// Drops one reference on each block; unreferenced blocks become free (and stay cached).
    /// Blocks are released in reverse so a sequence's tail is evicted before its prefix.
    pub fn release(&mut self, ids: &[BlockId]) {
        for &id in ids.iter().rev() {
            let block = &mut self.blocks[id as usize];
            block.ref_count = block.ref_count.saturating_sub(1);
            if block.ref_count == 0 {
                self.push_free(id);
            }
        }
    }

    /// Records that `id` holds the full block whose chained hash is `hash`.
    pub fn register(&mut self, id: BlockId, hash: u64) {
        if self.cached.contains_key(&hash) {
            return;
        }
        self.blocks[id as usize].hash = Some(hash);
        self.cached.insert(hash, id);
    }

    fn push_free(&mut self, id: BlockId) {
        let stamp = self.next_stamp;
        self.next_stamp += 1;
        self.blocks[id as usize].free_stamp = Some(stamp);
        self.free_queue.insert(stamp, id);
    }
}

/// Blocks needed to hold `tokens` tokens.
pub fn blocks_for(tokens: u32, block_size: u32) -> u32 {
    tokens.div_ceil(block_size.max(1))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn allocation_fails_without_side_effects_when_short() {
        let mut pool = BlockPool::new(4);
        let held = pool.allocate(3).unwrap();
        assert!(pool.allocate(2).is_none());
        assert_eq!(pool.free(), 1);
        pool.release(&held);
        assert_eq!(pool.free(), 4);
        assert_eq!(pool.usage(), 0.0);
    }

    #[test]
    fn freed_blocks_stay_cached_until_evicted() {
        let mut pool = BlockPool::new(4);
        let ids = pool.allocate(2).unwrap();
        pool.register(ids[0], 11);
        pool.register(ids[1], 22);
        pool.release(&ids);
        assert_eq!(pool.cached_prefix_len(&[11, 22, 33]), 2);
        let reused = pool.acquire_cached(&[11, 22], 2);
        assert_eq!(reused, ids);
        assert_eq!(pool.free(), 2);
        pool.release(&reused);
        // Allocating all four evicts the cached blocks.
        let all = pool.allocate(4).unwrap();
        assert_eq!(all.len(), 4);
        assert_eq!(pool.cached_prefix_len(&[11]), 0);
    }

    #[test]
    fn shared_blocks_are_counted_once() {
        let mut pool = BlockPool::new(2);
        let ids = pool.allocate(1).unwrap();
        pool.register(ids[0], 5);
        let shared = pool.acquire_cached(&[5], 1);
        assert_eq!(shared, ids);
        assert_eq!(pool.free(), 1);
        pool.release(&ids);
        assert_eq!(pool.free(), 1, "still referenced once");
        pool.release(&shared);
        assert_eq!(pool.free(), 2);
    }

    #[test]
    fn never_used_blocks_are_taken_first_in_order_then_the_oldest_freed() {
        let mut pool = BlockPool::new(u32::MAX);
        assert_eq!(pool.free(), u32::MAX, "a pool of any size is built at once");
        let first = pool.allocate(3).unwrap();
        assert_eq!(first, vec![0, 1, 2]);
        pool.release(&first[1..2]);
        assert_eq!(pool.free(), u32::MAX - 2);
        let mut small = BlockPool::new(3);
        let held = small.allocate(3).unwrap();
        small.release(&[held[2]]);
        small.release(&[held[0]]);
        assert_eq!(
            small.allocate(2),
            Some(vec![2, 0]),
            "least recently freed first"
        );
        assert_eq!(small.usage(), 1.0);
    }

    #[test]
    fn blocks_for_rounds_up() {
        assert_eq!(blocks_for(0, 16), 0);
        assert_eq!(blocks_for(16, 16), 1);
        assert_eq!(blocks_for(17, 16), 2);
    }
}
