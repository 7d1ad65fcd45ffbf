//! Simulator configuration: which engine (roofline continuous batching or fixed timing), its
//! scheduler and hardware, fault injection, time scale and seed. Loadable from TOML or JSON;
//! every field has a default so a file only names what it changes.

mod agent;
mod engine;
mod faults;
mod fleet;
mod layout;
mod policy;

pub use agent::{AgentConfig, ReasoningFormat};
pub use engine::{
    BatchingConfig, FixedTimingConfig, SlotPromptSimilarity, SpeculativeConfig, UNBOUNDED_WAITING,
};
pub use faults::FaultConfig;
pub use fleet::{AdapterConfig, DisaggregationConfig};
pub use goodput_protocol::QueueOrder;
pub use layout::{LAYOUT_FORMS, Layout};
pub use policy::{BatchLimits, EnginePolicy, Roofline, StepOverheads};

pub use crate::engine::replicas::Routing;

use std::path::Path;

use goodput_protocol::hardware::{GpuSpec, ModelSpec};
use serde::{Deserialize, Serialize};

/// Most replicas one simulator runs.
pub const MAX_REPLICAS: u32 = 1024;

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
    /// Tokens the model's chat template adds to every chat prompt beyond the per-message
    /// markers of OpenAI's rule (a system preamble, longer tags: 21–31 on llama.cpp's test
    /// model); negative for a server that counts fewer (no template, a coarser tokenizer:
    /// the prompt's first tokens are dropped, at least one left). `goodput calibrate`
    /// measures it. Default 0.
    pub chat_template_tokens: i32,
    /// Mean answer length when a request lets the model stop (no `ignore_eos`): the
    /// end-of-sequence position is drawn from a geometric distribution with this mean (never
    /// before `min_tokens`). Absent: the model never stops early and answers fill `max_tokens`.
    pub natural_output_tokens_mean: Option<f64>,
    /// Reasoning-model and tool-call emulation.
    pub agent: AgentConfig,
    /// Identical replicas of the engine behind one load balancer (each with its own KV
    /// cache and queue).
    pub replicas: u32,
    /// How the load balancer spreads requests over the replicas (and, disaggregated, over
    /// each pool).
    pub routing: Routing,
    /// Prefill and decode pools joined by a KV link instead of `replicas` (which must be 1).
    pub disaggregation: Option<DisaggregationConfig>,
    /// LoRA adapters on every replica.
    pub adapters: Option<AdapterConfig>,
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
            chat_template_tokens: 0,
            natural_output_tokens_mean: None,
            agent: AgentConfig::default(),
            replicas: 1,
            routing: Routing::default(),
            disaggregation: None,
            adapters: None,
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
        self.agent.validate()?;
        if !(1..=MAX_REPLICAS).contains(&self.replicas) {
            return Err(ConfigError::invalid(
                "replicas",
                &format!("must be between 1 and {MAX_REPLICAS}"),
            ));
        }
        if let Some(split) = &self.disaggregation {
            split.validate()?;
            if self.replicas > 1 {
                return Err(ConfigError::invalid(
                    "replicas",
                    "must be 1 with `disaggregation` (its pools have their own replica counts)",
                ));
            }
        }
        if let Some(adapters) = &self.adapters {
            adapters.validate()?;
        }
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

    /// The same server `factor` times as fast (a positive, finite factor): every engine cost
    /// divided by it, nothing else changed — how a server's speed moving by that much (another
    /// tenant on its machine, a clock change) shows in the simulator. `None` for a factor that
    /// is not positive and finite.
    pub fn at_speed(&self, factor: f64) -> Option<SimConfig> {
        if !(factor.is_finite() && factor > 0.0) {
            return None;
        }
        let engine = match &self.engine {
            EngineConfig::Batching(config) => EngineConfig::Batching(config.at_speed(factor)),
            EngineConfig::Fixed(config) => EngineConfig::Fixed(config.at_speed(factor)),
        };
        Some(SimConfig {
            engine,
            ..self.clone()
        })
    }

    /// Whether a batching engine keeps clients beyond its sequence slots in step (it has a
    /// launch window, [`BatchingConfig::launch_window_us`]); `None` for the fixed-timing engine.
    pub fn keeps_clients_in_step(&self) -> Option<bool> {
        match &self.engine {
            EngineConfig::Batching(config) => Some(config.launch_window_us.is_some()),
            EngineConfig::Fixed(_) => None,
        }
    }

    /// The same server with the other step pattern beyond its slots: a configuration without
    /// a launch window gets the shortest one that still gathers clients re-sending the
    /// instant their answers end (their frontend delay and a microsecond: in virtual time the
    /// limit of a window that costs nothing), one with a window loses it. `None` for the
    /// fixed-timing engine, and for one whose requests reach it more than
    /// [`GATHERED_FRONTEND_US`] after they are sent: a server holds its launch window for
    /// milliseconds, and such re-sends miss it (its cost would be the frontend delay on every
    /// launching step).
    pub fn other_step_pattern(&self) -> Option<SimConfig> {
        let EngineConfig::Batching(config) = &self.engine else {
            return None;
        };
        let frontend = config.effective_overheads().frontend_us;
        let window = match config.launch_window_us {
            Some(_) => None,
            None if frontend <= GATHERED_FRONTEND_US => Some(frontend + 1.0),
            None => return None,
        };
        Some(SimConfig {
            engine: EngineConfig::Batching(BatchingConfig {
                launch_window_us: window,
                ..config.clone()
            }),
            ..self.clone()
        })
    }

    /// The engine's tensor parallelism (1 for the fixed-timing engine): each replica's, and
    /// each pool's unless the pool sets its own.
    pub fn engine_tensor_parallel(&self) -> u32 {
        match &self.engine {
            EngineConfig::Batching(config) => config.tensor_parallel,
            EngineConfig::Fixed(_) => 1,
        }
    }

    /// Accelerators the layout occupies: tensor parallel × replicas, or each pool's.
    pub fn accelerators(&self) -> u32 {
        let tp = self.engine_tensor_parallel();
        match &self.disaggregation {
            None => tp * self.replicas.max(1),
            Some(split) => {
                split.prefill_replicas * split.prefill_tensor_parallel.unwrap_or(tp)
                    + split.decode_replicas * split.decode_tensor_parallel.unwrap_or(tp)
            }
        }
    }

    /// The model name to serve.
    pub fn model_name(&self) -> String {
        self.served_model_name
            .clone()
            .unwrap_or_else(|| self.engine.default_model_name())
    }
}

/// The longest frontend delay, µs, whose clients can still re-send within a server's launch
/// window ([`SimConfig::other_step_pattern`]): llama-server held its batch open 4–6 ms while it
/// launched a waiting request (docs/validation.md, runs V–W), so re-sends reaching the engine
/// within 3 ms make it, with a millisecond to spare. (It was 1 ms until 2026-12-03, when a fit
/// that left its small latency undetermined dropped the in-step prediction it did not need
/// to: the server ran in step, TPOT 31 ms against the staggered 61.)
pub const GATHERED_FRONTEND_US: f64 = 3000.0;

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
    use std::time::Duration;

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
    fn gemm_batch_factors_must_be_ascending_positive_points() {
        for (points, says) in [
            ("[[4.0, 2.0], [1.0, 8.0]]", "ascending"),
            ("[[1.0, 8.0], [1.0, 2.0]]", "ascending"),
            ("[[0.5, 8.0]]", "1 or more"),
            ("[[1.0, 0.0]]", "positive"),
        ] {
            let text = format!("[engine]\nkind = \"batching\"\ngemm_batch_factors = {points}\n");
            let config: SimConfig = toml::from_str(&text).unwrap();
            let error = config.validate().unwrap_err().to_string();
            assert!(
                error.contains("gemm_batch_factors") && error.contains(says),
                "{points}: {error}"
            );
        }
    }

    #[test]
    fn slot_prompt_similarity_needs_slots_and_a_threshold_below_one() {
        let similarity = "[engine.slot_prompt_similarity]\nshared_prefix_tokens = 10\n";
        for (slots, threshold, says) in [
            ("", "0.1", Some("needs slot_ubatch_tokens")),
            ("slot_ubatch_tokens = 512\n", "1.0", Some("(0, 1)")),
            (
                "slot_ubatch_tokens = 512\n",
                "0.0",
                Some("turns the rule off"),
            ),
            ("slot_ubatch_tokens = 512\n", "0.1", None),
        ] {
            let text = format!(
                "[engine]\nkind = \"batching\"\n{slots}{similarity}threshold = {threshold}\n"
            );
            let config: SimConfig = toml::from_str(&text).unwrap();
            match (config.validate(), says) {
                (Ok(()), None) => {}
                (Err(error), Some(says)) => {
                    let error = error.to_string();
                    assert!(error.contains("slot_prompt_similarity") && error.contains(says));
                }
                (outcome, _) => panic!("{text}: {outcome:?}"),
            }
        }
    }

    #[test]
    fn the_other_step_pattern_adds_or_removes_a_positive_launch_window() {
        let batching = "[engine]\nkind = \"batching\"\n";
        // vLLM's 4 ms frontend: re-sends reach the engine too late for any launch window.
        let late: SimConfig = toml::from_str(batching).unwrap();
        assert!(late.other_step_pattern().is_none());
        let text = format!("{batching}[engine.overheads]\nfrontend_us = 500.0\n");
        let staggered: SimConfig = toml::from_str(&text).unwrap();
        assert_eq!(staggered.keeps_clients_in_step(), Some(false));
        let in_step = staggered.other_step_pattern().unwrap();
        in_step.validate().unwrap();
        assert_eq!(in_step.keeps_clients_in_step(), Some(true));
        assert_eq!(in_step.other_step_pattern(), Some(staggered));
        assert_eq!(
            in_step.at_speed(2.0).unwrap().keeps_clients_in_step(),
            Some(true)
        );
        for window in ["0.0", "-1.0", "nan"] {
            let text = format!("[engine]\nkind = \"batching\"\nlaunch_window_us = {window}\n");
            let config: SimConfig = toml::from_str(&text).unwrap();
            let error = config.validate().unwrap_err().to_string();
            assert!(error.contains("launch_window_us"), "{window}: {error}");
        }
        let text = r#"{"engine": {"kind": "fixed", "ttft": 250, "itl": 5.5, "slots": 2}}"#;
        let fixed: SimConfig = serde_json::from_str(text).unwrap();
        assert_eq!(fixed.keeps_clients_in_step(), None);
        assert!(fixed.other_step_pattern().is_none());
    }

    #[test]
    fn a_slot_setup_is_positive_round_trips_and_scales_with_speed() {
        let text = "[engine]\nkind = \"batching\"\nslot_setup_us = 100000.0\n";
        let config: SimConfig = toml::from_str(text).unwrap();
        config.validate().unwrap();
        let back: SimConfig = toml::from_str(&toml::to_string(&config).unwrap()).unwrap();
        assert_eq!(back, config);
        let EngineConfig::Batching(fast) = config.at_speed(2.0).unwrap().engine else {
            panic!("batching")
        };
        assert_eq!(fast.slot_setup_us, Some(50_000.0));
        for setup in ["0.0", "-1.0", "nan", "inf"] {
            let text = format!("[engine]\nkind = \"batching\"\nslot_setup_us = {setup}\n");
            let config: SimConfig = toml::from_str(&text).unwrap();
            let error = config.validate().unwrap_err().to_string();
            assert!(error.contains("slot_setup_us"), "{setup}: {error}");
        }
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
