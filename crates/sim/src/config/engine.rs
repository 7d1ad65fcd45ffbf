//! Engine configurations: the continuous-batching engine (model, accelerator, scheduler,
//! KV cache, overheads, speculative decoding) and the fixed-timing engine.

use std::time::Duration;

use goodput_protocol::hardware::{Deployment, GpuSpec, ModelSpec};
use serde::{Deserialize, Serialize};

use super::QueueOrder;
use super::policy::{BatchLimits, EnginePolicy, Roofline, StepOverheads};
use super::{ConfigError, duration_ms, gpu_ref, model_ref, preset_gpu, preset_model};

/// The batching engine's default bound on its waiting queue: in effect none, as the engines it
/// mimics keep none by default (vLLM's scheduler queue is unbounded; SGLang's
/// `--max-queued-requests` defaults to none; `trtllm-bench` queues thousands of requests at
/// once). 2^20 requests is a safeguard for the simulator's memory, not a server's policy.
pub const UNBOUNDED_WAITING: usize = 1 << 20;

/// A continuous-batching engine (vLLM, SGLang or TensorRT-LLM style) on modelled hardware.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BatchingConfig {
    /// The model (a preset name or a full description).
    #[serde(with = "model_ref")]
    pub model: ModelSpec,
    /// The accelerator (a preset name or a full description).
    #[serde(with = "gpu_ref")]
    pub gpu: GpuSpec,
    /// Accelerators per replica (tensor parallel degree).
    pub tensor_parallel: u32,
    /// Fraction of accelerator memory the server may use.
    pub gpu_memory_utilization: f64,
    /// Longest prompt plus output accepted (default: the model's context length).
    pub max_model_len: Option<u32>,
    /// Most sequences in one step (default: the engine's own default on this accelerator,
    /// [`EnginePolicy::default_batch_limits`]; read it through [`BatchingConfig::max_num_seqs`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_num_seqs: Option<u32>,
    /// Token budget of one step (default: the engine's own, as for `max_num_seqs`; read it
    /// through [`BatchingConfig::max_num_batched_tokens`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_num_batched_tokens: Option<u32>,
    /// Tokens per KV block.
    pub block_size: u32,
    /// Split long prompts across steps (otherwise a prompt is computed in one step).
    pub chunked_prefill: bool,
    /// Reuse KV blocks of identical prompt prefixes.
    pub prefix_caching: bool,
    /// Fraction of KV blocks kept free when admitting new requests.
    pub watermark: f64,
    /// Most requests waiting for admission; beyond it requests get HTTP 429. Default
    /// [`UNBOUNDED_WAITING`]: vLLM, SGLang and TensorRT-LLM queue whatever they are sent; set it
    /// to mimic a server or gateway that caps its queue (TGI's `--max-concurrent-requests`).
    pub max_waiting: usize,
    /// Override the KV pool size in blocks (default: derived from memory).
    pub kv_blocks_override: Option<u64>,
    /// Whose admission, preemption and overheads to mimic.
    pub policy: EnginePolicy,
    /// Runtime overheads (default: the policy's).
    pub overheads: Option<StepOverheads>,
    /// Speculative decoding (off when absent).
    pub speculative: Option<SpeculativeConfig>,
    /// How a step's weight reads and arithmetic combine (`max`: a GPU; `sum`: a CPU server).
    pub roofline: Roofline,
    /// How much slower per token a GEMM over few tokens runs than a large batch:
    /// `[tokens, factor]` points, ascending, interpolated in log–log; the first point's factor
    /// below it, the last one's above it. Empty (the default): every batch at the GEMM rate.
    /// `goodput calibrate` fits it (a CPU's kernels use their width only from some columns on).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub gemm_batch_factors: Vec<[f64; 2]>,
    /// Micro-batches by slot, as llama.cpp runs a step when every slot has its own KV stream
    /// (`-np N` without `--kv-unified`): a request takes the free slot released longest ago
    /// (never used first, highest number first), and a step runs as micro-batches, each a
    /// run of consecutive slots giving it the same number of tokens, at most this many
    /// tokens (`--ubatch-size`), each costed as a step of its own. Unset (the default): every
    /// step is one batch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slot_ubatch_tokens: Option<u32>,
    /// With `slot_ubatch_tokens`: llama.cpp's `--slot-prompt-similarity`, a request takes a
    /// free slot whose last prompt shares enough of its own before the one released longest
    /// ago. Unset (the default): the slot released longest ago.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slot_prompt_similarity: Option<SlotPromptSimilarity>,
    /// Host time, µs, that a step launching requests which waited for a free sequence slot
    /// spends before its batch forms (llama-server drains its task queue while it launches
    /// them, saving each released slot's prompt to its cache): requests reaching the engine
    /// meanwhile join that batch, so clients re-sending the moment their answers end stay in
    /// step beyond the slots. Unset (the default): that step starts as the last one ends, and
    /// a request arriving then waits for the next — one client's prompt rides in the others'
    /// decode steps.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launch_window_us: Option<f64>,
    /// Time, µs, a request holds its sequence slot before its prompt can be scheduled: work
    /// the server does once it has taken a slot and before its first step (a handler that
    /// waits a fixed time per request, a per-request load), costing the other sequences
    /// nothing. A queued request waits for it after a slot frees, where the frontend delay
    /// (`overheads.frontend_us`) passes before the queue. Unset (the default): none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slot_setup_us: Option<f64>,
    /// Which waiting request a free sequence slot admits next: `fifo` (the default),
    /// `lifo`, `shortest-prompt`, `longest-prompt`, `shortest-output` or `longest-output`
    /// (by `max_tokens`; SGLang's `lof`). A request preempted for lack of KV blocks goes back
    /// to the head of the queue whatever the order.
    #[serde(default, skip_serializing_if = "QueueOrder::is_fifo")]
    pub queue_order: QueueOrder,
}

/// How llama.cpp picks a slot by prompt similarity: among the free slots that have held a
/// prompt, the first whose longest common prefix with the new prompt is the largest fraction
/// of it, if that fraction exceeds `threshold`. The engine knows one common prefix: the
/// tokens every prompt starts with (the chat template's header), so every used free slot ties
/// and the lowest numbered one is taken when `shared_prefix_tokens / prompt tokens` exceeds the
/// threshold — short prompts return to the slot just released, long ones go by age.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlotPromptSimilarity {
    /// The fraction of the new prompt a slot's last prompt must share (llama.cpp: 0.1).
    pub threshold: f64,
    /// Tokens every prompt shares at its start (the chat template's header, BOS included).
    pub shared_prefix_tokens: u32,
}

impl SlotPromptSimilarity {
    /// Whether a prompt of `prompt_tokens` goes to a used slot by similarity.
    pub fn applies(&self, prompt_tokens: u32) -> bool {
        prompt_tokens > 0
            && f64::from(self.shared_prefix_tokens) / f64::from(prompt_tokens) > self.threshold
    }
}

impl Default for BatchingConfig {
    fn default() -> Self {
        BatchingConfig {
            model: preset_model("llama-3.1-8b"),
            gpu: preset_gpu("h100"),
            tensor_parallel: 1,
            gpu_memory_utilization: 0.9,
            max_model_len: None,
            max_num_seqs: None,
            max_num_batched_tokens: None,
            block_size: 16,
            chunked_prefill: true,
            prefix_caching: true,
            watermark: 0.01,
            max_waiting: UNBOUNDED_WAITING,
            kv_blocks_override: None,
            policy: EnginePolicy::Vllm,
            overheads: None,
            speculative: None,
            roofline: Roofline::Max,
            gemm_batch_factors: Vec::new(),
            slot_ubatch_tokens: None,
            slot_prompt_similarity: None,
            launch_window_us: None,
            slot_setup_us: None,
            queue_order: QueueOrder::Fifo,
        }
    }
}

impl BatchingConfig {
    /// The model on its accelerators.
    pub fn deployment(&self) -> Deployment {
        Deployment {
            model: self.model.clone(),
            gpu: self.gpu.clone(),
            tensor_parallel: self.tensor_parallel,
            gpu_memory_utilization: self.gpu_memory_utilization,
            memory_fraction: self.policy.memory_fraction(),
        }
    }

    /// Whether a step that carries prompts carries nothing else
    /// ([`EnginePolicy::runs_prompts_alone`] with this engine's chunked prefill).
    pub fn runs_prompts_alone(&self) -> bool {
        self.policy.runs_prompts_alone(self.chunked_prefill)
    }

    /// The overheads charged: the configured ones, or the policy's.
    pub fn effective_overheads(&self) -> StepOverheads {
        self.overheads
            .clone()
            .unwrap_or_else(|| self.policy.overheads())
    }

    /// The same engine running `factor` times as fast: every rate (compute, memory and
    /// interconnect bandwidth) times `factor`, every fixed cost (overheads, all-reduce
    /// latency) divided by it, so every step takes `1 / factor` of its time.
    pub(crate) fn at_speed(&self, factor: f64) -> BatchingConfig {
        let mut config = self.clone();
        let gpu = &mut config.gpu;
        gpu.bf16_tflops *= factor;
        gpu.fp8_tflops *= factor;
        gpu.hbm_tb_per_sec *= factor;
        gpu.interconnect_gb_per_sec *= factor;
        gpu.all_reduce_us /= factor;
        let o = self.effective_overheads();
        config.overheads = Some(StepOverheads {
            per_step_us: o.per_step_us / factor,
            per_layer_us: o.per_layer_us / factor,
            per_sequence_us: o.per_sequence_us / factor,
            per_prefill_us: o.per_prefill_us / factor,
            frontend_us: o.frontend_us / factor,
        });
        config.launch_window_us = self.launch_window_us.map(|us| us / factor);
        config.slot_setup_us = self.slot_setup_us.map(|us| us / factor);
        config
    }

    /// `max_model_len`, defaulting to the model's context length.
    pub fn effective_max_model_len(&self) -> u32 {
        self.max_model_len.unwrap_or(self.model.max_context)
    }

    /// The scheduler's batch limits the engine defaults to when the configuration leaves them
    /// unset: the policy's default on this accelerator.
    pub fn default_batch_limits(&self) -> BatchLimits {
        let kv_tokens = self.kv_blocks() * u64::from(self.block_size.max(1));
        self.policy.default_batch_limits(
            &self.gpu,
            kv_tokens,
            self.effective_max_model_len(),
            self.chunked_prefill,
        )
    }

    /// The waiting queue's bound, in words when it is the default (in effect none).
    pub fn waiting_bound(&self) -> String {
        match self.max_waiting {
            n if n >= UNBOUNDED_WAITING => "unbounded (as vLLM, SGLang)".into(),
            n => format!("{n} (429 beyond)"),
        }
    }

    /// Most sequences in one step: the configured limit, or the engine's default.
    pub fn max_num_seqs(&self) -> u32 {
        self.max_num_seqs
            .unwrap_or_else(|| self.default_batch_limits().max_num_seqs)
    }

    /// Token budget of one step: the configured budget, or the engine's default.
    pub fn max_num_batched_tokens(&self) -> u32 {
        self.max_num_batched_tokens
            .unwrap_or_else(|| self.default_batch_limits().max_num_batched_tokens)
    }

    /// KV blocks in the pool: the override, or the derived capacity divided by the block size.
    pub fn kv_blocks(&self) -> u64 {
        self.kv_blocks_override.unwrap_or_else(|| {
            self.deployment().kv_capacity_tokens() / u64::from(self.block_size.max(1))
        })
    }

    /// Checks every field, naming the one to fix.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.deployment()
            .validate()
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        let positive = [
            ("max_num_seqs", self.max_num_seqs()),
            ("max_num_batched_tokens", self.max_num_batched_tokens()),
            ("block_size", self.block_size),
        ];
        for (field, value) in positive {
            if value == 0 {
                return Err(ConfigError::invalid(field, "must be at least 1"));
            }
        }
        if self.effective_max_model_len() == 0 {
            return Err(ConfigError::invalid("max_model_len", "must be at least 1"));
        }
        if !(0.0..0.5).contains(&self.watermark) {
            return Err(ConfigError::invalid("watermark", "must be in [0, 0.5)"));
        }
        if self.kv_blocks() == 0 {
            return Err(ConfigError::invalid(
                "kv_blocks_override",
                "must be at least 1",
            ));
        }
        self.effective_overheads().validate()?;
        validate_batch_factors(&self.gemm_batch_factors)?;
        if self.slot_ubatch_tokens == Some(0) {
            return Err(ConfigError::invalid(
                "slot_ubatch_tokens",
                "must be at least 1 (or absent: one batch per step)",
            ));
        }
        self.validate_slot_similarity()?;
        let host_times = [
            (
                "launch_window_us",
                self.launch_window_us,
                "a step launching waiting requests starts at once",
            ),
            (
                "slot_setup_us",
                self.slot_setup_us,
                "a request's prompt is scheduled as it takes a slot",
            ),
        ];
        for (field, us, absent) in host_times {
            if us.is_some_and(|us| !(us.is_finite() && us > 0.0)) {
                let message = format!("must be positive (or absent: {absent})");
                return Err(ConfigError::invalid(field, &message));
            }
        }
        if let Some(speculative) = &self.speculative {
            speculative.validate()?;
        }
        Ok(())
    }

    fn validate_slot_similarity(&self) -> Result<(), ConfigError> {
        let field = "slot_prompt_similarity";
        let Some(similarity) = &self.slot_prompt_similarity else {
            return Ok(());
        };
        if self.slot_ubatch_tokens.is_none() {
            return Err(ConfigError::invalid(
                field,
                "picks among slots: it needs slot_ubatch_tokens",
            ));
        }
        if !(similarity.threshold > 0.0 && similarity.threshold < 1.0) {
            return Err(ConfigError::invalid(
                field,
                "threshold must be in (0, 1) (llama.cpp's 0 turns the rule off: leave the table \
                 out)",
            ));
        }
        Ok(())
    }
}

fn validate_batch_factors(points: &[[f64; 2]]) -> Result<(), ConfigError> {
    let field = "gemm_batch_factors";
    for [tokens, factor] in points {
        if !(tokens.is_finite() && *tokens >= 1.0) {
            return Err(ConfigError::invalid(
                field,
                "token counts must be 1 or more",
            ));
        }
        if !(factor.is_finite() && *factor > 0.0) {
            return Err(ConfigError::invalid(field, "factors must be positive"));
        }
    }
    if points.windows(2).any(|w| w[1][0] <= w[0][0]) {
        return Err(ConfigError::invalid(
            field,
            "points must be in ascending order of tokens, each once",
        ));
    }
    Ok(())
}

/// Speculative decoding: a draft model proposes tokens the target model verifies in one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpeculativeConfig {
    /// Conditional acceptance probability per draft position: entry `i` is the chance that
    /// draft token `i` is accepted given that tokens `0..i` were. Its length is the number of
    /// draft tokens proposed per step (K).
    pub acceptance: Vec<f64>,
    /// Cost of one draft forward relative to one target forward (`c_draft / c_target`).
    #[serde(default = "default_draft_cost")]
    pub draft_cost_ratio: f64,
}

fn default_draft_cost() -> f64 {
    0.05
}

impl SpeculativeConfig {
    /// Draft tokens proposed per step (K).
    pub fn num_draft_tokens(&self) -> u32 {
        u32::try_from(self.acceptance.len()).unwrap_or(u32::MAX)
    }

    /// Expected tokens produced per verification step: `1 + r1 + r1·r2 + …`.
    pub fn expected_tokens_per_step(&self) -> f64 {
        let mut expected = 1.0;
        let mut reach = 1.0;
        for rate in &self.acceptance {
            reach *= rate;
            expected += reach;
        }
        expected
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.acceptance.is_empty() || self.acceptance.len() > 16 {
            return Err(ConfigError::invalid(
                "speculative.acceptance",
                "needs 1 to 16 per-position rates",
            ));
        }
        if self.acceptance.iter().any(|r| !(0.0..=1.0).contains(r)) {
            return Err(ConfigError::invalid(
                "speculative.acceptance",
                "rates must be in [0, 1]",
            ));
        }
        if !(self.draft_cost_ratio.is_finite() && self.draft_cost_ratio >= 0.0) {
            return Err(ConfigError::invalid(
                "speculative.draft_cost_ratio",
                "must be 0 or positive",
            ));
        }
        Ok(())
    }
}

/// Constant-timing engine for exact client checks: each request holds one of `slots` slots;
/// its first token comes `ttft` after it gets a slot and every further token `itl` after the
/// previous one. Requests beyond the slots wait in FIFO order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FixedTimingConfig {
    /// Time from getting a slot to the first token.
    #[serde(with = "duration_ms")]
    pub ttft: Duration,
    /// Time between consecutive tokens.
    #[serde(with = "duration_ms")]
    pub itl: Duration,
    /// Requests served at once.
    pub slots: u32,
    /// Tokens delivered per event (a chunk of k tokens arrives every k · itl).
    pub tokens_per_chunk: u32,
    /// Most requests waiting for a slot; beyond it requests get HTTP 429.
    pub max_waiting: usize,
    /// Longest prompt plus output accepted, tokens.
    pub max_model_len: u32,
}

impl Default for FixedTimingConfig {
    fn default() -> Self {
        FixedTimingConfig {
            ttft: Duration::from_millis(100),
            itl: Duration::from_millis(10),
            slots: 8,
            tokens_per_chunk: 1,
            max_waiting: 100_000,
            max_model_len: 131_072,
        }
    }
}

impl FixedTimingConfig {
    /// The same slots `factor` times as fast (TTFT and ITL divided by it).
    pub(crate) fn at_speed(&self, factor: f64) -> FixedTimingConfig {
        let scaled = |d: Duration| {
            Duration::try_from_secs_f64(d.as_secs_f64() / factor).unwrap_or(Duration::MAX)
        };
        FixedTimingConfig {
            ttft: scaled(self.ttft),
            itl: scaled(self.itl),
            ..self.clone()
        }
    }

    /// Checks every field, naming the one to fix.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.slots == 0 {
            return Err(ConfigError::invalid("slots", "must be at least 1"));
        }
        if self.tokens_per_chunk == 0 {
            return Err(ConfigError::invalid(
                "tokens_per_chunk",
                "must be at least 1",
            ));
        }
        if self.max_model_len == 0 {
            return Err(ConfigError::invalid("max_model_len", "must be at least 1"));
        }
        Ok(())
    }
}
