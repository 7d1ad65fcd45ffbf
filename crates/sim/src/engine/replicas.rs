//! Several identical replicas behind one load balancer, as one [`Engine`]: each request goes to
//! one replica, chosen by the routing policy, and stays there; time, events and statistics are
//! the replicas' merged. Replicas share nothing (no KV cache, no queue), as separate servers.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::{
    Engine, EngineEvent, EngineRequest, EngineStats, Rejection, RequestId, SimTime,
    SpeculativeStats,
};

/// How the load balancer picks a replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Routing {
    /// Each request to the next replica in turn (a plain Kubernetes Service, nginx's default).
    #[default]
    RoundRobin,
    /// To the replica with the fewest requests in flight (ties: the lowest index).
    LeastLoaded,
    /// Requests whose prompts start with the same block to the same replica (prefix-aware
    /// routers: SGLang's router, llm-d); prompts shorter than one block go least-loaded.
    PrefixAffinity,
    /// The least loaded of two replicas drawn at random (Mitzenmacher's power of two
    /// choices; Envoy's `least_request` with its default `choice_count = 2`).
    PowerOfTwo,
    /// The replica that already holds the longest run of the prompt's leading blocks, as far as
    /// the router has sent them (llm-d's prefix-cache scorer, SGLang's cache-aware router);
    /// ties and prompts with no full block least-loaded.
    KvAware,
}

impl Routing {
    /// Every policy with its name.
    pub const ALL: [(&'static str, Routing); 5] = [
        ("round-robin", Routing::RoundRobin),
        ("least-loaded", Routing::LeastLoaded),
        ("prefix-affinity", Routing::PrefixAffinity),
        ("power-of-two", Routing::PowerOfTwo),
        ("kv-aware", Routing::KvAware),
    ];

    /// The policy named `name`.
    pub fn from_name(name: &str) -> Option<Routing> {
        Self::ALL
            .iter()
            .find(|(n, _)| *n == name.trim())
            .map(|(_, routing)| *routing)
    }

    /// The policy's name.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, routing)| *routing == self)
            .map_or("round-robin", |(name, _)| name)
    }
}

/// Replicas behind a load balancer.
#[derive(Debug)]
pub struct Replicated {
    replicas: Vec<Box<dyn Engine>>,
    routing: Routing,
    /// The replica serving each request in flight.
    owner: HashMap<RequestId, usize>,
    /// Requests in flight per replica.
    in_flight: Vec<usize>,
    /// The next replica in round-robin order; the draw counter of power-of-two choices.
    turn: usize,
    /// The prompt blocks the router has sent to each replica (`kv-aware`).
    sent_blocks: Vec<HashSet<u64>>,
}

/// Most block hashes the `kv-aware` router remembers per replica before it forgets them all
/// (a replica's cache turns over; the router's view is approximate, as llm-d's is).
const REMEMBERED_BLOCKS: usize = 1 << 20;

/// SplitMix64: the power-of-two draws, a function of the request and the draw counter.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl Replicated {
    /// `replicas` (at least one) behind a balancer routing by `routing`.
    pub fn new(replicas: Vec<Box<dyn Engine>>, routing: Routing) -> Replicated {
        let count = replicas.len();
        Replicated {
            replicas,
            routing,
            owner: HashMap::new(),
            in_flight: vec![0; count],
            turn: 0,
            sent_blocks: vec![HashSet::new(); count],
        }
    }

    /// The replicas, in index order.
    pub fn replicas(&self) -> &[Box<dyn Engine>] {
        &self.replicas
    }

    /// The replica serving request `id`, while it is in flight.
    pub fn replica_of(&self, id: RequestId) -> Option<usize> {
        self.owner.get(&id).copied()
    }

    /// The less loaded of two distinct replicas drawn from the request and the draw counter.
    fn power_of_two(&mut self, request: &EngineRequest) -> usize {
        let count = self.replicas.len().max(1) as u64;
        self.turn = self.turn.wrapping_add(1);
        let draw = mix(request.id ^ mix(self.turn as u64));
        let first = (draw % count) as usize;
        let second = if count < 2 {
            first
        } else {
            ((first as u64 + 1 + (draw >> 32) % (count - 1)) % count) as usize
        };
        if self.in_flight[second] < self.in_flight[first] {
            second
        } else {
            first
        }
    }

    /// The replica holding the longest run of the prompt's leading blocks (ties: fewer in
    /// flight, then the lowest index); the prompt's blocks are remembered there.
    fn kv_aware(&mut self, request: &EngineRequest) -> usize {
        let held = |seen: &HashSet<u64>| {
            request
                .block_hashes
                .iter()
                .take_while(|hash| seen.contains(hash))
                .count()
        };
        let chosen = (0..self.replicas.len())
            .min_by_key(|i| {
                (
                    std::cmp::Reverse(held(&self.sent_blocks[*i])),
                    self.in_flight[*i],
                )
            })
            .unwrap_or(0);
        let seen = &mut self.sent_blocks[chosen];
        if seen.len() + request.block_hashes.len() > REMEMBERED_BLOCKS {
            seen.clear();
        }
        seen.extend(request.block_hashes.iter().copied());
        chosen
    }

    fn least_loaded(&self) -> usize {
        (0..self.in_flight.len())
            .min_by_key(|i| self.in_flight[*i])
            .unwrap_or(0)
    }

    fn route(&mut self, request: &EngineRequest) -> usize {
        let count = self.replicas.len().max(1);
        match (self.routing, request.block_hashes.first()) {
            (Routing::RoundRobin, _) => {
                let chosen = self.turn % count;
                self.turn = (chosen + 1) % count;
                chosen
            }
            (Routing::PrefixAffinity, Some(hash)) => (hash % count as u64) as usize,
            (Routing::PowerOfTwo, _) => self.power_of_two(request),
            (Routing::KvAware, _) => self.kv_aware(request),
            (Routing::LeastLoaded | Routing::PrefixAffinity, _) => self.least_loaded(),
        }
    }

    fn release(&mut self, id: RequestId) {
        if let Some(replica) = self.owner.remove(&id) {
            self.in_flight[replica] = self.in_flight[replica].saturating_sub(1);
        }
    }
}

/// When an event happened (a step: when it ended).
pub(crate) fn event_time(event: &EngineEvent) -> SimTime {
    match event {
        EngineEvent::Scheduled { at, .. }
        | EngineEvent::Tokens { at, .. }
        | EngineEvent::Preempted { at, .. }
        | EngineEvent::Aborted { at, .. } => *at,
        EngineEvent::Step(step) => step.started + step.duration,
    }
}

impl Engine for Replicated {
    fn submit(&mut self, now: SimTime, request: EngineRequest) -> Result<(), Rejection> {
        let replica = self.route(&request);
        let id = request.id;
        self.replicas[replica].submit(now, request)?;
        self.owner.insert(id, replica);
        self.in_flight[replica] += 1;
        Ok(())
    }

    fn submit_prefilled(&mut self, now: SimTime, request: EngineRequest) -> Result<(), Rejection> {
        let replica = self.route(&request);
        let id = request.id;
        self.replicas[replica].submit_prefilled(now, request)?;
        self.owner.insert(id, replica);
        self.in_flight[replica] += 1;
        Ok(())
    }

    fn cancel(&mut self, now: SimTime, id: RequestId) {
        if let Some(&replica) = self.owner.get(&id) {
            self.replicas[replica].cancel(now, id);
        }
        self.release(id);
    }

    fn next_event_at(&self) -> Option<SimTime> {
        self.replicas.iter().filter_map(|r| r.next_event_at()).min()
    }

    fn advance(&mut self, now: SimTime, events: &mut Vec<EngineEvent>) {
        let start = events.len();
        for replica in &mut self.replicas {
            replica.advance(now, events);
        }
        events[start..].sort_by_key(event_time);
        let ended: Vec<RequestId> = events[start..]
            .iter()
            .filter_map(|event| match event {
                EngineEvent::Tokens {
                    id,
                    finished: Some(_),
                    ..
                }
                | EngineEvent::Aborted { id, .. } => Some(*id),
                _ => None,
            })
            .collect();
        for id in ended {
            self.release(id);
        }
    }

    fn stats(&self) -> EngineStats {
        let all: Vec<EngineStats> = self.replicas.iter().map(|r| r.stats()).collect();
        merged_stats(&all)
    }

    fn replica_stats(&self) -> Vec<EngineStats> {
        self.replicas.iter().map(|r| r.stats()).collect()
    }

    fn replica_serving(&self, id: RequestId) -> Option<usize> {
        self.replica_of(id)
    }
}

/// Several engines' statistics as one: counts summed, KV usage weighted by pool size.
pub(crate) fn merged_stats(all: &[EngineStats]) -> EngineStats {
    let blocks: u64 = all.iter().map(|s| s.kv_blocks_total).sum();
    let used: f64 = all
        .iter()
        .map(|s| s.kv_usage * s.kv_blocks_total as f64)
        .sum();
    EngineStats {
        running: all.iter().map(|s| s.running).sum(),
        waiting: all.iter().map(|s| s.waiting).sum(),
        kv_usage: if blocks == 0 {
            0.0
        } else {
            used / blocks as f64
        },
        kv_blocks_total: blocks,
        block_size: all.first().map_or(0, |s| s.block_size),
        preemptions_total: all.iter().map(|s| s.preemptions_total).sum(),
        prefix_queries_tokens: all.iter().map(|s| s.prefix_queries_tokens).sum(),
        prefix_hits_tokens: all.iter().map(|s| s.prefix_hits_tokens).sum(),
        speculative: merged_speculative(all.iter().map(|s| &s.speculative)),
    }
}

fn merged_speculative<'a>(all: impl Iterator<Item = &'a SpeculativeStats>) -> SpeculativeStats {
    let mut merged = SpeculativeStats::default();
    for stats in all {
        merged.drafts += stats.drafts;
        merged.draft_tokens += stats.draft_tokens;
        merged.accepted_tokens += stats.accepted_tokens;
        let positions = &mut merged.accepted_per_position;
        if positions.len() < stats.accepted_per_position.len() {
            positions.resize(stats.accepted_per_position.len(), 0);
        }
        for (total, count) in positions.iter_mut().zip(&stats.accepted_per_position) {
            *total += count;
        }
    }
    merged
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::FixedTimingConfig;
    use crate::engine::fixed::FixedTimingEngine;
    use crate::virtual_time::Simulation;

    fn fixed(slots: u32) -> Box<dyn Engine> {
        Box::new(FixedTimingEngine::new(FixedTimingConfig {
            ttft: Duration::from_millis(100),
            itl: Duration::from_millis(10),
            slots,
            ..FixedTimingConfig::default()
        }))
    }

    fn request(id: u64, first_block: Option<u64>) -> EngineRequest {
        EngineRequest {
            id,
            prompt_tokens: 32,
            block_hashes: first_block.into_iter().collect(),
            max_output_tokens: 11,
            stop_after_tokens: 11,
        }
    }

    /// Two one-slot replicas serve two simultaneous requests at once; one replica queues.
    #[test]
    fn replicas_serve_in_parallel() {
        let arrivals = (0..2).map(|id| (Duration::ZERO, request(id, None)));
        let two = Replicated::new(vec![fixed(1), fixed(1)], Routing::RoundRobin);
        let sim = Simulation::run_open_loop(Box::new(two), arrivals.clone());
        let ends: Vec<_> = sim.timelines().iter().map(|t| t.e2e().unwrap()).collect();
        assert_eq!(ends, [Duration::from_millis(200); 2]);
        let one = Simulation::run_open_loop(fixed(1), arrivals);
        assert_eq!(one.timelines()[1].e2e(), Some(Duration::from_millis(400)));
    }

    #[test]
    fn routing_policies_pick_as_documented() {
        let mut balancer = Replicated::new(vec![fixed(4), fixed(4), fixed(4)], Routing::RoundRobin);
        let picks: Vec<usize> = (0..4)
            .map(|id| balancer.route(&request(id, None)))
            .collect();
        assert_eq!(picks, [0, 1, 2, 0]);

        let mut balancer = Replicated::new(vec![fixed(4), fixed(4)], Routing::LeastLoaded);
        balancer.submit(Duration::ZERO, request(0, None)).unwrap();
        assert_eq!(balancer.route(&request(1, None)), 1);
        balancer.submit(Duration::ZERO, request(1, None)).unwrap();
        balancer.submit(Duration::ZERO, request(2, None)).unwrap();
        assert_eq!(balancer.in_flight, [2, 1]);

        let mut balancer = Replicated::new(vec![fixed(4), fixed(4)], Routing::PrefixAffinity);
        let same: Vec<usize> = (0..5)
            .map(|id| balancer.route(&request(id, Some(0xabc))))
            .collect();
        assert!(same.iter().all(|r| *r == same[0]), "{same:?}");
    }

    /// Power of two choices takes the less loaded of its two draws: with one replica
    /// loaded and two idle, no pick lands on the loaded one unless both draws are it (two
    /// distinct replicas are drawn, so never).
    #[test]
    fn power_of_two_never_picks_the_more_loaded_of_its_draws() {
        let mut balancer = Replicated::new(vec![fixed(4), fixed(4), fixed(4)], Routing::PowerOfTwo);
        balancer.in_flight = vec![5, 0, 0];
        let picks: Vec<usize> = (0..50)
            .map(|id| balancer.route(&request(id, None)))
            .collect();
        assert!(picks.iter().all(|r| *r != 0), "{picks:?}");
        assert!(picks.contains(&1) && picks.contains(&2), "{picks:?}");
    }

    /// The KV-aware router follows a prompt's leading blocks to where it sent them, even when
    /// that replica is busier; new prefixes go least-loaded.
    #[test]
    fn kv_aware_follows_the_prefix_it_sent() {
        let mut balancer = Replicated::new(vec![fixed(4), fixed(4)], Routing::KvAware);
        let with = |id: u64, blocks: &[u64]| EngineRequest {
            block_hashes: blocks.to_vec(),
            ..request(id, None)
        };
        let first = balancer.route(&with(0, &[1, 2, 3]));
        balancer.in_flight[first] = 3;
        assert_eq!(balancer.route(&with(1, &[1, 2, 9])), first);
        assert_eq!(balancer.route(&with(2, &[7, 8])), 1 - first);
        assert_eq!(balancer.route(&with(3, &[])), 1 - first);
    }

    #[test]
    fn finished_requests_leave_the_count() {
        let balancer = Replicated::new(vec![fixed(1), fixed(1)], Routing::LeastLoaded);
        let arrivals = (0..6).map(|id| (Duration::from_millis(id * 50), request(id, None)));
        let sim = Simulation::run_open_loop(Box::new(balancer), arrivals);
        assert!(sim.timelines().iter().all(|t| t.finished.is_some()));
        assert_eq!(sim.engine().stats().running, 0);
    }
}
