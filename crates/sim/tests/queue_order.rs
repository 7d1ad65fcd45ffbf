//! The queue order (`queue_order`): one sequence slot busy with a long answer, three requests
//! queued behind it one millisecond apart with different prompts and `max_tokens`; the slot
//! serves them one after another in the configured order, with or without a slot setup.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use support::engine_request as request;

use goodput_sim::build_engine;
use goodput_sim::config::{BatchingConfig, EngineConfig, QueueOrder, SimConfig};
use goodput_sim::virtual_time::Simulation;

/// The queued requests' `(prompt tokens, max_tokens)`, in arrival order.
const QUEUED: [(u32, u32); 3] = [(48, 96), (16, 32), (112, 64)];

/// The queued requests (1, 2, 3) in the order their first tokens came.
fn served_order(order: QueueOrder, setup: bool) -> Vec<u64> {
    let config = SimConfig {
        engine: EngineConfig::Batching(BatchingConfig {
            max_num_seqs: Some(1),
            queue_order: order,
            slot_setup_us: setup.then_some(5_000.0),
            ..BatchingConfig::default()
        }),
        ..SimConfig::default()
    };
    config.validate().unwrap();
    let mut sim = Simulation::new(build_engine(&config));
    sim.submit(Duration::ZERO, request(0, 16, 200));
    for (k, lengths) in QUEUED.iter().enumerate() {
        sim.submit(
            Duration::from_millis(1 + k as u64),
            request(k as u64 + 1, lengths.0, lengths.1),
        );
    }
    sim.run_until_idle();
    let mut first: Vec<(Duration, u64)> = (1..=3)
        .map(|id| (sim.timeline(id).unwrap().deliveries[0].0, id))
        .collect();
    first.sort();
    first.into_iter().map(|(_, id)| id).collect()
}

#[test]
fn a_free_slot_takes_the_queued_request_its_order_puts_first() {
    let expected: [(QueueOrder, [u64; 3]); 6] = [
        (QueueOrder::Fifo, [1, 2, 3]),
        (QueueOrder::Lifo, [3, 2, 1]),
        (QueueOrder::ShortestPrompt, [2, 1, 3]),
        (QueueOrder::LongestPrompt, [3, 1, 2]),
        (QueueOrder::ShortestOutput, [2, 3, 1]),
        (QueueOrder::LongestOutput, [1, 3, 2]),
    ];
    for (order, served) in expected {
        for setup in [false, true] {
            assert_eq!(
                served_order(order, setup),
                served,
                "{order:?}, setup {setup}"
            );
        }
    }
}
