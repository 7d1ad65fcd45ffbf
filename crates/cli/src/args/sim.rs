//! `goodput sim` arguments and their conversion into [`SimOptions`]: a configuration file as
//! the base, flags on top.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use goodput_core::units::parse_duration;
use goodput_protocol::hardware::{GpuSpec, ModelSpec};
use goodput_sim::config::{
    AgentConfig, BatchingConfig, EngineConfig, FixedTimingConfig, ReasoningFormat, SimConfig,
    SpeculativeConfig,
};

use crate::options::sim::SimOptions;

/// Serve or explain the simulated engine.
#[derive(Debug, clap::Args)]
pub(crate) struct SimArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8000", conflicts_with = "explain")]
    pub(crate) listen: SocketAddr,
    /// Print the derived figures (KV capacity, step times, throughput by batch) and exit.
    #[arg(long)]
    pub(crate) explain: bool,
    /// Configuration file (TOML or JSON); flags below override it.
    #[arg(long)]
    pub(crate) config: Option<PathBuf>,
    /// Simulated seconds per real second (e.g. 10 runs ten times faster than real time).
    #[arg(long)]
    pub(crate) time_scale: Option<f64>,
    /// Seed of every random choice.
    #[arg(long)]
    pub(crate) seed: Option<u64>,
    /// Model name served (default: the preset's name).
    #[arg(long)]
    pub(crate) served_model_name: Option<String>,
    /// Mean answer length when requests let the model stop (no ignore_eos).
    #[arg(long)]
    pub(crate) eos_mean_tokens: Option<f64>,

    /// Identical replicas of the engine behind one load balancer (each with its own KV cache
    /// and queue).
    #[arg(long, value_name = "N")]
    pub(crate) replicas: Option<u32>,
    /// How the load balancer spreads requests over --replicas or --layout's pools
    /// (round-robin, least-loaded, prefix-affinity, power-of-two, kv-aware).
    #[arg(long, value_name = "POLICY", value_parser = crate::args::sim_deploy::parse_routing)]
    pub(crate) routing: Option<goodput_sim::config::Routing>,
    /// A fleet behind one address: N or NxtpK replicas (4xtp2), or prefill and decode pools
    /// joined by a KV link (2p+6d, 2p:tp2+4d:tp1); each response names its replica in
    /// `x-sim-replica` and /metrics adds goodput_sim:replica_* series.
    #[arg(long, value_name = "LAYOUT", value_parser = crate::args::sim_deploy::parse_layout, conflicts_with = "replicas")]
    pub(crate) layout: Option<goodput_sim::config::Layout>,
    #[command(flatten)]
    pub(crate) batching: BatchingArgs,
    #[command(flatten)]
    pub(crate) fixed: FixedArgs,
    #[command(flatten)]
    pub(crate) faults: FaultArgs,
    #[command(flatten)]
    pub(crate) agent: AgentArgs,
}

/// Reasoning-model and tool-call emulation.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Reasoning and tool calls")]
pub(crate) struct AgentArgs {
    /// Reasoning tokens before each chat answer (they count against max_tokens).
    #[arg(long)]
    pub(crate) reasoning_tokens: Option<u32>,
    /// Thinking budget: reasoning stops after this many tokens.
    #[arg(long)]
    pub(crate) reasoning_budget: Option<u32>,
    /// How reasoning is sent: reasoning_content (DeepSeek, SGLang, llama.cpp), reasoning
    /// (newer vLLM), or think_tags (inside content).
    #[arg(long, value_parser = parse_reasoning_format)]
    pub(crate) reasoning_format: Option<ReasoningFormat>,
    /// Probability (0–1) that an answer to a request offering `tools` is a tool call.
    #[arg(long)]
    pub(crate) tool_call_probability: Option<f64>,
    /// Report usage.prompt_tokens_details.cached_tokens, the prompt tokens served from the
    /// prefix cache (vLLM's --enable-prompt-tokens-details).
    #[arg(long)]
    pub(crate) enable_prompt_tokens_details: bool,
}

/// A `--reasoning-format` value.
pub(crate) fn parse_reasoning_format(text: &str) -> Result<ReasoningFormat, String> {
    ReasoningFormat::parse(text).ok_or_else(|| {
        format!(
            "unknown reasoning format `{text}`; expected reasoning_content, reasoning or think_tags"
        )
    })
}

impl AgentArgs {
    fn apply(&self, config: &mut AgentConfig) {
        set(&mut config.reasoning_tokens, self.reasoning_tokens);
        if self.reasoning_budget.is_some() {
            config.reasoning_budget = self.reasoning_budget;
        }
        set(&mut config.reasoning_format, self.reasoning_format);
        set(
            &mut config.tool_call_probability,
            self.tool_call_probability,
        );
        config.prompt_tokens_details |= self.enable_prompt_tokens_details;
    }
}

/// Continuous-batching engine options.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Batching engine")]
pub(crate) struct BatchingArgs {
    /// Model preset: llama-3.1-8b, llama-3.1-70b, qwen2.5-7b, llama-3.2-1b, llama-2-7b,
    /// llama-2-70b.
    #[arg(long)]
    pub(crate) model: Option<String>,
    /// Accelerator preset: a100-80g, h100, h200, l40s, b200, mi300x.
    #[arg(long)]
    pub(crate) gpu: Option<String>,
    /// Tensor-parallel degree.
    #[arg(long)]
    pub(crate) tp: Option<u32>,
    /// Weight precision (bf16, fp16, fp8, int8, int4).
    #[arg(long, value_name = "DTYPE")]
    pub(crate) dtype: Option<String>,
    /// KV-cache precision (bf16, fp8, …).
    #[arg(long, value_name = "DTYPE")]
    pub(crate) kv_dtype: Option<String>,
    /// Engine policy: vllm, vllm-v0, sglang, tensorrt-llm, bare (admission, preemption, overheads).
    #[arg(long, value_name = "POLICY")]
    pub(crate) engine_policy: Option<String>,
    /// Most sequences per step (default: the engine policy's own default on this accelerator —
    /// vLLM 1024 on 70 GiB or more except A100s, else 256; SGLang from the KV pool, 2048–4096;
    /// TensorRT-LLM 2048).
    #[arg(long)]
    pub(crate) max_num_seqs: Option<u32>,
    /// Token budget per step (default: the engine policy's own — vLLM 8192 on 70 GiB or more
    /// except A100s, else 2048; SGLang 2048/8192/16384 by memory; TensorRT-LLM 8192).
    #[arg(long)]
    pub(crate) max_num_batched_tokens: Option<u32>,
    /// Compute each prompt in one step instead of chunks.
    #[arg(long)]
    pub(crate) no_chunked_prefill: bool,
    /// Do not reuse KV blocks of shared prompt prefixes.
    #[arg(long)]
    pub(crate) no_prefix_caching: bool,
    /// Force the KV pool size, in blocks.
    #[arg(long)]
    pub(crate) kv_blocks: Option<u64>,
    /// Most waiting requests before answering 429 (default: in effect none, as vLLM, SGLang
    /// and TensorRT-LLM; e.g. 128 to mimic TGI's `--max-concurrent-requests`).
    #[arg(long)]
    pub(crate) max_waiting: Option<usize>,
    /// Speculative decoding: per-position conditional acceptance rates, e.g. 0.8,0.6,0.4.
    #[arg(long, value_delimiter = ',')]
    pub(crate) spec_acceptance: Vec<f64>,
    /// Speculative decoding: draft cost relative to the target model.
    #[arg(long)]
    pub(crate) spec_draft_cost: Option<f64>,
}

/// Fixed-timing engine options.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Fixed-timing engine")]
pub(crate) struct FixedArgs {
    /// Use the fixed-timing engine (constant TTFT and ITL on N slots).
    #[arg(long)]
    pub(crate) fixed: bool,
    /// Time to first token after getting a slot.
    #[arg(long, value_parser = parse_duration, requires = "fixed")]
    pub(crate) ttft: Option<Duration>,
    /// Time between tokens.
    #[arg(long, value_parser = parse_duration, requires = "fixed")]
    pub(crate) itl: Option<Duration>,
    /// Requests served at once.
    #[arg(long, requires = "fixed")]
    pub(crate) slots: Option<u32>,
    /// Tokens per streamed chunk.
    #[arg(long, requires = "fixed")]
    pub(crate) tokens_per_chunk: Option<u32>,
}

/// Fault injection rates (probability per request).
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Fault injection (probability per request)")]
pub(crate) struct FaultArgs {
    /// Answer HTTP 500.
    #[arg(long)]
    pub(crate) fault_http_500: Option<f64>,
    /// Answer HTTP 429 with Retry-After.
    #[arg(long)]
    pub(crate) fault_http_429: Option<f64>,
    /// Reset the connection mid-stream.
    #[arg(long)]
    pub(crate) fault_reset: Option<f64>,
    /// Stall mid-stream.
    #[arg(long)]
    pub(crate) fault_stall: Option<f64>,
    /// How long a stall lasts (default: forever).
    #[arg(long, value_parser = parse_duration)]
    pub(crate) fault_stall_for: Option<Duration>,
    /// Send a malformed SSE line mid-stream.
    #[arg(long)]
    pub(crate) fault_malformed: Option<f64>,
    /// Send an error object mid-stream.
    #[arg(long)]
    pub(crate) fault_error: Option<f64>,
    /// Answer HTTP 400.
    #[arg(long)]
    pub(crate) fault_http_400: Option<f64>,
    /// Send nothing at all, not even the status line (for --fault-stall-for, else forever).
    #[arg(long)]
    pub(crate) fault_stall_before_response: Option<f64>,
    /// Send one chunk whose JSON is cut off.
    #[arg(long)]
    pub(crate) fault_invalid_json: Option<f64>,
    /// Send one line of bytes that are not UTF-8 text.
    #[arg(long)]
    pub(crate) fault_sse_garbage: Option<f64>,
    /// Send one line of many megabytes (see the config's oversized_line_bytes, default 8 MiB).
    #[arg(long)]
    pub(crate) fault_oversized_line: Option<f64>,
    /// Never end the response: keep-alive comments only, after about half of the tokens.
    #[arg(long)]
    pub(crate) fault_endless: Option<f64>,
}

fn set<T>(target: &mut T, value: Option<T>) {
    if let Some(value) = value {
        *target = value;
    }
}

impl SimArgs {
    /// `goodput sim`'s configuration.
    pub(crate) fn into_options(self) -> Result<SimOptions> {
        Ok(SimOptions {
            config: self.sim_config()?,
            explain: self.explain,
            listen: self.listen,
        })
    }

    /// The simulator configuration: the file (or defaults) with flags applied, validated.
    fn sim_config(&self) -> Result<SimConfig> {
        let mut config = match &self.config {
            Some(path) => SimConfig::from_file(path)?,
            None => SimConfig::default(),
        };
        set(&mut config.time_scale, self.time_scale);
        set(&mut config.seed, self.seed);
        if self.served_model_name.is_some() {
            config.served_model_name.clone_from(&self.served_model_name);
        }
        if self.eos_mean_tokens.is_some() {
            config.natural_output_tokens_mean = self.eos_mean_tokens;
        }
        if self.fixed.fixed {
            let mut fixed = match &config.engine {
                EngineConfig::Fixed(fixed) => fixed.clone(),
                EngineConfig::Batching(_) => FixedTimingConfig::default(),
            };
            self.fixed.apply(&mut fixed);
            config.engine = EngineConfig::Fixed(fixed);
        } else if let EngineConfig::Batching(batching) = &mut config.engine {
            self.batching.apply(batching)?;
        } else if self.batching.model.is_some() || self.batching.gpu.is_some() {
            bail!(
                "--model/--gpu apply to the batching engine, but the config file selects the fixed engine"
            );
        }
        self.faults.apply(&mut config.faults);
        self.agent.apply(&mut config.agent);
        set(&mut config.replicas, self.replicas);
        if let Some(layout) = self.layout {
            layout
                .apply(&mut config)
                .map_err(|e| anyhow::anyhow!("--layout: {e}"))?;
        }
        if let Some(routing) = self.routing {
            if config.replicas < 2 && config.disaggregation.is_none() {
                bail!(
                    "--routing spreads requests over replicas: add --replicas 2 or more (or --layout)"
                );
            }
            config.routing = routing;
        }
        config.validate()?;
        Ok(config)
    }
}

impl BatchingArgs {
    fn apply(&self, config: &mut BatchingConfig) -> Result<()> {
        if let Some(name) = &self.model {
            config.model = ModelSpec::preset(name).with_context(|| {
                format!(
                    "--model {name}: unknown preset; presets: {}",
                    ModelSpec::PRESETS.join(", ")
                )
            })?;
        }
        if let Some(name) = &self.gpu {
            config.gpu = GpuSpec::preset(name).with_context(|| {
                format!(
                    "--gpu {name}: unknown preset; presets: {}",
                    GpuSpec::PRESETS.join(", ")
                )
            })?;
        }
        set(&mut config.tensor_parallel, self.tp);
        if let Some(text) = &self.dtype {
            config.model.weight_dtype =
                text.parse().map_err(|e| anyhow::anyhow!("--dtype: {e}"))?;
        }
        if let Some(text) = &self.kv_dtype {
            config.model.kv_dtype = text
                .parse()
                .map_err(|e| anyhow::anyhow!("--kv-dtype: {e}"))?;
        }
        if let Some(name) = &self.engine_policy {
            config.policy = crate::args::sim_deploy::parse_policy(name)
                .map_err(|e| anyhow::anyhow!("--engine-policy: {e}"))?;
        }
        if self.max_num_seqs.is_some() {
            config.max_num_seqs = self.max_num_seqs;
        }
        if self.max_num_batched_tokens.is_some() {
            config.max_num_batched_tokens = self.max_num_batched_tokens;
        }
        set(&mut config.max_waiting, self.max_waiting);
        config.chunked_prefill &= !self.no_chunked_prefill;
        config.prefix_caching &= !self.no_prefix_caching;
        if self.kv_blocks.is_some() {
            config.kv_blocks_override = self.kv_blocks;
        }
        if !self.spec_acceptance.is_empty() {
            config.speculative = Some(SpeculativeConfig {
                acceptance: self.spec_acceptance.clone(),
                draft_cost_ratio: self.spec_draft_cost.unwrap_or(0.05),
            });
        } else if self.spec_draft_cost.is_some() {
            bail!("--spec-draft-cost needs --spec-acceptance");
        }
        Ok(())
    }
}

impl FixedArgs {
    fn apply(&self, config: &mut FixedTimingConfig) {
        set(&mut config.ttft, self.ttft);
        set(&mut config.itl, self.itl);
        set(&mut config.slots, self.slots);
        set(&mut config.tokens_per_chunk, self.tokens_per_chunk);
    }
}

impl FaultArgs {
    fn apply(&self, faults: &mut goodput_sim::config::FaultConfig) {
        set(&mut faults.http_500, self.fault_http_500);
        set(&mut faults.http_429, self.fault_http_429);
        set(&mut faults.reset_mid_stream, self.fault_reset);
        set(&mut faults.stall_mid_stream, self.fault_stall);
        set(&mut faults.malformed_sse, self.fault_malformed);
        set(&mut faults.error_mid_stream, self.fault_error);
        set(&mut faults.http_400, self.fault_http_400);
        set(
            &mut faults.stall_before_response,
            self.fault_stall_before_response,
        );
        set(&mut faults.invalid_json_chunk, self.fault_invalid_json);
        set(&mut faults.sse_garbage, self.fault_sse_garbage);
        set(&mut faults.oversized_line, self.fault_oversized_line);
        set(&mut faults.endless_response, self.fault_endless);
        if let Some(stall) = self.fault_stall_for {
            faults.stall_ms = Some(u64::try_from(stall.as_millis()).unwrap_or(u64::MAX));
        }
    }
}
