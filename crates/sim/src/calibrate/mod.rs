//! Calibration: the constants of the one batching engine fitted to measurements of a real
//! server, so the simulator predicts that server. [`Facts`] are what the server says about
//! itself (slots, context, model width); [`Constants`] are the fitted rates and overheads;
//! [`calibrated_config`] turns both into an ordinary [`SimConfig`] that every virtual-time
//! command accepts; [`predict`] replays one probe shape in virtual time; [`fit`](fit::fit)
//! finds the constants whose predictions match the measured probes.

mod coordinates;
pub mod fit;
mod linalg;
mod predict;
mod unreported;
mod verdict;

pub use fit::{ConstantFit, Fit, FitError, MeasuredProbe, POOR_RMS, Residual, fit};
pub use predict::{Predicted, ProbeShape, Tail, predict, speed_factor};
pub use unreported::{fit_unknown_budget, queued_at_twice};

use goodput_protocol::ChatMessage;
use goodput_protocol::hardware::{DType, GpuSpec, ModelSpec};
use serde::{Deserialize, Serialize};

use crate::config::{
    BatchingConfig, EngineConfig, EnginePolicy, QueueOrder, Roofline, Routing, SimConfig,
    SlotPromptSimilarity, StepOverheads,
};

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// What a server says about itself (llama.cpp `/props`, `/slots`, `/v1/models` metadata);
/// every field has a default for servers that say nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Facts {
    /// Name the server serves the model under.
    pub model_name: String,
    /// Sequences the server batches (llama.cpp slots, vLLM `max_num_seqs`).
    pub slots: u32,
    /// Context of one slot, tokens (prompt plus answer).
    pub context_per_slot: u32,
    /// Tokens one engine step may carry (llama.cpp `n_batch`).
    pub batch_tokens: u32,
    /// Model width (`n_embd`).
    pub hidden: u32,
    /// Vocabulary size.
    pub vocab: u32,
    /// Parameter count.
    pub params: f64,
    /// Weight format.
    pub weight_dtype: DType,
    /// KV cache format.
    pub kv_dtype: DType,
    /// Tokens the server's chat template adds beyond OpenAI's per-message rule (measured:
    /// [`chat_template_tokens`]); negative when it counts fewer.
    pub chat_template_tokens: i32,
    /// Micro-batch size of a server whose slots each have a KV stream (llama.cpp with
    /// `-np N`); `None`: it runs each step as one batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot_ubatch_tokens: Option<u32>,
    /// How such a server picks a slot by prompt similarity (llama.cpp); `None`: by age only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot_prompt_similarity: Option<SlotPromptSimilarity>,
    /// Whether the slots share one KV cache of `context_per_slot` tokens (llama.cpp's unified
    /// cache) rather than each having that much.
    #[serde(default)]
    pub shared_kv: bool,
    /// Which waiting request a free slot admits next (read by `goodput calibrate`'s
    /// queue-order probe; first come first served when not read).
    #[serde(default, skip_serializing_if = "QueueOrder::is_fifo")]
    pub queue_order: QueueOrder,
    /// Tokens the server's KV cache holds, when its metrics say; `None`: every slot's context
    /// (or the one shared), so the cache never runs out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_tokens: Option<u64>,
    /// Whose admission and preemption the server's are (its metrics' family; vLLM's when
    /// unknown).
    #[serde(default)]
    pub engine_policy: EnginePolicy,
    /// Whether the server reuses the KV of prompt prefixes it has seen (its metrics say).
    #[serde(default)]
    pub prefix_caching: bool,
    /// Engines behind the endpoint, each with its own batch, KV cache and steps (vLLM's
    /// data-parallel engines, its metrics say): `slots` and `kv_tokens` are theirs together,
    /// each engine an equal share, `batch_tokens` one engine's step.
    #[serde(default = "one_engine", skip_serializing_if = "is_one_engine")]
    pub engines: u32,
    /// Whether a long prompt ran beside a decoding stream without growing any of its steps
    /// (`goodput calibrate`'s step-budget probe): the server's prompts take nothing from its
    /// decodes' steps, so a fit with the budget unknown prefers no step bound.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub prompts_beside_decodes: bool,
}

fn one_engine() -> u32 {
    1
}

fn is_one_engine(engines: &u32) -> bool {
    *engines <= 1
}

impl Default for Facts {
    fn default() -> Self {
        Facts {
            model_name: "calibrated".to_string(),
            slots: 1,
            context_per_slot: 4096,
            batch_tokens: 2048,
            hidden: 4096,
            vocab: 32_000,
            params: 7.0e9,
            weight_dtype: DType::Bf16,
            kv_dtype: DType::Fp16,
            chat_template_tokens: 0,
            slot_ubatch_tokens: None,
            slot_prompt_similarity: None,
            shared_kv: false,
            queue_order: QueueOrder::Fifo,
            kv_tokens: None,
            engine_policy: EnginePolicy::Vllm,
            prefix_caching: false,
            engines: 1,
            prompts_beside_decodes: false,
        }
    }
}

impl Facts {
    /// The replicas the configuration runs: one per engine, within what a configuration holds.
    pub fn replicas(&self) -> u32 {
        self.engines.clamp(1, crate::config::MAX_REPLICAS)
    }

    /// The model as one equivalent layer of the server's width, vocabulary and parameter
    /// count (tied embeddings). Layer count and head shape cannot be read from an
    /// OpenAI-compatible server; the fitted rates are per this shape, so predictions do not
    /// depend on them.
    pub fn model(&self) -> ModelSpec {
        let d = f64::from(self.hidden.max(64));
        let head_dim = if self.hidden.is_multiple_of(64) {
            64
        } else {
            1
        };
        let heads = (self.hidden.max(1) / head_dim).max(1);
        let layer = (self.params - f64::from(self.vocab) * d - d).max(4.0 * d * d + 2.0 * d);
        // layer = 4d² (q, k, v, o at full width) + 3·d·ffn (SwiGLU) + 2d (norms).
        let ffn = ((layer - 4.0 * d * d - 2.0 * d) / (3.0 * d))
            .round()
            .max(1.0);
        ModelSpec {
            name: self.model_name.clone(),
            layers: 1,
            hidden: self.hidden.max(1),
            heads,
            kv_heads: heads,
            head_dim,
            ffn: ffn as u32,
            vocab: self.vocab.max(1),
            tied_embeddings: true,
            max_context: self.context_per_slot.max(1),
            weight_dtype: self.weight_dtype,
            kv_dtype: self.kv_dtype,
        }
    }
}

/// The fitted constants: achieved rates of each operator class, the slowdown of GEMMs over few
/// tokens, and the latency outside the engine. That latency and the per-step time add the same
/// to a lone request's TTFT, but only the step is in every TPOT and holds the engine while a
/// queue waits, so decode probes and the concurrency sweep tell them apart (a server answering
/// every request after a fixed 100 ms, whatever its prompt and load, is all latency).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Constants {
    /// Per-step time, expressed as the bandwidth the weights stream at, GB/s.
    pub weight_gb_per_sec: f64,
    /// Rate of the weight GEMMs at a full batch, GFLOP/s (prompt tokens).
    pub gemm_gflops: f64,
    /// Rate of causal prompt attention, GFLOP/s (grows with prompt length squared).
    pub attention_gflops: f64,
    /// Bandwidth decode attention reads the KV cache at, GB/s (grows with context).
    pub kv_gb_per_sec: f64,
    /// How much slower per token a GEMM over `tokens` columns runs than at the full rate,
    /// at the decode batches and short prompts the probes measured, ascending.
    pub batch_factors: Vec<BatchFactor>,
    /// From this many tokens on, GEMMs run at the full rate (the shortest prefill probe).
    pub full_rate_tokens: u32,
    /// Delay before the engine sees a request (network, HTTP, tokenisation, queues in front
    /// of the engine), ms: it adds to TTFT without taking engine time (the engine's
    /// `frontend_us`).
    pub latency_ms: f64,
    /// Whether that latency holds the request's sequence slot (the engine's `slot_setup_us`:
    /// a queued request waits for it after a slot frees) rather than passing before the queue
    /// (`frontend_us`). Only requests queued for a slot tell the two apart: the plan's probe
    /// at twice the slots ([`fit()`] keeps the placement that fits the probes better).
    #[serde(default)]
    pub latency_holds_slot: bool,
}

/// One point of the small-batch GEMM slowdown.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BatchFactor {
    /// Tokens in the step (columns of its GEMMs).
    pub tokens: u32,
    /// Time per token relative to the full rate.
    pub factor: f64,
}

/// The rates' and the latency's names and units, in the order of [`Constants::values`].
const RATE_NAMES: [(&str, &str); 5] = [
    ("weight_bandwidth", "GB/s"),
    ("gemm_rate", "GFLOP/s"),
    ("attention_rate", "GFLOP/s"),
    ("kv_read_bandwidth", "GB/s"),
    ("frontend_latency", "ms"),
];

impl Constants {
    /// Names and units, in the order of [`Constants::values`]: the four rates, the latency
    /// (`frontend_latency`, or `slot_setup_latency` when it holds the slot), then one
    /// `gemm_factor@N` per batch point.
    pub fn names(&self) -> Vec<(String, &'static str)> {
        let rates = RATE_NAMES.iter().map(|(n, u)| {
            let name = match *n {
                "frontend_latency" if self.latency_holds_slot => "slot_setup_latency",
                name => name,
            };
            (name.to_string(), *u)
        });
        let points = self
            .batch_factors
            .iter()
            .map(|p| (format!("gemm_factor@{}", p.tokens), "×"));
        rates.chain(points).collect()
    }

    /// Every fitted value.
    pub fn values(&self) -> Vec<f64> {
        let rates = [
            self.weight_gb_per_sec,
            self.gemm_gflops,
            self.attention_gflops,
            self.kv_gb_per_sec,
            self.latency_ms,
        ];
        rates
            .into_iter()
            .chain(self.batch_factors.iter().map(|p| p.factor))
            .collect()
    }

    /// These constants with `values` (in [`Constants::values`] order) in place of theirs;
    /// missing values keep the current ones.
    pub fn with_values(&self, values: &[f64]) -> Constants {
        let mut out = self.clone();
        let get = |i: usize, current: f64| values.get(i).copied().unwrap_or(current);
        out.weight_gb_per_sec = get(0, self.weight_gb_per_sec);
        out.gemm_gflops = get(1, self.gemm_gflops);
        out.attention_gflops = get(2, self.attention_gflops);
        out.kv_gb_per_sec = get(3, self.kv_gb_per_sec);
        out.latency_ms = get(4, self.latency_ms);
        for (i, point) in out.batch_factors.iter_mut().enumerate() {
            point.factor = get(RATE_NAMES.len() + i, point.factor);
        }
        out
    }

    /// The engine's `gemm_batch_factors`: the fitted points, then 1 at the full rate.
    fn engine_batch_factors(&self) -> Vec<[f64; 2]> {
        let mut points: Vec<[f64; 2]> = self
            .batch_factors
            .iter()
            .filter(|p| p.tokens < self.full_rate_tokens)
            .map(|p| [f64::from(p.tokens.max(1)), p.factor])
            .collect();
        if !points.is_empty() {
            points.push([f64::from(self.full_rate_tokens), 1.0]);
        }
        points
    }
}

/// The accelerator whose peaks are the fastest fitted rates and whose efficiencies are each
/// class's share of them, so every efficiency stays in (0, 1].
fn calibrated_accelerator(c: &Constants, memory_gib: f64) -> GpuSpec {
    let bandwidth = c.weight_gb_per_sec.max(c.kv_gb_per_sec);
    let flops = c.gemm_gflops.max(c.attention_gflops);
    GpuSpec {
        name: "calibrated".to_string(),
        bf16_tflops: flops / 1e3,
        fp8_tflops: 0.0,
        hbm_tb_per_sec: bandwidth / 1e3,
        memory_gib,
        bandwidth_efficiency: c.weight_gb_per_sec / bandwidth,
        kv_read_efficiency: c.kv_gb_per_sec / bandwidth,
        gemm_efficiency_bf16: c.gemm_gflops / flops,
        gemm_efficiency_fp8: 1.0,
        // A calibrated server sums its rooflines (`roofline = "sum"`): no overlap to lose.
        gemm_ridge_loss: 0.0,
        attention_efficiency: c.attention_gflops / flops,
        interconnect_gb_per_sec: 1.0,
        all_reduce_us: 0.0,
        all_reduce_bus_efficiency: 1.0,
    }
}

impl Facts {
    /// The KV pool a calibrated configuration gets, tokens: what the server's metrics state,
    /// else every slot's context (one context when the slots share a cache).
    pub fn kv_pool_tokens(&self) -> u64 {
        let sharing = if self.shared_kv { 1 } else { self.slots.max(1) };
        self.kv_tokens
            .unwrap_or(u64::from(sharing) * u64::from(self.context_per_slot.max(1)))
    }
}

/// The simulator configuration of a server with `facts` and fitted `constants`: the batching
/// engine with the server's slots and context, admission in its queue order, a KV pool of
/// what its metrics state (admission and preemption then its family's) or of every slot's
/// context (never running out), the calibrated accelerator, the fitted latency as its
/// frontend delay and no other overhead, and the server's micro-batches by slot when it has
/// them; a server of several engines as that many replicas, each with its share of the slots
/// and the KV pool, a request going to the one with the fewest in flight.
pub fn calibrated_config(facts: &Facts, constants: &Constants) -> SimConfig {
    let model = facts.model();
    let block_size = 16;
    let engines = facts.replicas();
    let kv_tokens = facts.kv_pool_tokens().div_ceil(u64::from(engines));
    let kv_gib = kv_tokens as f64 * model.kv_bytes_per_token() / GIB;
    // Enough memory for the weights, the reserve the deployment arithmetic sets aside and the
    // slots' KV cache; the pool itself is fixed by `kv_blocks_override`.
    let memory_gib = (model.weight_bytes() / GIB + kv_gib + 8.0).ceil();
    let engine = BatchingConfig {
        gpu: calibrated_accelerator(constants, memory_gib),
        model,
        tensor_parallel: 1,
        gpu_memory_utilization: 1.0,
        max_model_len: Some(facts.context_per_slot.max(1)),
        max_num_seqs: Some(facts.slots.div_ceil(engines).max(1)),
        max_num_batched_tokens: Some(facts.batch_tokens.max(1)),
        block_size,
        chunked_prefill: true,
        prefix_caching: facts.prefix_caching,
        watermark: 0.0,
        max_waiting: 100_000,
        kv_blocks_override: Some(kv_tokens.div_ceil(u64::from(block_size)) + 1),
        policy: facts.engine_policy,
        overheads: Some(fitted_overheads(constants)),
        speculative: None,
        roofline: Roofline::Sum,
        gemm_batch_factors: constants.engine_batch_factors(),
        slot_ubatch_tokens: facts.slot_ubatch_tokens,
        slot_prompt_similarity: facts
            .slot_prompt_similarity
            .filter(|_| facts.slot_ubatch_tokens.is_some()),
        // The probes cannot tell the window: staggered beyond the slots (`--check` predicts
        // both patterns there).
        launch_window_us: None,
        slot_setup_us: (constants.latency_holds_slot && constants.latency_ms > 0.0)
            .then_some(constants.latency_ms * 1e3),
        queue_order: facts.queue_order,
    };
    SimConfig {
        engine: EngineConfig::Batching(engine),
        served_model_name: Some(facts.model_name.clone()),
        chat_template_tokens: facts.chat_template_tokens,
        replicas: engines,
        routing: if engines > 1 {
            Routing::LeastLoaded
        } else {
            Routing::default()
        },
        ..SimConfig::default()
    }
}

/// The fitted latency as the frontend's delay when it does not hold the slot; no other
/// overhead (the fitted accelerator prices the steps).
fn fitted_overheads(constants: &Constants) -> StepOverheads {
    StepOverheads {
        frontend_us: if constants.latency_holds_slot {
            0.0
        } else {
            constants.latency_ms * 1e3
        },
        ..StepOverheads::NONE
    }
}

/// Tokens a calibrated configuration's simulator counts for one user message beyond its text
/// (its chat rule: the message's markers, the role, the reply's priming).
fn simulator_chat_tokens() -> f64 {
    let tokenizer = crate::text::Tokenizer::new(SimConfig::default().prompt_tokenizer);
    tokenizer.encode_chat(&[ChatMessage::new("user", "")]).len() as f64
}

/// The server's chat-template tokens beyond what the simulator counts: the median, over the
/// probes, of the prompt tokens the server counted less the simulator's count of the same
/// one-message chat (`(input tokens sent, mean prompt tokens the server counted)` pairs).
/// A server whose tokenizer splits text differently shifts it by that difference; one that
/// counts a chat as its text alone (a plain word count) gives minus the simulator's markers.
pub fn chat_template_tokens(probes: &[(u32, f64)]) -> i32 {
    let chat = simulator_chat_tokens();
    let mut extra: Vec<f64> = probes
        .iter()
        .map(|(input, counted)| counted - f64::from(*input) - chat)
        .filter(|v| v.is_finite())
        .collect();
    if extra.is_empty() {
        return 0;
    }
    extra.sort_by(f64::total_cmp);
    let median = extra[extra.len() / 2];
    median
        .round()
        .clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32
}

/// Answer tokens of a prefill probe: few enough that its TTFT is the prompt's cost.
pub const PREFILL_ANSWER: u32 = 4;

/// The concurrency sweep: every level from 2 to 4 (where a CPU's GEMM kernels change most),
/// then doubling, and the slots themselves.
fn sweep(slots: u32) -> Vec<u32> {
    let mut levels: Vec<u32> = (2..=slots.min(4)).collect();
    let mut next = 8;
    while next < slots {
        levels.push(next);
        next *= 2;
    }
    if slots > 4 {
        levels.push(slots);
    }
    levels
}

/// Where the fit places the GEMM slowdown's points: every decode batch the probes form (their
/// concurrency, capped at the slots) and every prompt a single client sent that is at most half
/// the shortest prefill probe's, which is where GEMMs are taken to reach the full rate. Returns the points and
/// that full-rate token count.
pub fn batch_layout(facts: &Facts, probes: &[ProbeShape]) -> (Vec<u32>, u32) {
    let slots = facts.slots.max(1);
    let full = probes
        .iter()
        .filter(|p| p.output_tokens <= PREFILL_ANSWER)
        .map(|p| p.prompt_tokens)
        .min()
        .unwrap_or(64)
        .max(slots + 1);
    // A prompt runs alone only at concurrency 1 (clients sent together share a step); one
    // within a factor of 2 of the full rate is the same length as far as the probes can tell
    // (the server counts the same prompt ±2 tokens from probe to probe).
    let short = probes
        .iter()
        .filter(|p| p.concurrency == 1)
        .map(|p| p.prompt_tokens)
        .filter(|&n| n.saturating_mul(2) <= full);
    let mut points: Vec<u32> = probes
        .iter()
        .map(|p| p.concurrency.clamp(1, slots))
        .chain(short)
        .chain([1])
        .filter(|&n| n < full)
        .collect();
    points.sort_unstable();
    points.dedup();
    (points, full)
}

/// The probes a calibration runs, in order: batch-1 decode at a short and a long context,
/// prefill at three prompt lengths, a concurrency sweep up to the slots, every slot at a long
/// context, then twice the slots (queueing).
/// Lengths are scaled to the slot's context; `requests` of each shape at concurrency 1.
pub fn plan(facts: &Facts, requests: u32) -> Vec<ProbeShape> {
    let (longest, answer) = plan_lengths(facts);
    let shape = |concurrency: u32, prompt_tokens: u32, output_tokens: u32| ProbeShape {
        concurrency,
        prompt_tokens,
        output_tokens,
        requests: requests.max(1) * concurrency,
    };
    let mut probes = vec![
        shape(1, 16, answer),
        shape(1, longest, answer),
        shape(1, longest / 8, PREFILL_ANSWER),
        shape(1, longest / 2, PREFILL_ANSWER),
    ];
    let slots = facts.slots.max(1);
    for concurrency in sweep(slots) {
        probes.push(sweep_probe(facts, requests, concurrency));
    }
    // Every slot decoding at a long context: how the KV reads of a batch add up.
    probes.push(shape(slots, longest / 2, answer));
    probes.push(sweep_probe(facts, requests.max(QUEUED_ROUNDS), slots * 2));
    probes
}

/// Rounds a probe beyond the slots sends at the least: in one, as many requests as clients,
/// the slots' first wave is half of them and the median (nearest rank, as the client takes it)
/// is that wave's last — no queueing seen, and one request late to the wave flips it.
const QUEUED_ROUNDS: u32 = 2;

/// The plan's longest prompt and its answer length, from the context a slot holds.
fn plan_lengths(facts: &Facts) -> (u32, u32) {
    let ctx = facts.context_per_slot.max(64);
    ((ctx / 2).clamp(16, 1024), (ctx / 8).clamp(8, 48))
}

/// The plan's sweep shape (short prompts, the plan's answers) at `concurrency`.
fn sweep_probe(facts: &Facts, requests: u32, concurrency: u32) -> ProbeShape {
    let (longest, answer) = plan_lengths(facts);
    ProbeShape {
        concurrency,
        prompt_tokens: 64.min(longest),
        output_tokens: answer,
        requests: requests.max(1) * concurrency,
    }
}

/// The probe of [`plan`]'s sweep with every slot busy, which `calibrate --check` measures again
/// beside the held-out shapes: the fit reproduced it at calibration, so the model's error on it
/// now is mostly how far the server's speed has moved since.
pub fn speed_reference(facts: &Facts, requests: u32) -> ProbeShape {
    sweep_probe(facts, requests, facts.slots.max(1))
}

/// A held-out workload for `calibrate --check`, none of its shapes probed by [`plan`]: the
/// slots filled with prompts four times the sweep's and with answers four times the sweep's,
/// then twice the slots (queueing) at the sweep's own lengths.
pub fn held_out(facts: &Facts, requests: u32) -> Vec<ProbeShape> {
    let ctx = facts.context_per_slot.max(64);
    let prompt = 64.min(ctx / 8).max(8);
    let answer = (ctx / 8).clamp(8, 48) / 2;
    let slots = facts.slots.max(1);
    let shape = |concurrency: u32, prompt_tokens: u32, output_tokens: u32| ProbeShape {
        concurrency,
        prompt_tokens,
        output_tokens,
        requests: requests.max(1) * concurrency,
    };
    vec![
        shape(slots, prompt * 4, answer),
        shape(slots, prompt, answer * 4),
        ProbeShape {
            requests: requests.max(QUEUED_ROUNDS) * slots * 2,
            ..shape(slots * 2, prompt, answer)
        },
    ]
}

#[cfg(test)]
#[path = "mod_tests.rs"]
mod tests;
