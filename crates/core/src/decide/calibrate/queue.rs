//! The order a server admits queued requests in, where it does not say: every slot taken by a
//! request decoding a long answer (their ends a few steps apart, so slots free one at a time),
//! then four requests sent one after another, each with its own prompt and `max_tokens`; the
//! order of their first tokens is the order the freed slots took them in. Two rounds, the
//! lengths assigned differently, each order giving its own sequence in each round; a server
//! whose rounds agree on one of [`QueueOrder::ALL`] is read as that order.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use goodput_protocol::QueueOrder;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{CalibrateError, ProbeMeasurement, replay_probe};
use crate::backend::RequestSpec;
use crate::http::HttpClient;
use crate::record::RequestRecord;
use crate::workload::synthetic::synthetic_request;
use crate::workload::{Workload, mix_seed};

/// Requests queued behind the busy slots.
pub const QUEUED: usize = 4;
/// Most slots the probe fills (a request each): vLLM's default `max_num_seqs` (the plan's
/// probes already run twice the slots).
pub const MAX_SLOTS: u32 = 256;
/// Steps between one slot freeing and the next: a queued prompt (at most 112 tokens, a few
/// steps on a small step budget) has its first token well before.
pub const GAP_STEPS: u32 = 12;
/// Between two queued requests' sends.
const SPACING: Duration = Duration::from_millis(30);
/// Prompt tokens of the busy slots' requests.
const HOLDER_PROMPT: u32 = 16;
/// The queued requests' prompts, `cl100k_base` tokens, by rank (shortest first).
const PROMPTS: [u32; QUEUED] = [16, 40, 72, 112];
/// Each round's ranks of the queued requests' prompts and answers (in the order they are
/// sent): every order of [`QueueOrder::ALL`] serves them in a sequence of its own, in each
/// round, and the length orders in a different one from one round to the next.
const ROUNDS: [([usize; QUEUED], [usize; QUEUED]); 2] =
    [([1, 3, 0, 2], [3, 1, 0, 2]), ([2, 0, 3, 1], [1, 2, 0, 3])];

/// The probe's timing, from the plan's measured probes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct QueueProbe {
    /// Requests that take every slot.
    pub slots: u32,
    /// Answer tokens of the first busy slot's request (the others' end [`GAP_STEPS`] apart).
    pub base_tokens: u32,
    /// When the first queued request is sent, after the busy slots' requests.
    pub queue_at: Duration,
}

impl QueueProbe {
    /// The probe for a server with exactly `slots` slots (at most [`MAX_SLOTS`]), timed from
    /// the plan's probes: the queue forms after twice the TTFT of the probe with the most
    /// clients within the slots (its shortest prompt; the busy slots' prompts are shorter
    /// still), and the first slot frees only after the last queued request was sent even at
    /// the fastest TPOT measured.
    pub fn sized(slots: u32, measured: &[ProbeMeasurement]) -> Option<QueueProbe> {
        if slots == 0 || slots > MAX_SLOTS {
            return None;
        }
        let step = measured
            .iter()
            .map(|m| m.tpot)
            .filter(|tpot| *tpot > 0.0)
            .min_by(f64::total_cmp)?;
        // The most clients the plan ran within the slots, its shortest prompt there.
        let clients = measured
            .iter()
            .map(|m| m.probe.concurrency)
            .filter(|c| *c <= slots)
            .max()?;
        let first = measured
            .iter()
            .filter(|m| m.probe.concurrency == clients)
            .min_by_key(|m| m.probe.input_tokens)?
            .ttft;
        let queue_at = 2.0 * first;
        let last_sent = queue_at + SPACING.as_secs_f64() * (QUEUED - 1) as f64;
        let base_tokens = (last_sent / step).ceil() as u32 + 4;
        Some(QueueProbe {
            slots,
            base_tokens,
            queue_at: Duration::from_secs_f64(queue_at),
        })
    }

    /// Answer tokens of busy slot `slot`: the first [`QUEUED`] end [`GAP_STEPS`] apart, the
    /// others after them all.
    fn holder_tokens(&self, slot: u32) -> u32 {
        self.base_tokens + slot.min(QUEUED as u32) * GAP_STEPS
    }

    /// `(prompt, max_tokens)` of queued request `k` in `round`: answers long enough that none
    /// ends before the last is admitted, and apart by less than the slots' gap.
    fn queued_lengths(round: usize, k: usize) -> (u32, u32) {
        let (prompt_ranks, answer_ranks) = ROUNDS[round % ROUNDS.len()];
        let answer = (QUEUED as u32 - 1) * GAP_STEPS + 4 + 2 * answer_ranks[k] as u32;
        (PROMPTS[prompt_ranks[k]], answer)
    }
}

/// What the probe saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum QueueReading {
    /// Both rounds served the queue as `order` does.
    Read {
        /// The order.
        order: QueueOrder,
        /// Each round's queued requests (by the order they were sent, from 0) in the order
        /// their first tokens came.
        served: Vec<Vec<usize>>,
    },
    /// The rounds' sequences fit no one order of [`QueueOrder::ALL`].
    Unexplained {
        /// As in [`QueueReading::Read`].
        served: Vec<Vec<usize>>,
    },
    /// A round could not show an order (why).
    Unclear(String),
}

/// The sequence `order` serves round `round`'s queued requests in.
pub fn expected_sequence(order: QueueOrder, round: usize) -> Vec<usize> {
    let mut queue: Vec<(usize, (u32, u32))> = Vec::new();
    for k in 0..QUEUED {
        let key = QueueProbe::queued_lengths(round, k);
        let at = order.position(queue.iter().map(|(_, key)| *key), key);
        queue.insert(at, (k, key));
    }
    queue.into_iter().map(|(k, _)| k).collect()
}

/// The order both rounds' sequences (`served[round]`) fit, if one does.
pub fn read_order(served: Vec<Vec<usize>>) -> QueueReading {
    let fits = |order: QueueOrder| {
        served
            .iter()
            .enumerate()
            .all(|(round, seq)| *seq == expected_sequence(order, round))
    };
    match QueueOrder::ALL.into_iter().find(|order| fits(*order)) {
        Some(order) => QueueReading::Read { order, served },
        None => QueueReading::Unexplained { served },
    }
}

/// One round's sequence from its records (the busy slots' `0..slots`, the queued ones'
/// after), or why it shows none: the queue formed before every slot was taken or after one
/// freed, or two queued requests started within half a step of each other.
pub fn served_sequence(records: &[RequestRecord], slots: usize) -> Result<Vec<usize>, String> {
    let by_index = |i: usize| records.iter().find(|r| r.index == i as u64);
    let holders: Vec<&RequestRecord> = (0..slots).filter_map(by_index).collect();
    let queued: Vec<&RequestRecord> = (slots..slots + QUEUED).filter_map(by_index).collect();
    if holders.len() < slots || queued.len() < QUEUED {
        return Err("a request has no record".into());
    }
    let taken = holders.iter().filter_map(|r| r.first_token_us).max();
    let freed = holders.iter().filter_map(|r| r.last_token_us).min();
    let sent: Vec<u64> = queued.iter().filter_map(|r| r.sent_us).collect();
    let (Some(taken), Some(freed), Some(&first_sent), Some(&last_sent)) =
        (taken, freed, sent.iter().min(), sent.iter().max())
    else {
        return Err("a request streamed no token".into());
    };
    if first_sent < taken {
        return Err("the queue formed before every slot was taken".into());
    }
    if last_sent >= freed {
        return Err("a slot freed before the queue formed".into());
    }
    let mut started: Vec<(u64, usize)> = Vec::new();
    for (k, record) in queued.iter().enumerate() {
        let first = record
            .first_token_us
            .ok_or("a queued request streamed no token")?;
        started.push((first, k));
    }
    started.sort_unstable();
    let step = holders
        .first()
        .and_then(|r| median_gap(&r.chunks))
        .unwrap_or(0);
    if started
        .windows(2)
        .any(|pair| pair[1].0 - pair[0].0 < step / 2)
    {
        return Err("two queued requests started within a step of each other".into());
    }
    Ok(started.into_iter().map(|(_, k)| k).collect())
}

/// The median gap between a stream's tokens, µs.
fn median_gap(chunks: &[[u64; 2]]) -> Option<u64> {
    let mut gaps: Vec<u64> = chunks
        .windows(2)
        .map(|pair| pair[1][0].saturating_sub(pair[0][0]))
        .collect();
    gaps.sort_unstable();
    gaps.get(gaps.len() / 2).copied()
}

/// Runs both rounds of `probe` (the second even when the first showed no order: the probe
/// always sends the same requests) and reads the order.
pub async fn queue_order(
    client: &HttpClient,
    model: &str,
    probe: &QueueProbe,
    (seed, cancel): (u64, &CancellationToken),
) -> Result<QueueReading, CalibrateError> {
    let mut served = Vec::new();
    let mut unclear = Vec::new();
    for round in 0..ROUNDS.len() {
        let seed = mix_seed(seed, round as u64);
        match queue_round(client, model, probe, (round, seed), cancel).await? {
            Ok(sequence) => served.push(sequence),
            Err(why) => unclear.push(format!("round {}: {why}", round + 1)),
        }
    }
    if !unclear.is_empty() {
        return Ok(QueueReading::Unclear(unclear.join("; ")));
    }
    Ok(read_order(served))
}

/// One round: the busy slots' requests at once, the queued ones from the probe's offset.
async fn queue_round(
    client: &HttpClient,
    model: &str,
    probe: &QueueProbe,
    (round, seed): (usize, u64),
    cancel: &CancellationToken,
) -> Result<Result<Vec<usize>, String>, CalibrateError> {
    let requests = u64::from(probe.slots) + QUEUED as u64;
    let workload = Arc::new(QueueRound {
        probe: *probe,
        round,
        seed,
    });
    let live = (client, model);
    let error = CalibrateError::Queue;
    let seen = replay_probe(live, (workload, requests), (seed, cancel), error).await?;
    Ok(served_sequence(&seen, probe.slots as usize))
}

/// One round's requests: `0..slots` take the slots, the next [`QUEUED`] queue.
#[derive(Debug)]
struct QueueRound {
    probe: QueueProbe,
    round: usize,
    seed: u64,
}

impl Workload for QueueRound {
    fn request(&self, index: u64) -> RequestSpec {
        let slots = u64::from(self.probe.slots);
        let (input, output) = match index.checked_sub(slots) {
            None => (HOLDER_PROMPT, self.probe.holder_tokens(index as u32)),
            Some(k) => QueueProbe::queued_lengths(self.round, k as usize),
        };
        synthetic_request(self.seed, index, input, Some(output))
    }

    fn describe(&self) -> BTreeMap<String, serde_json::Value> {
        BTreeMap::from([
            ("kind".to_string(), json!("queue_order_probe")),
            ("probe".to_string(), json!(self.probe)),
            ("round".to_string(), json!(self.round)),
        ])
    }

    fn arrival_offsets(&self) -> Option<Arc<[Duration]>> {
        let holders = (0..self.probe.slots).map(|_| Duration::ZERO);
        let queued = (0..QUEUED as u32).map(|k| self.probe.queue_at + SPACING * k);
        Some(holders.chain(queued).collect())
    }
}

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;
