//! `goodput sim --explain`: the figures the simulator derives from its configuration, each with
//! the formula and the inputs that produced it. Every number comes from the same code the engine
//! uses ([`StepCostModel`], the protocol's [`Deployment`] and [`ModelSpec`] methods, the fixed
//! engine's service time), so the explanation cannot drift from the simulation.

use std::fmt::Write as _;

use goodput_protocol::hardware::{ACTIVATION_RESERVE_GIB, Deployment, MemoryFraction, ModelSpec};

use crate::config::{BatchingConfig, EngineConfig, FixedTimingConfig, SimConfig};
use crate::engine::cost::{
    REPLICATED_ELEMENTWISE_PASSES, SHARD_GEMM_TAIL_FLOPS, SHARD_GEMM_TAIL_TOKENS, StepCost,
    StepCostModel, decode_batch, prompt,
};
use crate::engine::fixed::FixedTimingEngine;
use crate::engine::kv::blocks_for;

mod figures;
mod slots;

use figures::sig;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;
/// Context length of the decode rows.
const DECODE_CONTEXT: u32 = 1024;
/// Prompt length of the prefill rows (1k tokens).
const PREFILL_TOKENS: u32 = 1000;
/// Batch sizes of the decode table.
const DECODE_BATCHES: [u32; 6] = [1, 8, 32, 64, 128, 256];
/// Answer length used for the fixed engine's service time when no natural mean is set.
const FIXED_SAMPLE_TOKENS: u32 = 256;

/// A human-readable account of what `config` simulates and the figures derived from it.
pub fn explain(config: &SimConfig) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "model served as: {}", config.model_name());
    let _ = writeln!(
        out,
        "time scale: {} simulated seconds per real second",
        config.time_scale
    );
    explain_layout(&mut out, config);
    explain_behaviour(&mut out, config);
    match &config.engine {
        EngineConfig::Batching(batching) => explain_batching(&mut out, batching),
        EngineConfig::Fixed(fixed) => {
            explain_fixed(&mut out, fixed, config.natural_output_tokens_mean)
        }
    }
    out
}

/// The fleet: replicas behind a router, or prefill/decode pools over a KV link; LoRA slots.
fn explain_layout(out: &mut String, config: &SimConfig) {
    let routing = config.routing.name();
    match &config.disaggregation {
        Some(split) => {
            let tp = config.engine_tensor_parallel();
            let _ = writeln!(
                out,
                "layout: {} prefill engine(s) at TP {} + {} decode engine(s) at TP {}, each \
                 prompt's KV over a {} GB/s link + {} ms per transfer ({routing} routing in \
                 each pool); every figure below is per engine",
                split.prefill_replicas,
                split.prefill_tensor_parallel.unwrap_or(tp),
                split.decode_replicas,
                split.decode_tensor_parallel.unwrap_or(tp),
                split.kv_link_gb_per_s,
                split.kv_link_latency_ms,
            );
        }
        None => {
            let _ = writeln!(
                out,
                "replicas: {} behind one load balancer ({routing} routing); every figure below \
                 is per replica",
                config.replicas,
            );
        }
    }
    if let Some(adapters) = &config.adapters {
        let _ = writeln!(
            out,
            "LoRA adapters: {} in use, {} slot(s) per replica, {} ms to load a missing one",
            adapters.count, adapters.slots, adapters.load_ms
        );
    }
}

/// What the answers look like and which faults are injected (defaults included, so every
/// setting shows).
fn explain_behaviour(out: &mut String, config: &SimConfig) {
    let agent = &config.agent;
    let natural = config
        .natural_output_tokens_mean
        .map_or("max_tokens".to_string(), |mean| {
            format!("mean {mean} tokens")
        });
    let _ = writeln!(
        out,
        "answers: length {natural}; reasoning {} tokens sent as {:?}; tool calls with \
         probability {}; prompt_tokens_details {}; seed {}",
        agent.reasoning_length(),
        agent.reasoning_format,
        agent.tool_call_probability,
        if agent.prompt_tokens_details {
            "on"
        } else {
            "off"
        },
        config.seed
    );
    let _ = writeln!(out, "faults: {}", faults(&config.faults));
}

/// The fault settings that differ from the defaults, `none` when none does.
fn faults(faults: &crate::config::FaultConfig) -> String {
    let (Ok(serde_json::Value::Object(set)), Ok(serde_json::Value::Object(default))) = (
        serde_json::to_value(faults),
        serde_json::to_value(crate::config::FaultConfig::default()),
    ) else {
        return "unknown".to_string();
    };
    let changed: Vec<String> = set
        .iter()
        .filter(|(key, value)| default.get(*key) != Some(*value))
        .map(|(key, value)| format!("{key} {value}"))
        .collect();
    if changed.is_empty() {
        "none".to_string()
    } else {
        changed.join(", ")
    }
}

/// Marks a batch limit the configuration left to the engine's default.
fn engine_default(unset: bool) -> &'static str {
    if unset {
        " (the engine's default here)"
    } else {
        ""
    }
}

fn explain_batching(out: &mut String, config: &BatchingConfig) {
    let deployment = config.deployment();
    let model = &deployment.model;
    let _ = writeln!(
        out,
        "engine: continuous batching, {} policy, {} ({:?} weights, {:?} KV) on {} × {} (max_num_seqs {}{}, \
         max_num_batched_tokens {}{}, block_size {}, chunked_prefill {}, prefix_caching {}, \
         admission reserves {}% of each answer, max_waiting {}, queue order {})",
        config.policy.name(),
        model.name,
        model.weight_dtype,
        model.kv_dtype,
        deployment.tensor_parallel,
        deployment.gpu.name,
        config.max_num_seqs(),
        engine_default(config.max_num_seqs.is_none()),
        config.max_num_batched_tokens(),
        engine_default(config.max_num_batched_tokens.is_none()),
        config.block_size,
        config.chunked_prefill,
        config.prefix_caching,
        config.policy.reserved_output_fraction() * 100.0,
        config.waiting_bound(),
        config.queue_order.name(),
    );
    if let Some(speculative) = &config.speculative {
        let _ = writeln!(
            out,
            "speculative decoding: {} draft tokens, acceptance {:?}, draft cost {} of a target \
             forward",
            speculative.acceptance.len(),
            speculative.acceptance,
            speculative.draft_cost_ratio
        );
    }
    slots::explain_slots(out, config);
    explain_model(out, model);
    explain_kv(out, config, &deployment);
    let cost = StepCostModel::new(config);
    explain_batch1_decode(out, config, &cost);
    explain_prefill(out, config, &cost);
    explain_decode_table(out, config, &cost);
}

fn explain_model(out: &mut String, model: &ModelSpec) {
    let _ = writeln!(out, "\nmodel");
    let head = if model.tied_embeddings {
        "tied output head"
    } else {
        "+ output head"
    };
    let _ = writeln!(
        out,
        "  parameters          {:>10.3} B   = layers · (q + k + v + o + 3 · hidden · ffn + 2 norms) + \
         embeddings {head} [layers {}, hidden {}, heads {}, kv_heads {}, head_dim {}, ffn {}, vocab {}]",
        model.params() / 1e9,
        model.layers,
        model.hidden,
        model.heads,
        model.kv_heads,
        model.head_dim,
        model.ffn,
        model.vocab,
    );
    let _ = writeln!(
        out,
        "  weight bytes        {:>10.2} GB  = parameters × {} B ({:?}) = {:.2} GiB",
        model.weight_bytes() / 1e9,
        model.weight_dtype.bytes(),
        model.weight_dtype,
        model.weight_bytes() / GIB,
    );
    let _ = writeln!(
        out,
        "  KV bytes per token  {:>10.0} B   = 2 · layers · kv_heads · head_dim · bytes = 2 · {} · {} · {} · {} ({:?})",
        model.kv_bytes_per_token(),
        model.layers,
        model.kv_heads,
        model.head_dim,
        model.kv_dtype.bytes(),
        model.kv_dtype,
    );
}

fn explain_kv(out: &mut String, config: &BatchingConfig, deployment: &Deployment) {
    let tp = deployment.tensor_parallel.max(1);
    let non_tensor = deployment.non_tensor_gib();
    let (memory, share) = (deployment.gpu.memory_gib, deployment.gpu_memory_utilization);
    let weights = deployment.model.weight_bytes() / GIB;
    let formula = match deployment.memory_fraction {
        MemoryFraction::OfTotal => format!(
            "memory · utilisation · tp − weights − (activations + non-tensor) · tp \
             = {memory} · {share} · {tp} − {weights:.2} − ({ACTIVATION_RESERVE_GIB} + {non_tensor}) · {tp}"
        ),
        MemoryFraction::Static => format!(
            "memory · static fraction · tp − weights − non-tensor · tp (SGLang: activations \
             outside the fraction) = {memory} · {share} · {tp} − {weights:.2} − {non_tensor} · {tp}"
        ),
        MemoryFraction::OfFree => format!(
            "free fraction · (memory · tp − weights − (activations + non-tensor) · tp) \
             (TensorRT-LLM) = {share} · ({memory} · {tp} − {weights:.2} − ({ACTIVATION_RESERVE_GIB} + {non_tensor}) · {tp})"
        ),
    };
    let _ = writeln!(out, "\nKV cache");
    let _ = writeln!(
        out,
        "  pool                {:>10.2} GiB = {formula}",
        deployment.kv_pool_bytes() / GIB,
    );
    let _ = writeln!(
        out,
        "  capacity            {:>10}     = pool / KV bytes per token (tokens)",
        deployment.kv_capacity_tokens(),
    );
    let source = match config.kv_blocks_override {
        Some(_) => "kv_blocks_override".to_string(),
        None => format!("capacity / block_size ({})", config.block_size),
    };
    let _ = writeln!(
        out,
        "  blocks              {:>10}     = {source}",
        config.kv_blocks()
    );
}

fn explain_batch1_decode(out: &mut String, config: &BatchingConfig, cost: &StepCostModel) {
    let step = cost.cost(&decode_batch(1, DECODE_CONTEXT), false);
    let _ = writeln!(out, "\ndecode step, batch 1, context {DECODE_CONTEXT}");
    explain_terms(out, config, &step);
    let _ = writeln!(
        out,
        "  → {:.1} tokens/s per sequence",
        1.0 / step.total_secs()
    );
}

fn explain_prefill(out: &mut String, config: &BatchingConfig, cost: &StepCostModel) {
    let step = cost.cost(&[prompt(PREFILL_TOKENS)], false);
    let _ = writeln!(
        out,
        "\nprefill step, one {PREFILL_TOKENS}-token prompt (first token after {:.3} ms = frontend + slot setup + step)",
        (step.total_secs()
            + (config.effective_overheads().frontend_us + config.slot_setup_us.unwrap_or(0.0))
                * 1e-6)
            * 1e3
    );
    explain_terms(out, config, &step);
}

/// Every term of a step's cost, each with its formula and inputs.
fn explain_terms(out: &mut String, config: &BatchingConfig, step: &StepCost) {
    let mut rows = kernel_terms(config, step);
    rows.extend(overhead_terms(config, step));
    for (name, secs, formula) in rows {
        let _ = writeln!(out, "  {name:<18}  {:>10.3} ms  = {formula}", secs * 1e3);
    }
    let linear = if step.summed {
        "linear compute + linear weights (roofline = \"sum\")".to_string()
    } else {
        format!(
            "max(linear compute, linear weights) + {} · min(…)",
            sig(step.ridge_loss)
        )
    };
    let _ = writeln!(
        out,
        "  {:<18}  {:>10.3} ms  = {linear} + every other term ({}-bound GEMMs)",
        "total",
        step.total_secs() * 1e3,
        bound(step),
    );
}

/// A term of the step cost: name, seconds, formula with its inputs.
type Term = (&'static str, f64, String);

/// The layer GEMMs' terms: their FLOPs and their weight reads.
fn linear_terms(config: &BatchingConfig, step: &StepCost) -> [Term; 2] {
    let model = &config.model;
    let gpu = &config.gpu;
    let tp = config.tensor_parallel.max(1);
    let dtype = model.weight_dtype;
    let gemm_eff = gpu.gemm_flops(dtype) / gpu.peak_flops(dtype);
    [
        (
            "linear compute",
            step.linear_compute_secs,
            format!(
                "2 · layer params · tokens{} / ({} TFLOP/s {dtype:?} peak · GEMM efficiency {} · tp {tp}){}",
                if config.gemm_batch_factors.is_empty() {
                    ""
                } else {
                    " · small-batch factor (gemm_batch_factors at the step's tokens)"
                },
                sig(gpu.peak_flops(dtype) / 1e12),
                sig(gemm_eff),
                if tp > 1 {
                    format!(
                        " + layers · {} GFLOP shard tail · min(tokens / {}, 1) · (1 − 1/tp) at one GPU's rate",
                        sig(SHARD_GEMM_TAIL_FLOPS / 1e9),
                        sig(SHARD_GEMM_TAIL_TOKENS)
                    )
                } else {
                    String::new()
                }
            ),
        ),
        (
            "linear weights",
            step.linear_memory_secs,
            format!(
                "{:.2} GB of layer weights / ({} TB/s · weight-streaming efficiency {} · tp {tp}); the GEMMs take {}",
                model.layer_weight_bytes() / 1e9,
                sig(gpu.hbm_tb_per_sec),
                sig(gpu.bandwidth_efficiency),
                if step.summed {
                    "the sum of the two".to_string()
                } else {
                    format!(
                        "the larger of the two + {} (ridge loss) of the smaller",
                        sig(step.ridge_loss)
                    )
                }
            ),
        ),
    ]
}

/// Over `tp` > 1 GPUs, the elementwise kernels every GPU runs on the whole hidden state.
fn replicated_term(config: &BatchingConfig, step: &StepCost) -> Option<Term> {
    let gpu = &config.gpu;
    (config.tensor_parallel > 1).then(|| {
        (
            "replicated",
            step.replicated_secs,
            format!(
                "layers · {} passes · tokens · hidden · 2 B · (1 − 1/tp) / ({} TB/s · weight-streaming efficiency {}): elementwise kernels on the whole hidden state on every GPU",
                sig(REPLICATED_ELEMENTWISE_PASSES),
                sig(gpu.hbm_tb_per_sec),
                sig(gpu.bandwidth_efficiency)
            ),
        )
    })
}

/// The kernels' terms: GEMMs, logits, attention, all-reduce, drafts.
fn kernel_terms(config: &BatchingConfig, step: &StepCost) -> Vec<Term> {
    let model = &config.model;
    let gpu = &config.gpu;
    let tp = config.tensor_parallel.max(1);
    let mut terms = linear_terms(config, step).to_vec();
    terms.extend(replicated_term(config, step));
    terms.extend([
        (
            "logits",
            step.logits_secs,
            format!(
                "max(2 · vocab · hidden · sampled positions FLOPs, {:.2} GB head) for the last token of each sequence only",
                model.logits_weight_bytes() / 1e9
            ),
        ),
        (
            "prefill attention",
            step.prefill_attention_secs,
            format!(
                "4 · layers · heads · head_dim · n · (context + (n − 1)/2) / ({} TFLOP/s BF16 · attention efficiency {} · tp {tp})",
                sig(gpu.bf16_tflops),
                sig(gpu.attention_efficiency)
            ),
        ),
        (
            "decode attention",
            step.decode_attention_secs,
            format!(
                "KV reads of every decode context + KV writes of every new token ({} B/token, {:?} KV) / ({} TB/s · KV-read efficiency {} · tp {tp})",
                model.kv_bytes_per_token(),
                model.kv_dtype,
                sig(gpu.hbm_tb_per_sec),
                sig(gpu.kv_read_efficiency)
            ),
        ),
        (
            "all-reduce",
            step.comm_secs,
            format!(
                "2 · layers · ({} µs · log2 tp + tokens · hidden · 2 B · 2(tp − 1)/tp / {} GB/s{}), tp {tp}",
                sig(gpu.all_reduce_us),
                sig(gpu.interconnect_gb_per_sec),
                if tp > 1 {
                    format!(" · bus efficiency {}", sig(gpu.all_reduce_bus_efficiency))
                } else {
                    String::new()
                }
            ),
        ),
        (
            "draft",
            step.draft_secs,
            "K · draft cost ratio · (linear + logits + decode attention)".to_string(),
        ),
    ]);
    terms
}

/// The fixed terms: per step and layer, per sequence, per prefill step.
fn overhead_terms(config: &BatchingConfig, step: &StepCost) -> Vec<Term> {
    let o = config.effective_overheads();
    vec![
        (
            "fixed",
            step.fixed_secs,
            format!(
                "per step {} µs + per layer {} µs · {} layers ({} policy)",
                sig(o.per_step_us),
                sig(o.per_layer_us),
                config.model.layers,
                config.policy.name()
            ),
        ),
        (
            "per sequence",
            step.sequence_secs,
            format!("{} µs · sequences", sig(o.per_sequence_us)),
        ),
        (
            "prefill overhead",
            step.prefill_overhead_secs,
            format!(
                "{} µs when the step carries prompt tokens",
                sig(o.per_prefill_us)
            ),
        ),
    ]
}

fn explain_decode_table(out: &mut String, config: &BatchingConfig, cost: &StepCostModel) {
    let per_sequence_blocks = blocks_for(DECODE_CONTEXT + 1, config.block_size).max(1);
    let kv_sequences = config.kv_blocks() / u64::from(per_sequence_blocks);
    let cap = u64::from(config.max_num_seqs()).min(kv_sequences).max(1);
    let cap = u32::try_from(cap).unwrap_or(u32::MAX);
    let _ = writeln!(
        out,
        "\ndecode at context {DECODE_CONTEXT} (batch capped by max_num_seqs {} and KV capacity {kv_sequences} sequences)",
        config.max_num_seqs(),
    );
    let _ = writeln!(
        out,
        "  {:>6}  {:>10}  {:>12}  {:>8}",
        "batch", "step ms", "output tok/s", "bound"
    );
    let mut shown = Vec::new();
    for requested in DECODE_BATCHES {
        let batch = requested.min(cap);
        if shown.contains(&batch) {
            continue;
        }
        shown.push(batch);
        let step = cost.cost(&decode_batch(batch, DECODE_CONTEXT), false);
        let note = if batch < requested {
            format!(" (capped from {requested})")
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "  {batch:>6}  {:>10.3}  {:>12.1}  {:>8}{note}",
            step.total_secs() * 1e3,
            f64::from(batch) / step.total_secs(),
            bound(&step),
        );
    }
}

fn explain_fixed(out: &mut String, config: &FixedTimingConfig, natural_mean: Option<f64>) {
    let _ = writeln!(out, "engine: fixed timing");
    let _ = writeln!(out, "  slots               {:>10}", config.slots);
    let _ = writeln!(
        out,
        "  TTFT                {:>10.3} ms",
        config.ttft.as_secs_f64() * 1e3
    );
    let _ = writeln!(
        out,
        "  ITL                 {:>10.3} ms",
        config.itl.as_secs_f64() * 1e3
    );
    let _ = writeln!(out, "  tokens per chunk    {:>10}", config.tokens_per_chunk);
    let _ = writeln!(out, "  max waiting         {:>10}", config.max_waiting);
    let _ = writeln!(out, "  max model len       {:>10}", config.max_model_len);
    let sample = natural_mean.map_or(FIXED_SAMPLE_TOKENS, |mean| {
        mean.round().clamp(1.0, f64::from(u32::MAX)) as u32
    });
    let service = FixedTimingEngine::new(config.clone())
        .service_time(sample)
        .as_secs_f64();
    let _ = writeln!(
        out,
        "  service time S      {:>10.3} ms  = ttft + (n − 1) · itl = {} + {} · {} ms for n = {sample} output tokens",
        service * 1e3,
        config.ttft.as_secs_f64() * 1e3,
        sample.saturating_sub(1),
        config.itl.as_secs_f64() * 1e3,
    );
    if service > 0.0 {
        let capacity = f64::from(config.slots) / service;
        let _ = writeln!(
            out,
            "  capacity            {capacity:>10.3} requests/s = slots / S = {} / {service:.3} s ({:.1} output tokens/s)",
            config.slots,
            capacity * f64::from(sample),
        );
    }
}

/// One decode step of `batch` sequences at `context` tokens each, as the engine costs it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecodeStep {
    /// The step's duration, seconds.
    pub total_secs: f64,
    /// Time to stream weights (layers and output head) and KV at the usable bandwidth, seconds.
    pub memory_secs: f64,
    /// Time for the layer GEMMs' FLOPs at the GEMM rate, seconds.
    pub compute_secs: f64,
    /// `"memory"` or `"compute"`: which of the two sets the step.
    pub bound: &'static str,
}

/// The cost of a decode step of `batch` sequences at `context` tokens on `config`.
pub fn decode_step(config: &BatchingConfig, batch: u32, context: u32) -> DecodeStep {
    let step = StepCostModel::new(config).cost(&decode_batch(batch.max(1), context), false);
    DecodeStep {
        total_secs: step.total_secs(),
        memory_secs: step.linear_memory_secs + step.logits_secs + step.decode_attention_secs,
        compute_secs: step.linear_compute_secs,
        bound: bound(&step),
    }
}

fn bound(step: &StepCost) -> &'static str {
    if step.is_memory_bound() {
        "memory"
    } else {
        "compute"
    }
}

#[cfg(test)]
mod tests;
