//! Several identical replicas behind one load balancer, as one [`Engine`]: each request goes to
//! one replica, chosen by the routing policy, and stays there; time, events and statistics are
//! the replicas' merged. Replicas share nothing (no KV cache, no queue), as separate servers.

use std::collections::HashMap;

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
}

impl Routing {
    /// Every policy with its name.
    pub const ALL: [(&'static str, Routing); 3] = [
        ("round-robin", Routing::RoundRobin),
        ("least-loaded", Routing::LeastLoaded),
        ("prefix-affinity", Routing::PrefixAffinity),
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
    /// The next replica in round-robin order.
    turn: usize,
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
        }
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
fn event_time(event: &EngineEvent) -> SimTime {
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

    #[test]
    fn finished_requests_leave_the_count() {
        let balancer = Replicated::new(vec![fixed(1), fixed(1)], Routing::LeastLoaded);
        let arrivals = (0..6).map(|id| (Duration::from_millis(id * 50), request(id, None)));
        let sim = Simulation::run_open_loop(Box::new(balancer), arrivals);
        assert!(sim.timelines().iter().all(|t| t.finished.is_some()));
        assert_eq!(sim.engine().stats().running, 0);
    }
}
