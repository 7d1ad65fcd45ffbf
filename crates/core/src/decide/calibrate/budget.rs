//! How many tokens one step carries on a server that does not say (vLLM's
//! `max_num_batched_tokens`, llama.cpp's `n_batch`; neither is in any endpoint): one request
//! decoding alone, and a long prompt sent while it decodes. A server that cuts a prompt into
//! chunks of its step budget runs one chunk per step beside the decode, so the decoding
//! stream's gaps between tokens grow for as many steps as the prompt has chunks — the prompt's
//! tokens over that count are the budget; one long gap says the whole prompt went in one step
//! (the budget is at least the prompt).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{CalibrateError, ProbeMeasurement, replay_probe};
use crate::backend::RequestSpec;
use crate::http::HttpClient;
use crate::workload::Workload;
use crate::workload::synthetic::synthetic_request;

/// The longest prompt sent, `cl100k_base` tokens: it shows budgets up to half of it as two
/// chunks or more. Not a multiple of a power of two: a prompt just over one would leave a
/// last chunk too small to see.
const MAX_PROMPT: u32 = 15_000;
/// Share of a slot's context the long prompt takes (a server's tokenizer and chat template
/// count a few per cent more than `cl100k_base`).
const PROMPT_SHARE: f64 = 0.85;
/// Tokens of the slot's context kept for the template and the answer.
const CONTEXT_MARGIN: u32 = 64;
/// Prompt of the decoding request, tokens.
const STREAM_PROMPT: u32 = 16;
/// The smallest step budget the stream is long enough to count the chunks of.
const SMALLEST_BUDGET: u32 = 64;
/// A gap this many times the stream's usual one carried part of the prompt.
const ELEVATED: f64 = 1.25;
/// How far (a factor) from the estimate a power of two may be taken for it.
const SNAP: f64 = 1.25;
/// A gap's growth less than this share of the largest is not a chunk.
const SLIVER: f64 = 0.1;
/// The share of the prompt's time to first token the stream's grown gaps must span: the steps
/// a prompt ran in are about all of its prefill; a prompt that ran beside the stream's steps
/// (a server timing each request alone) left only jitter in a gap or two of it.
const CARRIED: f64 = 0.5;

/// The two requests of the probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetProbe {
    /// Prompt of the long request, `cl100k_base` tokens.
    pub prompt_tokens: u32,
    /// Answer tokens of the decoding request.
    pub stream_tokens: u32,
    /// When the long prompt is sent, after the decoding request.
    pub offset: Duration,
}

impl BudgetProbe {
    /// The probe for a slot of `context_per_slot` tokens, timed from the plan's measured probes
    /// (a lone decode's TTFT and TPOT: the prompt goes once the stream decodes); `None` without
    /// a lone decode or with too small a context.
    pub fn sized(context_per_slot: u32, measured: &[ProbeMeasurement]) -> Option<BudgetProbe> {
        let decode = measured
            .iter()
            .filter(|m| m.probe.concurrency == 1 && m.probe.output_tokens > 8 && m.tpot > 0.0)
            .min_by(|a, b| a.prompt_tokens.total_cmp(&b.prompt_tokens))?;
        let room = context_per_slot.checked_sub(CONTEXT_MARGIN)?;
        let prompt_tokens = ((f64::from(room) * PROMPT_SHARE) as u32).min(MAX_PROMPT);
        let offset = decode.ttft + 4.0 * decode.tpot;
        // One token a step while the prompt's chunks run (a server that stalls the decode
        // instead needs none), and as many again after it.
        let chunks = prompt_tokens.div_ceil(SMALLEST_BUDGET);
        let before = (offset / decode.tpot).ceil() as u32;
        let stream_tokens = (before + 2 * chunks + 32).min(room.saturating_sub(STREAM_PROMPT));
        (prompt_tokens >= 2 * SMALLEST_BUDGET && stream_tokens > before).then_some(BudgetProbe {
            prompt_tokens,
            stream_tokens,
            offset: Duration::from_secs_f64(offset),
        })
    }
}

/// What the decoding stream showed of the long prompt.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StepBudget {
    /// The prompt ran in `steps` steps (a last, partial chunk counted by its share) of
    /// `tokens` tokens each, the decoding stream's token among them.
    Measured {
        /// Tokens a step carries.
        tokens: u32,
        /// Steps the prompt took.
        steps: f64,
        /// The prompt as the server counted it.
        prompt_tokens: u32,
    },
    /// One step took the whole prompt: a step carries at least `tokens`.
    AtLeast {
        /// The prompt as the server counted it, and the stream's token.
        tokens: u32,
    },
    /// The stream went on decoding past the prompt's first token and none of its steps grew
    /// while the prompt ran: the prompt took nothing from the decode's steps (a server that
    /// runs prompts apart, or whose prefill is free beside its decode), so no step budget binds
    /// what the server does.
    Beside,
}

/// The step budget read from the decoding stream's token times (µs) and the long prompt's
/// send and first-token times and length (the server's count). The prompt's steps are the
/// stream's grown gaps (beyond 1.25 times its usual gap, by a tenth of the largest growth at
/// least): their count `k` bounds the budget — `k − 1` steps of `b` prompt tokens could not
/// hold the prompt, `k + 1` could (one more, a last sliver of a chunk, may have grown a gap too
/// little to count) — and their growth, each a share of a full chunk's (the median of those
/// at least half the largest: later chunks attend over more and cost a little more),
/// estimates it within those bounds. [`StepBudget::Beside`] when the stream outlived the
/// prompt but the grown gaps span less than half the prompt's time to first token (the prompt
/// ran beside the stream's steps, not in them); `None` when the stream ended before the
/// prompt's first token or too few gaps came outside it.
pub fn read_budget(stream: &[u64], prompt: (u64, u64), prompt_tokens: u32) -> Option<StepBudget> {
    let excess = match grown_gaps(stream, prompt)? {
        Gaps::Beside => return Some(StepBudget::Beside),
        Gaps::Grown(excess) => excess,
    };
    // The decoding stream's token rides in every step.
    let tokens = |per_step: f64| per_step + 1.0;
    if excess.len() == 1 {
        return Some(StepBudget::AtLeast {
            tokens: prompt_tokens + 1,
        });
    }
    let largest = excess.iter().copied().fold(0.0, f64::max);
    let full = median(
        excess
            .iter()
            .copied()
            .filter(|e| *e >= largest / 2.0)
            .collect(),
    )?;
    let steps = excess.iter().sum::<f64>() / full;
    let (prompt, k) = (f64::from(prompt_tokens), excess.len() as f64);
    let bounds = (
        tokens((prompt / (k + 1.0)).ceil()),
        tokens((prompt / (k - 1.0)).ceil() - 1.0),
    );
    Some(StepBudget::Measured {
        tokens: snapped(tokens(prompt / steps), bounds),
        steps,
        prompt_tokens,
    })
}

/// What the decoding stream's gaps showed of the prompt.
enum Gaps {
    /// None grew, or too few to carry it: it ran beside the stream's steps.
    Beside,
    /// How much each gap that carried part of it grew.
    Grown(Vec<f64>),
}

/// How much each of the stream's gaps that ended while the prompt ran (from its send to its
/// first token) grew over the usual gap (the median of the others), counting those beyond
/// [`ELEVATED`] times it by at least a [`SLIVER`] of the largest growth (less is the server's
/// host work — llama.cpp launching the request's slot — or jitter, not a chunk). `None` when
/// the stream ended before the prompt's first token or fewer than three gaps came outside it;
/// [`Gaps::Beside`] when the grown gaps span less than [`CARRIED`] of the prompt's time to
/// first token (none grew, or a gap jittered while the prompt ran elsewhere).
fn grown_gaps(stream: &[u64], (sent, first): (u64, u64)) -> Option<Gaps> {
    if stream.last().is_none_or(|&end| end <= first) {
        return None;
    }
    let gaps: Vec<(u64, f64)> = stream
        .windows(2)
        .map(|pair| (pair[1], pair[1].saturating_sub(pair[0]) as f64))
        .collect();
    let rough = median(gaps.iter().map(|(_, gap)| *gap).collect())?;
    let outside: Vec<f64> = gaps
        .iter()
        .filter(|(end, _)| *end <= sent || *end as f64 > first as f64 + rough)
        .map(|(_, gap)| *gap)
        .collect();
    let usual = median(outside.clone()).filter(|_| outside.len() >= 3)?;
    let excess: Vec<f64> = gaps
        .iter()
        .filter(|(end, _)| *end > sent && (*end as f64) <= first as f64 + usual / 2.0)
        .filter(|(_, gap)| *gap > ELEVATED * usual)
        .map(|(_, gap)| gap - usual)
        .collect();
    let largest = excess.iter().copied().fold(0.0, f64::max);
    let chunks: Vec<f64> = excess
        .into_iter()
        .filter(|e| *e >= SLIVER * largest)
        .collect();
    let spanned: f64 = chunks.iter().map(|e| e + usual).sum();
    let prefill = first.saturating_sub(sent) as f64;
    Some(if largest > 0.0 && spanned >= CARRIED * prefill {
        Gaps::Grown(chunks)
    } else {
        Gaps::Beside
    })
}

/// The budget within `(low, high)`: the power of two there nearest `estimate`, when within
/// [`SNAP`] of it — engines' budgets are 512, 2,048, 8,192 … unless set otherwise, and the
/// estimate is rough where the prompt took few steps (a later chunk attends over the earlier
/// ones and costs more a token) — else the estimate, clamped into the bounds.
fn snapped(estimate: f64, (low, high): (f64, f64)) -> u32 {
    let high = high.max(low);
    let clamped = estimate.clamp(low, high);
    let distance = |power: &f64| (power / clamped).ln().abs();
    let powers = (low.log2().ceil() as i32)..=(high.log2().floor() as i32);
    let nearest = powers
        .map(|p| 2f64.powi(p))
        .filter(|power| distance(power) <= SNAP.ln())
        .min_by(|a, b| distance(a).total_cmp(&distance(b)));
    nearest
        .unwrap_or(clamped.round())
        .clamp(1.0, f64::from(u32::MAX)) as u32
}

fn median(mut values: Vec<f64>) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    (n > 0).then(|| (values[(n - 1) / 2] + values[n / 2]) / 2.0)
}

/// Runs `probe` (the decoding request at once, the long prompt at its offset) and reads the
/// budget; `Ok(None)` when the stream showed none (see [`read_budget`]).
pub async fn step_budget(
    client: &HttpClient,
    model: &str,
    probe: &BudgetProbe,
    (seed, cancel): (u64, &CancellationToken),
) -> Result<Option<StepBudget>, CalibrateError> {
    let workload = Arc::new(TwoRequests {
        probe: *probe,
        seed,
    });
    let live = (client, model);
    let seen = replay_probe(live, (workload, 2), (seed, cancel), CalibrateError::Budget).await?;
    let get = |index: u64| seen.iter().find(|r| r.index == index);
    let (Some(stream), Some(prompt)) = (get(0), get(1)) else {
        return Ok(None);
    };
    let stream_times: Vec<u64> = stream.chunks.iter().map(|[at, _]| *at).collect();
    let (Some(sent), Some(first)) = (prompt.sent_us, prompt.first_token_us) else {
        return Ok(None);
    };
    let counted = prompt
        .input_tokens
        .unwrap_or(u64::from(probe.prompt_tokens));
    let counted = u32::try_from(counted).unwrap_or(u32::MAX);
    Ok(read_budget(&stream_times, (sent, first), counted))
}

/// The probe's requests: 0 decodes, 1 is the long prompt sent at the offset.
#[derive(Debug)]
struct TwoRequests {
    probe: BudgetProbe,
    seed: u64,
}

impl Workload for TwoRequests {
    fn request(&self, index: u64) -> RequestSpec {
        let (input, output) = if index == 0 {
            (STREAM_PROMPT, self.probe.stream_tokens)
        } else {
            (self.probe.prompt_tokens, 4)
        };
        synthetic_request(self.seed, index, input, Some(output))
    }

    fn describe(&self) -> BTreeMap<String, serde_json::Value> {
        BTreeMap::from([
            ("kind".to_string(), json!("step_budget_probe")),
            ("probe".to_string(), json!(self.probe)),
        ])
    }

    fn arrival_offsets(&self) -> Option<Arc<[Duration]>> {
        Some(Arc::new([Duration::ZERO, self.probe.offset]))
    }
}

#[cfg(test)]
#[path = "budget_tests.rs"]
mod tests;
