//! Speculative decoding: acceptance rate, mean accepted length and the theoretical speedup
//! `(accepted_per_draft + 1) / (K · c_draft/c_target + 1)`, from the server's counters (vLLM
//! and llama.cpp `spec_decode_*`), its gauges (SGLang), or — when the server reports nothing —
//! from the tokens per streamed chunk (each verification step's accepted tokens arrive
//! together).

use serde::{Deserialize, Serialize};

use super::{Figure, input};
use crate::observe::server::{ClientTally, ServerReport};
pub use crate::report::analysis::SpeculativeReport;

/// What the server does not report: the drafts per step (K) and the draft model's relative
/// cost.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct SpeculativeInputs {
    /// Draft tokens proposed per step (K).
    pub num_draft_tokens: Option<u32>,
    /// Cost of one draft forward relative to one target forward (`c_draft / c_target`).
    pub draft_cost_ratio: Option<f64>,
}

/// The step's speculative-decoding figures, or `None` when nothing shows speculation (no
/// server drafts, and no `--spec-k` to read chunk sizes with).
pub fn speculative(
    server: Option<&ServerReport>,
    tally: &ClientTally,
    inputs: &SpeculativeInputs,
) -> Option<SpeculativeReport> {
    let spec = server.map(|s| &s.measurement.speculative);
    if let Some(spec) = spec {
        if let (Some(drafts), Some(proposed), Some(accepted)) =
            (spec.drafts, spec.draft_tokens, spec.accepted_tokens)
            && drafts > 0.0
        {
            return Some(from_counters(drafts, proposed, accepted, inputs));
        }
        if let Some(length) = spec.accept_length_gauge {
            return Some(from_gauges(length, spec.accept_rate_gauge, inputs));
        }
    }
    let k = inputs.num_draft_tokens?;
    Some(from_chunks(tally, f64::from(k), inputs))
}

fn speedup(accepted_per_draft: Option<f64>, k: Option<f64>, inputs: &SpeculativeInputs) -> Figure {
    Figure::new(
        "×",
        "(accepted_per_draft + 1) / (K · draft_cost_ratio + 1)",
        &[
            ("accepted_per_draft", accepted_per_draft),
            ("K", k),
            ("draft_cost_ratio", inputs.draft_cost_ratio),
        ],
        |i| {
            (input(i, "accepted_per_draft") + 1.0)
                / (input(i, "K") * input(i, "draft_cost_ratio") + 1.0)
        },
    )
}

fn from_counters(
    drafts: f64,
    proposed: f64,
    accepted: f64,
    inputs: &SpeculativeInputs,
) -> SpeculativeReport {
    let counters = [
        ("drafts", Some(drafts)),
        ("draft_tokens", Some(proposed)),
        ("accepted_tokens", Some(accepted)),
    ];
    let k = Figure::new("tokens", "draft_tokens / drafts", &counters[..2], |i| {
        input(i, "draft_tokens") / input(i, "drafts")
    });
    SpeculativeReport {
        source: "server_counters".into(),
        acceptance_rate: Figure::new(
            "fraction",
            "accepted_tokens / draft_tokens",
            &counters[1..],
            |i| input(i, "accepted_tokens") / input(i, "draft_tokens"),
        ),
        mean_accepted_length: Figure::new(
            "tokens",
            "1 + accepted_tokens / drafts",
            &[counters[0], counters[2]],
            |i| 1.0 + input(i, "accepted_tokens") / input(i, "drafts"),
        ),
        theoretical_speedup: speedup(Some(accepted / drafts), k.value, inputs),
        num_draft_tokens: k,
    }
}

fn from_gauges(length: f64, rate: Option<f64>, inputs: &SpeculativeInputs) -> SpeculativeReport {
    let k = given_k(inputs);
    SpeculativeReport {
        source: "server_gauges".into(),
        acceptance_rate: Figure::new(
            "fraction",
            "spec_accept_rate (server gauge, mean)",
            &[("spec_accept_rate", rate)],
            |i| input(i, "spec_accept_rate"),
        ),
        mean_accepted_length: Figure::new(
            "tokens",
            "spec_accept_length (server gauge, mean)",
            &[("spec_accept_length", Some(length))],
            |i| input(i, "spec_accept_length"),
        ),
        theoretical_speedup: speedup(Some(length - 1.0), k.value, inputs),
        num_draft_tokens: k,
    }
}

fn given_k(inputs: &SpeculativeInputs) -> Figure {
    Figure::new(
        "tokens",
        "K (--spec-k)",
        &[("K", inputs.num_draft_tokens.map(f64::from))],
        |i| input(i, "K"),
    )
}

fn from_chunks(tally: &ClientTally, k: f64, inputs: &SpeculativeInputs) -> SpeculativeReport {
    let chunks = (tally.chunks_after_first > 0).then_some(tally.chunks_after_first as f64);
    let tokens = chunks.map(|_| tally.tokens_after_first as f64);
    let length = Figure::new(
        "tokens",
        "tokens_after_first_chunk / chunks_after_first",
        &[
            ("tokens_after_first_chunk", tokens),
            ("chunks_after_first", chunks),
        ],
        |i| input(i, "tokens_after_first_chunk") / input(i, "chunks_after_first"),
    );
    SpeculativeReport {
        source: "chunks".into(),
        acceptance_rate: Figure::new(
            "fraction",
            "(mean_accepted_length − 1) / K",
            &[("mean_accepted_length", length.value), ("K", Some(k))],
            |i| (input(i, "mean_accepted_length") - 1.0) / input(i, "K"),
        ),
        theoretical_speedup: speedup(length.value.map(|l| l - 1.0), Some(k), inputs),
        mean_accepted_length: length,
        num_draft_tokens: given_k(inputs),
    }
}
