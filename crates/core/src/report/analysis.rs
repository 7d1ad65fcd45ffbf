//! `steps[].utilisation`, `speculative_decoding` and `cost`: figures derived from a step and
//! the hardware. Filled by [`crate::analysis`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A derived figure with its formula and inputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// The value; `None` when an input is missing.
    pub value: Option<f64>,
    /// Its unit.
    pub unit: String,
    /// How it is computed, in terms of the inputs' names.
    pub formula: String,
    /// The inputs it was computed from.
    pub inputs: BTreeMap<String, f64>,
    /// Inputs that were not available (the value is then `None`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
}

/// Utilisation figures of one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UtilisationReport {
    /// Model name.
    pub model: String,
    /// Accelerator name.
    pub accelerator: String,
    /// Accelerators in total.
    pub accelerators: u32,
    /// Accelerators per replica.
    pub tensor_parallel: u32,
    /// Replicas.
    pub replicas: u32,
    /// Bytes of weights.
    pub weight_bytes: Figure,
    /// KV cache bytes per token.
    pub kv_bytes_per_token: Figure,
    /// Tokens the KV caches of all replicas hold.
    pub kv_capacity_tokens: Figure,
    /// Sequences of the measured mean length (prompt + answer) that fit at once.
    pub max_sequences: Figure,
    /// Achieved model FLOPs utilisation, 0–1.
    pub mfu: Figure,
    /// Achieved HBM bandwidth ÷ peak, 0–1 (decode estimate).
    pub hbm_bandwidth_utilisation: Figure,
    /// Bandwidth-bound floor of the time per output token at batch 1, ms.
    pub tpot_floor_ms: Figure,
}

/// Speculative-decoding figures of one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpeculativeReport {
    /// `server_counters`, `server_gauges` or `chunks`.
    pub source: String,
    /// Draft tokens proposed per step (K).
    pub num_draft_tokens: Figure,
    /// Accepted ÷ proposed draft tokens.
    pub acceptance_rate: Figure,
    /// Tokens produced per verification step: 1 + accepted per draft.
    pub mean_accepted_length: Figure,
    /// Decode speedup over no speculation, if the draft cost is known.
    pub theoretical_speedup: Figure,
}

/// Cost and energy figures of one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CostReport {
    /// Accelerators priced and powered.
    pub accelerators: u32,
    /// Where the power figure came from: `--watts` or the scraped metric's name.
    pub power_source: Option<String>,
    /// Price of the deployment per hour.
    pub cost_per_hour: Figure,
    /// Price per 1,000 completed requests.
    pub cost_per_1k_requests: Figure,
    /// Price per million output tokens.
    pub cost_per_million_output_tokens: Figure,
    /// Price per million input + output tokens.
    pub cost_per_million_total_tokens: Figure,
    /// Power drawn by the deployment, watts.
    pub power_watts: Figure,
    /// Joules per output token.
    pub energy_per_output_token_joules: Figure,
    /// kWh per million output tokens.
    pub kwh_per_million_output_tokens: Figure,
    /// kWh per million input + output tokens.
    pub kwh_per_million_total_tokens: Figure,
}
