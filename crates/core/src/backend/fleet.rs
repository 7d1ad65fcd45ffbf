//! A fleet behind one [`Backend`]: each request goes to one of several targets, chosen by a
//! client-side policy — round-robin, least outstanding, or weighted round-robin — and its
//! record names the target it was sent to and, with a response header named by the user
//! (`--replica-header`), the replica that served it (a gateway's or router's answer).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use http::HeaderName;
use thiserror::Error;

use super::{Activity, Backend, BoxFuture, RequestSpec};
use crate::record::Exchange;

/// How a fleet picks the target of each request.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Routing {
    /// Each target in turn, in the order requests are sent.
    #[default]
    RoundRobin,
    /// The target with the fewest of this client's requests in flight (ties: the next in
    /// turn after the last choice, so equal targets share the load).
    LeastOutstanding,
    /// Round-robin in proportion to each target's weight, spread smoothly (a weight of 3
    /// beside 1 gives `a a b a`, not `a a a b`).
    Weighted(Vec<u32>),
}

impl Routing {
    /// `round-robin`, `least-outstanding` or `weighted`.
    pub fn name(&self) -> &'static str {
        match self {
            Routing::RoundRobin => "round-robin",
            Routing::LeastOutstanding => "least-outstanding",
            Routing::Weighted(_) => "weighted",
        }
    }
}

/// One target of a fleet.
#[derive(Debug, Clone)]
pub struct FleetTarget {
    /// Its name in the report (unique in the fleet).
    pub label: String,
    /// The backend that sends to it.
    pub backend: Arc<dyn Backend>,
}

/// Why a fleet cannot be built.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum FleetError {
    /// No target.
    #[error("a fleet needs at least one target")]
    Empty,
    /// Two targets with one name.
    #[error("two targets are named {0:?}: give each its own name (NAME=URL)")]
    DuplicateLabel(String),
    /// Weights that do not match the targets.
    #[error("weighted routing needs one weight per target ({targets}), got {weights}")]
    WeightCount {
        /// Targets.
        targets: usize,
        /// Weights given.
        weights: usize,
    },
    /// Every weight zero.
    #[error("weighted routing needs a positive weight on at least one target")]
    NoWeight,
}

/// Several targets behind one backend.
pub struct FleetBackend {
    targets: Vec<Member>,
    routing: Routing,
    /// Requests routed so far (round-robin's turn, least-outstanding's tie-break).
    turn: AtomicU64,
    /// Weighted: each target's running credit (smooth weighted round-robin).
    credit: Mutex<Vec<i64>>,
    replica_header: Option<HeaderName>,
}

struct Member {
    label: String,
    backend: Arc<dyn Backend>,
    outstanding: AtomicU64,
}

impl fmt::Debug for FleetBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let labels: Vec<&str> = self.targets.iter().map(|m| m.label.as_str()).collect();
        f.debug_struct("FleetBackend")
            .field("targets", &labels)
            .field("routing", &self.routing)
            .field("replica_header", &self.replica_header)
            .finish()
    }
}

impl FleetBackend {
    /// A fleet of `targets` routed by `routing`; `replica_header`: the response header that
    /// names the replica which served a request, when the server (or gateway) sends one.
    pub fn new(
        targets: Vec<FleetTarget>,
        routing: Routing,
        replica_header: Option<HeaderName>,
    ) -> Result<Self, FleetError> {
        if targets.is_empty() {
            return Err(FleetError::Empty);
        }
        let mut seen = std::collections::BTreeSet::new();
        for target in &targets {
            if !seen.insert(target.label.as_str()) {
                return Err(FleetError::DuplicateLabel(target.label.clone()));
            }
        }
        if let Routing::Weighted(weights) = &routing {
            if weights.len() != targets.len() {
                return Err(FleetError::WeightCount {
                    targets: targets.len(),
                    weights: weights.len(),
                });
            }
            if weights.iter().all(|w| *w == 0) {
                return Err(FleetError::NoWeight);
            }
        }
        let credit = Mutex::new(vec![0; targets.len()]);
        let targets = targets
            .into_iter()
            .map(|t| Member {
                label: t.label,
                backend: t.backend,
                outstanding: AtomicU64::new(0),
            })
            .collect();
        Ok(FleetBackend {
            targets,
            routing,
            turn: AtomicU64::new(0),
            credit,
            replica_header,
        })
    }

    /// The targets' names, in order.
    pub fn labels(&self) -> Vec<String> {
        self.targets.iter().map(|m| m.label.clone()).collect()
    }

    /// The target of the next request.
    fn choose(&self) -> usize {
        let n = self.targets.len();
        let turn = self.turn.fetch_add(1, Ordering::Relaxed);
        let next = (turn % n as u64) as usize;
        match &self.routing {
            Routing::RoundRobin => next,
            Routing::LeastOutstanding => (0..n)
                .map(|k| (next + k) % n)
                .min_by_key(|&i| self.targets[i].outstanding.load(Ordering::Relaxed))
                .unwrap_or(next),
            Routing::Weighted(weights) => smooth_weighted(
                &mut self.credit.lock().unwrap_or_else(PoisonError::into_inner),
                weights,
            ),
        }
    }
}

/// Smooth weighted round-robin: every target gains its weight, the richest is chosen and pays
/// the total.
fn smooth_weighted(credit: &mut [i64], weights: &[u32]) -> usize {
    let total: i64 = weights.iter().map(|w| i64::from(*w)).sum();
    let mut best = 0;
    for (i, weight) in weights.iter().enumerate() {
        credit[i] += i64::from(*weight);
        if credit[i] > credit[best] {
            best = i;
        }
    }
    credit[best] -= total;
    best
}

/// Counts a request in flight on its target until dropped (a timed-out request's future is
/// dropped, and so is this).
struct InFlight<'a>(&'a AtomicU64);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Backend for FleetBackend {
    fn send<'a>(
        &'a self,
        request: &'a RequestSpec,
        exchange: &'a mut Exchange,
        activity: &'a Activity,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let member = &self.targets[self.choose()];
            member.outstanding.fetch_add(1, Ordering::Relaxed);
            let _in_flight = InFlight(&member.outstanding);
            // One target (a gateway whose replicas a header names) is no breakdown.
            if self.targets.len() > 1 {
                exchange.target = Some(member.label.clone());
            }
            match &self.replica_header {
                Some(header) => {
                    let mut spec = request.clone();
                    spec.tags.replica_header = Some(header.clone());
                    member.backend.send(&spec, exchange, activity).await;
                }
                None => member.backend.send(request, exchange, activity).await,
            }
        })
    }

    fn text_input(&self) -> bool {
        self.targets.iter().all(|m| m.backend.text_input())
    }

    fn asks_output_length(&self) -> bool {
        self.targets.iter().all(|m| m.backend.asks_output_length())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[derive(Debug)]
    struct Nothing;

    impl Backend for Nothing {
        fn send<'a>(
            &'a self,
            _: &'a RequestSpec,
            _: &'a mut Exchange,
            _: &'a Activity,
        ) -> BoxFuture<'a, ()> {
            Box::pin(async {})
        }
    }

    fn fleet(n: usize, routing: Routing) -> FleetBackend {
        let targets = (0..n)
            .map(|i| FleetTarget {
                label: format!("t{i}"),
                backend: Arc::new(Nothing),
            })
            .collect();
        FleetBackend::new(targets, routing, None).unwrap()
    }

    #[test]
    fn round_robin_takes_each_in_turn() {
        let fleet = fleet(3, Routing::RoundRobin);
        let chosen: Vec<usize> = (0..7).map(|_| fleet.choose()).collect();
        assert_eq!(chosen, [0, 1, 2, 0, 1, 2, 0]);
    }

    #[test]
    fn weighted_spreads_in_proportion_and_smoothly() {
        let fleet = fleet(2, Routing::Weighted(vec![3, 1]));
        let chosen: Vec<usize> = (0..8).map(|_| fleet.choose()).collect();
        assert_eq!(chosen, [0, 0, 1, 0, 0, 0, 1, 0]);
        let fleet = fleet3_weights(vec![5, 1, 1]);
        let mut counts = [0; 3];
        for _ in 0..700 {
            counts[fleet.choose()] += 1;
        }
        assert_eq!(counts, [500, 100, 100]);
    }

    fn fleet3_weights(weights: Vec<u32>) -> FleetBackend {
        fleet(3, Routing::Weighted(weights))
    }

    #[test]
    fn least_outstanding_avoids_a_busy_target_and_shares_ties() {
        let fleet = fleet(3, Routing::LeastOutstanding);
        fleet.targets[0].outstanding.store(2, Ordering::Relaxed);
        fleet.targets[1].outstanding.store(1, Ordering::Relaxed);
        assert_eq!(fleet.choose(), 2);
        fleet.targets[2].outstanding.store(1, Ordering::Relaxed);
        // Targets 1 and 2 tie: the tie goes to the next in turn (turn 1 → target 1, turn 2 →
        // target 2).
        assert_eq!(fleet.choose(), 1);
        assert_eq!(fleet.choose(), 2);
    }

    #[test]
    fn bad_fleets_are_refused() {
        assert_eq!(
            FleetBackend::new(Vec::new(), Routing::RoundRobin, None).unwrap_err(),
            FleetError::Empty
        );
        let twice = vec![
            FleetTarget {
                label: "a".into(),
                backend: Arc::new(Nothing),
            },
            FleetTarget {
                label: "a".into(),
                backend: Arc::new(Nothing),
            },
        ];
        assert_eq!(
            FleetBackend::new(twice, Routing::RoundRobin, None).unwrap_err(),
            FleetError::DuplicateLabel("a".into())
        );
        let targets = vec![FleetTarget {
            label: "a".into(),
            backend: Arc::new(Nothing),
        }];
        assert_eq!(
            FleetBackend::new(targets.clone(), Routing::Weighted(vec![1, 2]), None).unwrap_err(),
            FleetError::WeightCount {
                targets: 1,
                weights: 2
            }
        );
        assert_eq!(
            FleetBackend::new(targets, Routing::Weighted(vec![0]), None).unwrap_err(),
            FleetError::NoWeight
        );
    }

    #[tokio::test]
    async fn a_request_names_its_target_and_is_counted_only_while_in_flight() {
        let fleet = fleet(2, Routing::RoundRobin);
        let spec = RequestSpec {
            index: 0,
            input: super::super::RequestInput::Text("x".into()),
            expected_input_tokens: None,
            max_output_tokens: None,
            turn: None,
            tags: Default::default(),
        };
        let (mut first, mut second) = (Exchange::default(), Exchange::default());
        let activity = Activity::default();
        fleet.send(&spec, &mut first, &activity).await;
        fleet.send(&spec, &mut second, &activity).await;
        assert_eq!(first.target.as_deref(), Some("t0"));
        assert_eq!(second.target.as_deref(), Some("t1"));
        assert!(
            fleet
                .targets
                .iter()
                .all(|m| m.outstanding.load(Ordering::Relaxed) == 0)
        );
    }
}
