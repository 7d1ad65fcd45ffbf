//! The queue-order probe's reading, from records built here with exact timing.

use super::*;
use crate::decide::calibrate::{CalibrationProbe, Tail};

#[test]
fn every_order_serves_each_round_in_a_sequence_of_its_own() {
    for round in 0..ROUNDS.len() {
        let sequences: Vec<Vec<usize>> = QueueOrder::ALL
            .iter()
            .map(|order| expected_sequence(*order, round))
            .collect();
        for (i, a) in sequences.iter().enumerate() {
            for b in &sequences[i + 1..] {
                assert_ne!(a, b, "round {round}: {sequences:?}");
            }
        }
    }
    // First come first served and its reverse do not depend on the lengths; every length
    // order changes its sequence from one round to the next.
    for order in &QueueOrder::ALL[2..] {
        assert_ne!(expected_sequence(*order, 0), expected_sequence(*order, 1));
    }
    assert_eq!(expected_sequence(QueueOrder::Fifo, 1), [0, 1, 2, 3]);
    assert_eq!(expected_sequence(QueueOrder::Lifo, 0), [3, 2, 1, 0]);
}

#[test]
fn rounds_served_as_one_order_serves_them_read_as_that_order() {
    for order in QueueOrder::ALL {
        let served = vec![expected_sequence(order, 0), expected_sequence(order, 1)];
        assert_eq!(
            read_order(served.clone()),
            QueueReading::Read { order, served }
        );
    }
    // A server that picks at random: each round a sequence of some order, not the same one.
    let served = vec![
        expected_sequence(QueueOrder::Fifo, 0),
        expected_sequence(QueueOrder::ShortestPrompt, 1),
    ];
    assert_eq!(
        read_order(served.clone()),
        QueueReading::Unexplained { served }
    );
}

/// Time of one step, µs.
const STEP: u64 = 10_000;

fn record(index: usize, sent: u64, first: u64, last: u64) -> RequestRecord {
    let chunks: Vec<[u64; 2]> = (first..=last)
        .step_by(STEP as usize)
        .map(|t| [t, 1])
        .collect();
    serde_json::from_value(json!({
        "index": index, "phase": "measure", "scheduled_us": sent, "dequeued_us": sent,
        "sent_us": sent, "response_us": first, "first_token_us": first, "last_token_us": last,
        "end_us": last, "streamed": true, "input_tokens": 20, "input_tokens_source": "usage",
        "output_tokens": chunks.len(), "output_tokens_source": "usage", "chunks": chunks,
        "items": 1, "status": 200
    }))
    .unwrap()
}

/// A round on 4 slots, exactly timed: the busy slots' first tokens at 20 ms, slot `i` freeing
/// at `20 + (base + 12 i)` steps; queued request `k` sent at `queue_at + 30 k` ms and served
/// `serve[j] = k` by the `j`-th slot to free, its first token two steps after.
fn round(serve: [usize; QUEUED], queue_at_ms: u64, base: u64) -> Vec<RequestRecord> {
    let first = 20_000;
    let frees = |i: u64| first + (base + u64::from(GAP_STEPS) * i) * STEP;
    let mut records: Vec<RequestRecord> = (0..4u64)
        .map(|i| record(i as usize, 0, first, frees(i)))
        .collect();
    for (j, k) in serve.iter().enumerate() {
        let sent = queue_at_ms * 1000 + 30_000 * *k as u64;
        let started = frees(j as u64) + 2 * STEP;
        records.push(record(4 + k, sent, started, started + 40 * STEP));
    }
    records
}

#[test]
fn a_round_is_read_from_the_order_its_queued_requests_started_in() {
    let records = round([2, 0, 3, 1], 100, 30);
    assert_eq!(served_sequence(&records, 4), Ok(vec![2, 0, 3, 1]));
}

#[test]
fn a_round_whose_queue_did_not_form_behind_busy_slots_shows_no_order() {
    // Sent before the slots' first tokens (20 ms): a late slot might have taken one.
    let early = round([0, 1, 2, 3], 10, 30);
    assert!(
        served_sequence(&early, 4)
            .unwrap_err()
            .contains("before every slot")
    );
    // The first slot freed (at 20 ms + 10 steps) before the last was sent (100 + 90 ms).
    let late = round([0, 1, 2, 3], 100, 10);
    assert!(
        served_sequence(&late, 4)
            .unwrap_err()
            .contains("freed before")
    );
}

#[test]
fn queued_requests_started_within_a_step_show_no_order() {
    let mut records = round([0, 1, 2, 3], 100, 30);
    // The third queued request starts 4 ms after the second.
    let second = records[5].first_token_us.unwrap();
    records[6] = record(
        6,
        records[6].sent_us.unwrap(),
        second + 4_000,
        second + 400_000,
    );
    assert!(
        served_sequence(&records, 4)
            .unwrap_err()
            .contains("within a step")
    );
}

fn measured(concurrency: u32, input_tokens: u32, ttft: f64, tpot: f64) -> ProbeMeasurement {
    ProbeMeasurement {
        probe: CalibrationProbe {
            concurrency,
            input_tokens,
            output_tokens: 32,
            requests: 8,
        },
        prompt_tokens: f64::from(input_tokens),
        ttft,
        tpot,
        e2e: ttft + 31.0 * tpot,
        requests_per_sec: 1.0,
        tails: [Tail::default(); 3],
    }
}

#[test]
fn the_probe_is_timed_from_the_plans_probes() {
    let plan = [
        measured(1, 16, 0.050, 0.020),
        measured(4, 16, 0.120, 0.030),
        measured(8, 16, 0.400, 0.040),
        measured(1, 512, 0.900, 0.025),
    ];
    let probe = QueueProbe::sized(4, &plan).unwrap();
    // The queue forms at twice the TTFT of the most clients within the slots (120 ms); the
    // last queued request goes 90 ms later, at 330 ms: 16.5 of the fastest steps (20 ms), so
    // the first slot frees 17 + 4 tokens in, even were the steps that fast from the start.
    assert_eq!(probe.queue_at, Duration::from_millis(240));
    assert_eq!(probe.base_tokens, 21);
    assert_eq!(probe.holder_tokens(0), 21);
    assert_eq!(probe.holder_tokens(3), 21 + 3 * GAP_STEPS);
    assert_eq!(probe.holder_tokens(9), 21 + 4 * GAP_STEPS);
    // Four clients probed with 64-token prompts only: their TTFT.
    let at_four = QueueProbe::sized(4, &[plan[0], measured(4, 64, 0.300, 0.030)]).unwrap();
    assert_eq!(at_four.queue_at, Duration::from_millis(600));
    assert_eq!(QueueProbe::sized(MAX_SLOTS + 1, &plan), None);
    assert_eq!(QueueProbe::sized(4, &[measured(1, 16, 0.05, 0.0)]), None);
}
