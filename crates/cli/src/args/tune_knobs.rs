//! `goodput tune --virtual-time`: the simulator's own knobs as grid keys, applied to the base
//! configuration (a preset or a `calibrate`d `--sim-config` file). A key the simulator does not
//! know, a value that does not parse or a knob of the other engine is refused before anything
//! runs (exit 2); a combination the simulator refuses (a model that does not fit) marks that
//! configuration failed and the rest go on.

use anyhow::{Result, bail};
use goodput_core::units::parse_duration;
use goodput_protocol::hardware::{DType, GpuSpec, ModelSpec};
use goodput_sim::config::{BatchingConfig, EngineConfig, EnginePolicy, Layout, Routing, SimConfig};

/// The knobs, with the engine each applies to (`None`: both) and what it sets.
pub(crate) const KNOBS: [(&str, Option<bool>, &str); 17] = [
    (
        "max_num_seqs",
        None,
        "sequences per step (the fixed engine's slots)",
    ),
    ("slots", None, "the same as max_num_seqs"),
    (
        "max_num_batched_tokens",
        Some(true),
        "token budget per step",
    ),
    ("chunked_prefill", Some(true), "true or false"),
    ("prefix_caching", Some(true), "true or false"),
    (
        "tp",
        None,
        "tensor-parallel degree (accelerators per replica)",
    ),
    ("replicas", None, "replicas behind one load balancer"),
    (
        "layout",
        None,
        "a fleet layout: 8xtp1, 4xtp2, 2p+6d, 2p:tp2+4d:tp1",
    ),
    (
        "routing",
        None,
        "round-robin, least-loaded, prefix-affinity, power-of-two, kv-aware",
    ),
    (
        "policy",
        Some(true),
        "vllm, vllm-v0, sglang, tensorrt-llm or bare",
    ),
    (
        "accelerator",
        Some(true),
        "an accelerator preset (h100, a100-80g, …)",
    ),
    ("model", Some(true), "a model preset (llama-3.1-8b, …)"),
    (
        "precision",
        Some(true),
        "weight precision (bf16, fp8, int4, …)",
    ),
    ("kv_precision", Some(true), "KV-cache precision"),
    (
        "gpu_memory_utilization",
        Some(true),
        "fraction of accelerator memory",
    ),
    (
        "ttft",
        Some(false),
        "the fixed engine's time to first token (e.g. 200ms)",
    ),
    ("itl", Some(false), "the fixed engine's time between tokens"),
];

/// Refuses grid keys that are not knobs of `base`'s engine, and values that do not parse.
pub(crate) fn check(
    keys: &[String],
    configurations: &[(String, Vec<(String, String)>)],
    base: &SimConfig,
) -> Result<()> {
    let batching = matches!(base.engine, EngineConfig::Batching(_));
    for key in keys {
        let Some((_, engine, _)) = KNOBS.iter().find(|(name, _, _)| name == key) else {
            let known: Vec<&str> = KNOBS.iter().map(|(name, _, _)| *name).collect();
            bail!(
                "--virtual-time: grid key `{key}` is not a simulator knob; knobs: {}",
                known.join(", ")
            );
        };
        if engine.is_some_and(|b| b != batching) {
            let which = if batching { "batching" } else { "fixed-timing" };
            bail!(
                "--virtual-time: `{key}` is no knob of the {which} engine the base configuration selects"
            );
        }
    }
    for (name, values) in configurations {
        let mut config = base.clone();
        for (key, value) in values {
            set(&mut config, key, value).map_err(|e| {
                anyhow::anyhow!("--grid: configuration `{name}`: {key}={value}: {e}")
            })?;
        }
    }
    Ok(())
}

/// `base` with the configuration's `values` applied, validated; `Err` says why the simulator
/// refuses it.
pub(crate) fn simulator(
    base: &SimConfig,
    values: &[(String, String)],
) -> Result<SimConfig, String> {
    let mut config = base.clone();
    for (key, value) in values {
        set(&mut config, key, value).map_err(|e| format!("{key}={value}: {e}"))?;
    }
    config.validate().map_err(|e| e.to_string())?;
    Ok(config)
}

/// The accelerators a simulated configuration occupies: tensor parallelism × replicas, or
/// each pool's of a disaggregated layout.
pub(crate) fn accelerators(config: &SimConfig) -> u32 {
    config.accelerators().max(1)
}

fn number(value: &str) -> Result<u32, String> {
    value.parse().map_err(|_| "not a whole number".to_string())
}

fn boolean(value: &str) -> Result<bool, String> {
    match value.to_ascii_lowercase().as_str() {
        "true" | "on" | "yes" | "1" => Ok(true),
        "false" | "off" | "no" | "0" => Ok(false),
        _ => Err("true or false".to_string()),
    }
}

/// Sets knob `key` of `config` to `value`.
fn set(config: &mut SimConfig, key: &str, value: &str) -> Result<(), String> {
    match key {
        "replicas" => config.replicas = number(value)?,
        "layout" => Layout::parse(value)?.apply(config)?,
        "routing" => {
            config.routing = Routing::from_name(value).ok_or("unknown routing")?;
        }
        _ => match &mut config.engine {
            EngineConfig::Batching(batching) => set_batching(batching, key, value)?,
            EngineConfig::Fixed(fixed) => match key {
                "max_num_seqs" | "slots" => fixed.slots = number(value)?,
                "tp" if number(value)? == 1 => {}
                "tp" => return Err("the fixed-timing engine runs on one accelerator".into()),
                "ttft" => fixed.ttft = parse_duration(value).map_err(|e| e.to_string())?,
                "itl" => fixed.itl = parse_duration(value).map_err(|e| e.to_string())?,
                _ => return Err("no knob of the fixed-timing engine".into()),
            },
        },
    }
    Ok(())
}

/// Sets knob `key` of a batching engine.
fn set_batching(batching: &mut BatchingConfig, key: &str, value: &str) -> Result<(), String> {
    match key {
        "max_num_seqs" | "slots" => batching.max_num_seqs = Some(number(value)?),
        "max_num_batched_tokens" => batching.max_num_batched_tokens = Some(number(value)?),
        "chunked_prefill" => batching.chunked_prefill = boolean(value)?,
        "prefix_caching" => batching.prefix_caching = boolean(value)?,
        "tp" => batching.tensor_parallel = number(value)?,
        "policy" => {
            batching.policy = EnginePolicy::from_name(value).ok_or("unknown engine policy")?;
        }
        "accelerator" => {
            batching.gpu = GpuSpec::preset(value)
                .ok_or_else(|| format!("presets: {}", GpuSpec::PRESETS.join(", ")))?;
        }
        "model" => {
            let precision = (batching.model.weight_dtype, batching.model.kv_dtype);
            batching.model = ModelSpec::preset(value)
                .ok_or_else(|| format!("presets: {}", ModelSpec::PRESETS.join(", ")))?;
            (batching.model.weight_dtype, batching.model.kv_dtype) = precision;
        }
        "precision" => batching.model.weight_dtype = value.parse::<DType>()?,
        "kv_precision" => batching.model.kv_dtype = value.parse::<DType>()?,
        "gpu_memory_utilization" => {
            batching.gpu_memory_utilization = value
                .parse()
                .map_err(|_| "a fraction, e.g. 0.9".to_string())?;
        }
        _ => return Err("no knob of the batching engine".into()),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn knobs_set_the_simulator_and_count_its_accelerators() {
        let base = SimConfig::default();
        let values = [
            ("max_num_seqs".to_string(), "8".to_string()),
            ("tp".to_string(), "2".to_string()),
            ("replicas".to_string(), "3".to_string()),
            ("policy".to_string(), "sglang".to_string()),
            ("precision".to_string(), "fp8".to_string()),
        ];
        let config = simulator(&base, &values).unwrap();
        let EngineConfig::Batching(b) = &config.engine else {
            panic!("batching")
        };
        assert_eq!((b.max_num_seqs, b.tensor_parallel), (Some(8), 2));
        assert_eq!(b.policy, EnginePolicy::Sglang);
        assert_eq!(accelerators(&config), 6);
        let zero = simulator(&base, &[("max_num_seqs".to_string(), "0".to_string())]);
        assert!(zero.unwrap_err().contains("max_num_seqs"));
    }

    #[test]
    fn layouts_of_eight_gpus_are_eight_accelerators_each() {
        let base = SimConfig::default();
        for layout in ["8xtp1", "4xtp2", "2p+6d", "2p:tp2+4d:tp1"] {
            let values = [
                ("layout".to_string(), layout.to_string()),
                ("routing".to_string(), "power-of-two".to_string()),
            ];
            let config = simulator(&base, &values).unwrap();
            assert_eq!(accelerators(&config), 8, "{layout}");
        }
        let bad = simulator(&base, &[("layout".to_string(), "2q+6d".to_string())]);
        assert!(bad.unwrap_err().contains("NxtpK"));
    }

    #[test]
    fn unknown_keys_and_other_engines_knobs_are_refused() {
        let base = SimConfig::default();
        let grid = |key: &str| vec![(format!("{key}=1"), vec![(key.to_string(), "1".to_string())])];
        let keys = |key: &str| vec![key.to_string()];
        assert!(check(&keys("np"), &grid("np"), &base).is_err());
        assert!(check(&keys("ttft"), &grid("ttft"), &base).is_err());
        let bad = vec![("x".to_string(), vec![("tp".to_string(), "two".to_string())])];
        assert!(check(&keys("tp"), &bad, &base).is_err());
    }
}
