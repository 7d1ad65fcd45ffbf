//! Prefill/decode disaggregation as one [`Engine`]: a prefill pool computes each prompt and its
//! first token, the prompt's KV cache crosses a link of given bandwidth and latency, and a
//! decode pool generates the rest. Each pool is replicas behind a router
//! ([`super::replicas::Replicated`]); transfers out of one prefill replica share its link, one
//! at a time in the order their prompts finish. A decode replica admits an arrived request by
//! its own policy (KV blocks for its whole context, its sequence slots): requests it cannot
//! admit yet wait in its queue, as a real decode instance's scheduler holds pulled requests.

use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

use super::replicas::{Replicated, event_time, merged_stats};
use super::{Engine, EngineEvent, EngineRequest, EngineStats, Rejection, RequestId, SimTime};

/// The link that carries a prompt's KV cache from a prefill replica to a decode replica.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KvLink {
    /// KV cache bytes per prompt token (the whole model's, every layer).
    pub bytes_per_token: f64,
    /// Each prefill replica's outbound bandwidth, bytes per second.
    pub bytes_per_second: f64,
    /// Fixed cost of one transfer (connector handshake, RDMA setup), paid in parallel.
    pub latency: Duration,
}

impl KvLink {
    /// How long the link is busy sending `prompt_tokens` tokens' KV (latency excluded).
    pub fn busy_for(&self, prompt_tokens: u32) -> Duration {
        let bytes = self.bytes_per_token * f64::from(prompt_tokens);
        Duration::try_from_secs_f64(bytes / self.bytes_per_second).unwrap_or(Duration::MAX)
    }
}

/// Where a request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Prefill(usize),
    Transfer,
    Decode,
}

/// A prefill pool, a KV link and a decode pool.
#[derive(Debug)]
pub struct Disaggregated {
    prefill: Replicated,
    decode: Replicated,
    link: KvLink,
    /// Every request in flight, as the client sent it, and where it is.
    requests: HashMap<RequestId, (EngineRequest, Phase)>,
    /// When each prefill replica's link is next free.
    link_free: Vec<SimTime>,
    /// `(arrives, id)` of every KV transfer under way.
    transfers: BTreeSet<(SimTime, RequestId)>,
    /// Transfers completed and their total time on the link (bytes ÷ bandwidth + latency).
    transferred: (u64, Duration),
}

impl Disaggregated {
    /// `prefill` and `decode` pools (each at least one replica) joined by `link`.
    pub fn new(prefill: Replicated, decode: Replicated, link: KvLink) -> Disaggregated {
        let senders = prefill.replicas().len();
        Disaggregated {
            prefill,
            decode,
            link,
            requests: HashMap::new(),
            link_free: vec![SimTime::ZERO; senders],
            transfers: BTreeSet::new(),
            transferred: (0, Duration::ZERO),
        }
    }

    /// The prefill pool's replicas' statistics, then the decode pool's.
    pub fn pools(&self) -> (Vec<EngineStats>, Vec<EngineStats>) {
        (self.prefill.replica_stats(), self.decode.replica_stats())
    }

    /// KV transfers completed, and the mean time one took (queueing on the link excluded).
    pub fn transfers(&self) -> (u64, Duration) {
        let (count, total) = self.transferred;
        let mean = u32::try_from(count)
            .ok()
            .filter(|n| *n > 0)
            .map_or(Duration::ZERO, |n| total / n);
        (count, mean)
    }

    /// A prefill replica's events: its first token goes to the client, and its KV onto the
    /// link (a one-token answer ends there).
    fn on_prefill_event(&mut self, event: EngineEvent, out: &mut Vec<EngineEvent>) {
        let EngineEvent::Tokens { id, at, count, .. } = event else {
            if let EngineEvent::Aborted { id, .. } = &event {
                self.requests.remove(id);
            }
            out.push(event);
            return;
        };
        let Some((request, phase)) = self.requests.get_mut(&id) else {
            return;
        };
        let Phase::Prefill(sender) = *phase else {
            return;
        };
        let last = request.output_tokens() <= 1;
        out.push(EngineEvent::Tokens {
            id,
            at,
            count,
            finished: last.then(|| request.finish_reason()),
        });
        if last {
            self.requests.remove(&id);
            return;
        }
        *phase = Phase::Transfer;
        let busy = self.link.busy_for(request.prompt_tokens);
        let start = self.link_free.get(sender).copied().unwrap_or(at).max(at);
        if let Some(free) = self.link_free.get_mut(sender) {
            *free = start + busy;
        }
        self.transferred.0 += 1;
        self.transferred.1 += busy + self.link.latency;
        self.transfers
            .insert((start + busy + self.link.latency, id));
    }

    /// A decode replica's events go to the client but its admissions: the request was
    /// scheduled when its prefill began.
    fn on_decode_event(&mut self, event: EngineEvent, out: &mut Vec<EngineEvent>) {
        match &event {
            EngineEvent::Scheduled { .. } => return,
            EngineEvent::Tokens {
                id,
                finished: Some(_),
                ..
            }
            | EngineEvent::Aborted { id, .. } => {
                self.requests.remove(id);
            }
            _ => {}
        }
        out.push(event);
    }

    /// Hands the transfers that arrived by `at` to the decode pool.
    fn land(&mut self, at: SimTime, out: &mut Vec<EngineEvent>) {
        while let Some(&(arrives, id)) = self.transfers.first() {
            if arrives > at {
                break;
            }
            self.transfers.remove(&(arrives, id));
            let Some((request, phase)) = self.requests.get_mut(&id) else {
                continue;
            };
            *phase = Phase::Decode;
            if let Err(refused) = self.decode.submit_prefilled(at, request.clone()) {
                self.requests.remove(&id);
                out.push(EngineEvent::Aborted {
                    id,
                    at,
                    reason: format!("the decode pool refused the request: {refused}"),
                });
            }
        }
    }

    /// Runs both pools to `at`, routing what they did.
    fn run_to(&mut self, at: SimTime, out: &mut Vec<EngineEvent>) {
        let mut happened = Vec::new();
        self.prefill.advance(at, &mut happened);
        for event in happened.drain(..) {
            self.on_prefill_event(event, out);
        }
        self.decode.advance(at, &mut happened);
        for event in happened.drain(..) {
            self.on_decode_event(event, out);
        }
    }
}

impl Engine for Disaggregated {
    fn submit(&mut self, now: SimTime, request: EngineRequest) -> Result<(), Rejection> {
        let id = request.id;
        let prompt_only = EngineRequest {
            max_output_tokens: 1,
            stop_after_tokens: 1,
            ..request.clone()
        };
        self.prefill.submit(now, prompt_only)?;
        let sender = self.prefill.replica_of(id).unwrap_or(0);
        self.requests.insert(id, (request, Phase::Prefill(sender)));
        Ok(())
    }

    fn cancel(&mut self, now: SimTime, id: RequestId) {
        match self.requests.remove(&id) {
            Some((_, Phase::Prefill(_))) => self.prefill.cancel(now, id),
            Some((_, Phase::Transfer)) => self.transfers.retain(|(_, t)| *t != id),
            Some((_, Phase::Decode)) => self.decode.cancel(now, id),
            None => {}
        }
    }

    fn next_event_at(&self) -> Option<SimTime> {
        let transfer = self.transfers.first().map(|(at, _)| *at);
        [
            self.prefill.next_event_at(),
            self.decode.next_event_at(),
            transfer,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn advance(&mut self, now: SimTime, events: &mut Vec<EngineEvent>) {
        let start = events.len();
        // Instant by instant: a transfer landing at `t` reaches a decode pool run to `t`.
        loop {
            let prefill = self.prefill.next_event_at();
            let transfer = self.transfers.first().map(|(at, _)| *at);
            let Some(at) = [prefill, transfer].into_iter().flatten().min() else {
                break;
            };
            if at > now {
                break;
            }
            self.run_to(at, events);
            self.land(at, events);
            let next = self.prefill.next_event_at();
            let landing = self.transfers.first().map(|(t, _)| *t);
            if next.is_some_and(|t| t <= at) && landing.is_none_or(|t| t > at) {
                break; // a pool that does not move on would hold this loop forever
            }
        }
        self.run_to(now, events);
        events[start..].sort_by_key(event_time);
    }

    fn stats(&self) -> EngineStats {
        let (prefill, decode) = self.pools();
        let mut all = prefill;
        all.extend(decode);
        let mut merged = merged_stats(&all);
        merged.waiting += self.transfers.len();
        merged
    }

    fn replica_stats(&self) -> Vec<EngineStats> {
        let (mut all, decode) = self.pools();
        all.extend(decode);
        all
    }

    fn replica_serving(&self, id: RequestId) -> Option<usize> {
        let prefill = self.prefill.replicas().len();
        match self.requests.get(&id).map(|(_, phase)| *phase) {
            Some(Phase::Prefill(sender)) => Some(sender),
            Some(Phase::Decode) => self.decode.replica_of(id).map(|r| prefill + r),
            _ => None,
        }
    }
}

#[cfg(test)]
#[path = "disaggregated_tests.rs"]
mod tests;
