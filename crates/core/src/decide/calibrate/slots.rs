//! Whether a llama.cpp server splits its steps by slot: started with `-np N` each slot has a KV
//! stream of its own and a step's sequences run as micro-batches of consecutive slots, so two
//! sequences decoding in slots 0 and 2 cost two forward passes a step and in slots 0 and 1
//! one; started without (`kv_unified`, its default) every step is one batch whatever the
//! slots. Two requests pinned to slots (`id_slot`) decoding together, first side by side, then
//! with a slot between them, tell which: the second's TPOT is about 1.6 times the first's on
//! the test server with `-np 4`, the same without.

use serde::{Deserialize, Serialize};
use serde_json::{Map, json};
use tokio_util::sync::CancellationToken;

use super::{CalibrateError, CalibrationProbe, NoSink, measure_with, probe_openai};
use crate::backend::openai::OpenAiConfig;
use crate::http::HttpClient;

/// The pinned requests: a short prompt, an answer long enough for a steady TPOT.
const PINNED: CalibrationProbe = CalibrationProbe {
    concurrency: 1,
    input_tokens: 16,
    output_tokens: 48,
    requests: 2,
};
/// How much slower (a factor) two decodes a slot apart must run than side by side for the
/// server to split its steps by slot.
pub const SPLIT_FACTOR: f64 = 1.2;

/// The TPOT medians of two requests decoding together, side by side and a slot apart.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SlotSplit {
    /// Slots 0 and 1, seconds.
    pub side_by_side: f64,
    /// Slots 0 and 2, seconds.
    pub apart: f64,
}

impl SlotSplit {
    /// Whether the server runs each run of consecutive slots as a micro-batch of its own.
    pub fn by_slot(&self) -> bool {
        self.apart > SPLIT_FACTOR * self.side_by_side
    }
}

/// Measures [`SlotSplit`] on a server with three slots or more that honours `id_slot`;
/// `Ok(None)` when a pair measured no TPOT.
pub async fn slot_split(
    client: &HttpClient,
    model: &str,
    (seed, cancel): (u64, &CancellationToken),
) -> Result<Option<SlotSplit>, CalibrateError> {
    let side_by_side = pinned_pair(client, model, [0, 1], (seed, cancel)).await?;
    let apart = pinned_pair(client, model, [0, 2], (seed ^ 1, cancel)).await?;
    Ok(side_by_side
        .zip(apart)
        .map(|(side_by_side, apart)| SlotSplit {
            side_by_side,
            apart,
        }))
}

/// The mean of the TPOT medians of two closed loops, each pinned to one of `slots`, run
/// together.
async fn pinned_pair(
    client: &HttpClient,
    model: &str,
    slots: [u32; 2],
    (seed, cancel): (u64, &CancellationToken),
) -> Result<Option<f64>, CalibrateError> {
    let run = |slot: u32| {
        let seed = seed.wrapping_add(u64::from(slot) << 8);
        pinned(client.clone(), model, slot, (seed, cancel.clone()))
    };
    let (a, b) = tokio::join!(run(slots[0]), run(slots[1]));
    Ok(a?.zip(b?).map(|(a, b)| (a + b) / 2.0))
}

/// One closed loop of [`PINNED`] requests on `slot`: its TPOT median, seconds (`None` when
/// none was measured).
async fn pinned(
    client: HttpClient,
    model: &str,
    slot: u32,
    (seed, cancel): (u64, CancellationToken),
) -> Result<Option<f64>, CalibrateError> {
    let openai = OpenAiConfig {
        extra_body: Map::from_iter([("id_slot".to_string(), json!(slot))]),
        ..probe_openai(model)
    };
    let measured = measure_with((client, openai), &PINNED, (seed, cancel), &mut NoSink).await?;
    Ok((measured.tpot > 0.0).then_some(measured.tpot))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_splits_by_slot_when_decodes_a_slot_apart_run_slower() {
        // llama-server with `-np 4` (26.0 against 41.1 ms) and without (25.8 against 25.1).
        let by_slot = SlotSplit {
            side_by_side: 0.0260,
            apart: 0.0411,
        };
        assert!(by_slot.by_slot());
        let unified = SlotSplit {
            side_by_side: 0.0258,
            apart: 0.0251,
        };
        assert!(!unified.by_slot());
    }
}
