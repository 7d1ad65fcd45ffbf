//! Simulator configuration: which engine (roofline continuous batching or fixed timing), its
//! scheduler and hardware, fault injection, time scale and seed. Loadable from TOML or JSON;
//! every field has a default so a file only names what it changes.

use std::path::Path;
use std::time::Duration;

use goodput_protocol::hardware::{Deployment, GpuSpec, ModelSpec};
use serde::{Deserialize, Serialize};

/// Everything the simulator needs to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimConfig {
    /// The engine model.
    pub engine: EngineConfig,
    /// Model name served at `/v1/models` (default: the model preset's name, or `sim-fixed`).
    pub served_model_name: Option<String>,
    /// Simulated seconds per real second (2.0 runs twice as fast as real time).
    pub time_scale: f64,
    /// Seed for every random choice (acceptance, EOS, faults, generated text).
    pub seed: u64,
    /// Fault injection rates.
    pub faults: FaultConfig,
    /// How `usage.prompt_tokens` is counted.
    pub prompt_tokenizer: PromptTokenizer,
    /// Mean answer length when a request lets the model stop (no `ignore_eos`): the
    /// end-of-sequence position is drawn from a geometric distribution with this mean (never
    /// before `min_tokens`). Absent: the model never stops early and answers fill `max_tokens`.
    pub natural_output_tokens_mean: Option<f64>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            engine: EngineConfig::Batching(BatchingConfig::default()),
            served_model_name: None,
            time_scale: 1.0,
            seed: 0,
            faults: FaultConfig::default(),
            prompt_tokenizer: PromptTokenizer::Cl100k,
            natural_output_tokens_mean: None,
        }
    }
}

/// How the simulator counts prompt tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PromptTokenizer {
    /// OpenAI `cl100k_base` BPE (embedded; exact, ~1 µs per token).
    Cl100k,
    /// Whitespace-separated words (fast; for client-overhead benchmarks).
    Words,
}

/// The engine model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[allow(clippy::large_enum_variant)] // built once per simulator; boxing would only obscure it
pub enum EngineConfig {
    /// Continuous batching with paged KV cache and a roofline step time.
    Batching(BatchingConfig),
    /// Constant TTFT and ITL on N slots with a FIFO queue (for exact client checks).
    Fixed(FixedTimingConfig),
}

impl EngineConfig {
    /// The name the served model gets when none is configured.
    pub fn default_model_name(&self) -> String {
        match self {
            EngineConfig::Batching(config) => config.model.name.clone(),
            EngineConfig::Fixed(_) => "sim-fixed".to_string(),
        }
    }

    /// Longest prompt plus output the engine accepts, in tokens.
    pub fn max_model_len(&self) -> u32 {
        match self {
            EngineConfig::Batching(config) => config.effective_max_model_len(),
            EngineConfig::Fixed(config) => config.max_model_len,
        }
    }
}

/// A vLLM-style continuous-batching engine on modelled hardware.
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
    /// Most sequences in one step.
    pub max_num_seqs: u32,
    /// Token budget of one step.
    pub max_num_batched_tokens: u32,
    /// Tokens per KV block.
    pub block_size: u32,
    /// Split long prompts across steps (otherwise a prompt is computed in one step).
    pub chunked_prefill: bool,
    /// Reuse KV blocks of identical prompt prefixes.
    pub prefix_caching: bool,
    /// Fraction of KV blocks kept free when admitting new requests.
    pub watermark: f64,
    /// Most requests waiting for admission; beyond it requests get HTTP 429.
    pub max_waiting: usize,
    /// Override the KV pool size in blocks (default: derived from memory).
    pub kv_blocks_override: Option<u64>,
    /// Fixed costs added to every step.
    pub overheads: StepOverheads,
    /// Speculative decoding (off when absent).
    pub speculative: Option<SpeculativeConfig>,
}

impl Default for BatchingConfig {
    fn default() -> Self {
        BatchingConfig {
            model: preset_model("llama-3.1-8b"),
            gpu: preset_gpu("h100"),
            tensor_parallel: 1,
            gpu_memory_utilization: 0.9,
            max_model_len: None,
            max_num_seqs: 256,
            max_num_batched_tokens: 2048,
            block_size: 16,
            chunked_prefill: true,
            prefix_caching: true,
            watermark: 0.01,
            max_waiting: 1024,
            kv_blocks_override: None,
            overheads: StepOverheads::default(),
            speculative: None,
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
        }
    }

    /// `max_model_len`, defaulting to the model's context length.
    pub fn effective_max_model_len(&self) -> u32 {
        self.max_model_len.unwrap_or(self.model.max_context)
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
            ("max_num_seqs", self.max_num_seqs),
            ("max_num_batched_tokens", self.max_num_batched_tokens),
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
        self.overheads.validate()?;
        if let Some(speculative) = &self.speculative {
            speculative.validate()?;
        }
        Ok(())
    }
}

/// Fixed per-step and per-sequence costs (CPU scheduling, kernel launches, sampling).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StepOverheads {
    /// Added to every step, µs.
    pub per_step_us: f64,
    /// Added to every step per model layer, µs.
    pub per_layer_us: f64,
    /// Added to every step per sequence in the batch, µs.
    pub per_sequence_us: f64,
    /// Latency of one all-reduce when tensor parallel, µs (two per layer).
    pub all_reduce_us: f64,
}

impl Default for StepOverheads {
    fn default() -> Self {
        StepOverheads {
            per_step_us: 126.0,
            per_layer_us: 32.0,
            per_sequence_us: 4.0,
            all_reduce_us: 8.0,
        }
    }
}

impl StepOverheads {
    fn validate(&self) -> Result<(), ConfigError> {
        let fields = [
            ("overheads.per_step_us", self.per_step_us),
            ("overheads.per_layer_us", self.per_layer_us),
            ("overheads.per_sequence_us", self.per_sequence_us),
            ("overheads.all_reduce_us", self.all_reduce_us),
        ];
        match fields.iter().find(|(_, v)| !(v.is_finite() && *v >= 0.0)) {
            Some((field, _)) => Err(ConfigError::invalid(field, "must be 0 or positive")),
            None => Ok(()),
        }
    }
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

/// Fault injection: each field is the probability that a request suffers that fault.
/// Faults are drawn once per request, in the order listed, from the seeded generator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FaultConfig {
    /// Answer HTTP 500 with an error object.
    pub http_500: f64,
    /// Answer HTTP 429 with `Retry-After`.
    pub http_429: f64,
    /// `Retry-After` value sent with injected 429s, seconds.
    pub retry_after_secs: u64,
    /// Reset the connection after about half of the tokens.
    pub reset_mid_stream: f64,
    /// Stop sending after about half of the tokens.
    pub stall_mid_stream: f64,
    /// How long a stall lasts, ms (absent: forever, until the client gives up).
    pub stall_ms: Option<u64>,
    /// Send one line that is not valid SSE/JSON mid-stream.
    pub malformed_sse: f64,
    /// Send an error object mid-stream, then `[DONE]`.
    pub error_mid_stream: f64,
}

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig {
            http_500: 0.0,
            http_429: 0.0,
            retry_after_secs: 1,
            reset_mid_stream: 0.0,
            stall_mid_stream: 0.0,
            stall_ms: None,
            malformed_sse: 0.0,
            error_mid_stream: 0.0,
        }
    }
}

impl FaultConfig {
    /// The rates by name, in the order they are drawn.
    pub fn rates(&self) -> [(&'static str, f64); 6] {
        [
            ("http_500", self.http_500),
            ("http_429", self.http_429),
            ("reset_mid_stream", self.reset_mid_stream),
            ("stall_mid_stream", self.stall_mid_stream),
            ("malformed_sse", self.malformed_sse),
            ("error_mid_stream", self.error_mid_stream),
        ]
    }

    /// Checks that each rate is a probability and that they sum to at most 1.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let rates = self.rates();
        if let Some((name, _)) = rates.iter().find(|(_, r)| !(0.0..=1.0).contains(r)) {
            return Err(ConfigError::invalid(
                &format!("faults.{name}"),
                "must be in [0, 1]",
            ));
        }
        if rates.iter().map(|(_, r)| r).sum::<f64>() > 1.0 + 1e-9 {
            return Err(ConfigError::invalid(
                "faults",
                "rates must sum to at most 1",
            ));
        }
        Ok(())
    }
}

impl SimConfig {
    /// Reads a TOML (`.toml`) or JSON (any other extension) configuration file.
    pub fn from_file(path: &Path) -> Result<SimConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        let parsed = if path.extension().is_some_and(|ext| ext == "toml") {
            toml::from_str(&text).map_err(|e| e.to_string())
        } else {
            serde_json::from_str(&text).map_err(|e| e.to_string())
        };
        let config: SimConfig = parsed.map_err(|message| ConfigError::Parse {
            path: path.display().to_string(),
            message,
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Checks the whole configuration, naming the field to fix.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(self.time_scale.is_finite() && self.time_scale > 0.0) {
            return Err(ConfigError::invalid(
                "time_scale",
                "must be a positive number",
            ));
        }
        self.faults.validate()?;
        if let Some(mean) = self.natural_output_tokens_mean
            && !(mean.is_finite() && mean >= 1.0)
        {
            return Err(ConfigError::invalid(
                "natural_output_tokens_mean",
                "must be at least 1",
            ));
        }
        match &self.engine {
            EngineConfig::Batching(config) => config.validate(),
            EngineConfig::Fixed(config) => config.validate(),
        }
    }

    /// The model name to serve.
    pub fn model_name(&self) -> String {
        self.served_model_name
            .clone()
            .unwrap_or_else(|| self.engine.default_model_name())
    }
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read simulator config {path}: {source}")]
    Read {
        /// File.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// The file is not valid TOML/JSON for this schema.
    #[error("invalid simulator config {path}: {message}")]
    Parse {
        /// File.
        path: String,
        /// What the parser said.
        message: String,
    },
    /// A value is out of range.
    #[error("{0}")]
    Invalid(String),
}

impl ConfigError {
    fn invalid(field: &str, message: &str) -> Self {
        ConfigError::Invalid(format!("simulator config: `{field}` {message}"))
    }
}

fn preset_model(name: &str) -> ModelSpec {
    ModelSpec::preset(name).unwrap_or_else(|| unreachable!("built-in preset {name} exists"))
}

fn preset_gpu(name: &str) -> GpuSpec {
    GpuSpec::preset(name).unwrap_or_else(|| unreachable!("built-in preset {name} exists"))
}

/// Serde adapter: a model is a preset name or a full table.
mod model_ref {
    use super::*;

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum ModelRef {
        Preset(String),
        Custom(ModelSpec),
    }

    pub(super) fn serialize<S: serde::Serializer>(
        spec: &ModelSpec,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        spec.serialize(s)
    }

    pub(super) fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<ModelSpec, D::Error> {
        match ModelRef::deserialize(d)? {
            ModelRef::Custom(spec) => Ok(spec),
            ModelRef::Preset(name) => ModelSpec::preset(&name).ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "unknown model preset `{name}`; presets: {}",
                    ModelSpec::PRESETS.join(", ")
                ))
            }),
        }
    }
}

/// Serde adapter: an accelerator is a preset name or a full table.
mod gpu_ref {
    use super::*;

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum GpuRef {
        Preset(String),
        Custom(GpuSpec),
    }

    pub(super) fn serialize<S: serde::Serializer>(spec: &GpuSpec, s: S) -> Result<S::Ok, S::Error> {
        spec.serialize(s)
    }

    pub(super) fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<GpuSpec, D::Error> {
        match GpuRef::deserialize(d)? {
            GpuRef::Custom(spec) => Ok(spec),
            GpuRef::Preset(name) => GpuSpec::preset(&name).ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "unknown GPU preset `{name}`; presets: {}",
                    GpuSpec::PRESETS.join(", ")
                ))
            }),
        }
    }
}

/// Serde adapter: durations as (fractional) milliseconds.
mod duration_ms {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(value: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(value.as_secs_f64() * 1000.0)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let ms = f64::deserialize(d)?;
        Duration::try_from_secs_f64(ms / 1000.0)
            .map_err(|_| serde::de::Error::custom("must be a non-negative number of milliseconds"))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn toml_names_presets_and_overrides() {
        let text = r#"
            seed = 7
            [engine]
            kind = "batching"
            model = "llama-3.1-70b"
            gpu = "h100"
            tensor_parallel = 4
            [engine.speculative]
            acceptance = [0.8, 0.5]
        "#;
        let config: SimConfig = toml::from_str(text).unwrap();
        config.validate().unwrap();
        let EngineConfig::Batching(engine) = &config.engine else {
            panic!("batching")
        };
        assert_eq!(engine.model.layers, 80);
        assert_eq!(engine.tensor_parallel, 4);
        let expected = 1.0 + 0.8 + 0.8 * 0.5;
        assert!(
            (engine
                .speculative
                .as_ref()
                .unwrap()
                .expected_tokens_per_step()
                - expected)
                .abs()
                < 1e-12
        );
    }

    #[test]
    fn unknown_preset_lists_the_known_ones() {
        let text = "[engine]\nkind = \"batching\"\nmodel = \"gpt-9\"\n";
        let error = toml::from_str::<SimConfig>(text).unwrap_err().to_string();
        assert!(error.contains("llama-3.1-8b"), "{error}");
    }

    #[test]
    fn fixed_engine_from_json() {
        let text = r#"{"engine": {"kind": "fixed", "ttft": 250, "itl": 5.5, "slots": 2}}"#;
        let config: SimConfig = serde_json::from_str(text).unwrap();
        let EngineConfig::Fixed(fixed) = &config.engine else {
            panic!("fixed")
        };
        assert_eq!(fixed.ttft, Duration::from_millis(250));
        assert_eq!(fixed.itl, Duration::from_micros(5500));
    }

    #[test]
    fn fault_rates_must_sum_to_one_at_most() {
        let faults = FaultConfig {
            http_500: 0.7,
            http_429: 0.7,
            ..FaultConfig::default()
        };
        assert!(faults.validate().is_err());
    }
}
