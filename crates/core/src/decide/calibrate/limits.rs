//! A server's batch and KV limits from its Prometheus `/metrics`, where it exposes them:
//! vLLM's `vllm:cache_config_info` (its KV cache — `kv_cache_size_tokens`, else
//! `num_gpu_blocks` × `block_size` — and whether it caches prefixes) and, in releases that
//! have it, `vllm:vllm_config_info` (`scheduler_config_max_num_seqs`,
//! `scheduler_config_max_num_batched_tokens`); SGLang's `sglang:max_total_num_tokens`; TGI's
//! `tgi_batch_max_total_tokens`. The family the metric names belong to says whose admission
//! and preemption to simulate. A vLLM serving several data-parallel engines behind one API
//! server labels each engine's `cache_config_info` with its `engine` index: its cache and
//! sequences are the engines' together (one engine's times their count), the deployment the
//! probes measure as a whole; a step is still one engine's, its budget not summed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::observe::server::concepts::Flavour;
use crate::observe::server::prometheus::{Exposition, Sample};

/// What a server's metrics say of its limits; `None` where they say nothing.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct MetricLimits {
    /// The server family most of its metric names belong to (`goodput_sim:` names win: the
    /// simulator also speaks vLLM's).
    pub engine: Option<Flavour>,
    /// Tokens its KV cache holds.
    pub kv_tokens: Option<u64>,
    /// Most sequences a step runs (vLLM's `max_num_seqs`).
    pub max_seqs: Option<u32>,
    /// Most tokens a step carries (vLLM's `max_num_batched_tokens`; one engine's).
    pub batch_tokens: Option<u32>,
    /// Whether it reuses the KV of a prompt prefix it has seen.
    pub prefix_caching: Option<bool>,
    /// Data-parallel engines behind the endpoint (vLLM's distinct `engine` labels of
    /// `cache_config_info`), when more than one; `kv_tokens` and `max_seqs` are already their
    /// sum.
    pub engines: Option<u32>,
}

/// The limits in one `/metrics` exposition.
pub fn metric_limits(exposition: &Exposition) -> MetricLimits {
    let find = |name: &str| exposition.samples.iter().find(|s| s.name == name);
    let cache = find("vllm:cache_config_info");
    let scheduler = find("vllm:vllm_config_info");
    let gauge = |name: &str| {
        find(name)
            .map(|s| s.value)
            .filter(|v| v.is_finite() && *v >= 1.0)
            .map(|v| v as u64)
    };
    let engines = engine_count(exposition);
    // Each engine's cache and sequences, times the engines.
    let times = |v: u64| v.checked_mul(u64::from(engines));
    let cache_tokens = cache.and_then(|s| {
        number(s, "kv_cache_size_tokens").or_else(|| {
            let blocks = number(s, "num_gpu_blocks")?;
            Some(blocks * number(s, "block_size")?)
        })
    });
    let scheduler_u32 = |label: &str, summed: bool| {
        scheduler
            .and_then(|s| number(s, label))
            .and_then(|v| if summed { times(v) } else { Some(v) })
            .and_then(|v| u32::try_from(v).ok())
    };
    MetricLimits {
        engine: engine(exposition),
        kv_tokens: cache_tokens
            .and_then(times)
            .or_else(|| gauge("sglang:max_total_num_tokens"))
            .or_else(|| gauge("tgi_batch_max_total_tokens")),
        max_seqs: scheduler_u32("scheduler_config_max_num_seqs", true),
        batch_tokens: scheduler_u32("scheduler_config_max_num_batched_tokens", false),
        prefix_caching: cache
            .and_then(|s| s.label("enable_prefix_caching"))
            .and_then(|v| match v.to_ascii_lowercase().as_str() {
                "true" => Some(true),
                "false" => Some(false),
                _ => None,
            }),
        engines: (engines > 1).then_some(engines),
    }
}

/// vLLM's data-parallel engines: the distinct `engine` labels of its `cache_config_info` (one
/// sample per engine), at least one.
fn engine_count(exposition: &Exposition) -> u32 {
    let labels: std::collections::BTreeSet<&str> = exposition
        .samples
        .iter()
        .filter(|s| s.name == "vllm:cache_config_info")
        .map(|s| s.label("engine").unwrap_or_default())
        .collect();
    u32::try_from(labels.len()).unwrap_or(u32::MAX).max(1)
}

/// A label's value as a positive whole number (vLLM writes `None` for an unset one).
fn number(sample: &Sample, label: &str) -> Option<u64> {
    sample
        .label(label)?
        .trim()
        .parse::<u64>()
        .ok()
        .filter(|v| *v > 0)
}

/// The family of most of the exposition's serving metrics (power exporters aside).
fn engine(exposition: &Exposition) -> Option<Flavour> {
    let mut counts: BTreeMap<Flavour, usize> = BTreeMap::new();
    for sample in &exposition.samples {
        match Flavour::of(&sample.name) {
            None | Some(Flavour::Dcgm) => {}
            Some(flavour) => *counts.entry(flavour).or_default() += 1,
        }
    }
    if counts.contains_key(&Flavour::GoodputSim) {
        return Some(Flavour::GoodputSim);
    }
    counts
        .into_iter()
        .max_by_key(|(_, count)| *count)
        .map(|(flavour, _)| flavour)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::server::prometheus::parse;

    #[test]
    fn vllm_states_its_kv_cache_and_scheduler_in_info_gauges() {
        let body = concat!(
            "# TYPE vllm:num_requests_running gauge\n",
            "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 0.0\n",
            "vllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\",",
            "enable_prefix_caching=\"True\",engine=\"0\",gpu_memory_utilization=\"0.9\",",
            "num_cpu_blocks=\"None\",num_gpu_blocks=\"27222\",num_gpu_blocks_override=\"None\"} 1.0\n",
            "vllm:vllm_config_info{scheduler_config_max_num_batched_tokens=\"8192\",",
            "scheduler_config_max_num_seqs=\"256\"} 1.0\n",
        );
        let limits = metric_limits(&parse(body.as_bytes()));
        assert_eq!(limits.engine, Some(Flavour::Vllm));
        assert_eq!(limits.kv_tokens, Some(27_222 * 16));
        assert_eq!(limits.max_seqs, Some(256));
        assert_eq!(limits.batch_tokens, Some(8192));
        assert_eq!(limits.prefix_caching, Some(true));
    }

    #[test]
    fn data_parallel_engines_are_counted_and_their_caches_and_sequences_summed() {
        let engine = |i: u32| {
            format!(
                "vllm:cache_config_info{{block_size=\"16\",engine=\"{i}\",\
                 num_gpu_blocks=\"1000\",enable_prefix_caching=\"True\"}} 1.0\n"
            )
        };
        let scheduler = "vllm:vllm_config_info{scheduler_config_max_num_batched_tokens=\"2048\",\
                         scheduler_config_max_num_seqs=\"128\"} 1.0\n";
        let body = format!("{}{}{}{scheduler}", engine(0), engine(1), engine(2));
        let limits = metric_limits(&parse(body.as_bytes()));
        assert_eq!(limits.engines, Some(3));
        assert_eq!(limits.kv_tokens, Some(3 * 16_000));
        assert_eq!(limits.max_seqs, Some(3 * 128));
        // A step is one engine's.
        assert_eq!(limits.batch_tokens, Some(2048));
        // One engine: its own limits, and no count.
        let one = format!("{}{scheduler}", engine(0));
        let limits = metric_limits(&parse(one.as_bytes()));
        assert_eq!(
            (limits.engines, limits.kv_tokens, limits.max_seqs),
            (None, Some(16_000), Some(128))
        );
    }

    #[test]
    fn a_stated_token_count_wins_over_blocks_and_other_families_have_their_gauges() {
        let newer = "vllm:cache_config_info{block_size=\"16\",kv_cache_size_tokens=\"10576\",\
                     num_gpu_blocks=\"661\",enable_prefix_caching=\"False\"} 1\n";
        let limits = metric_limits(&parse(newer.as_bytes()));
        assert_eq!(limits.kv_tokens, Some(10_576));
        assert_eq!(limits.prefix_caching, Some(false));
        assert_eq!(limits.max_seqs, None);
        let sglang = "sglang:num_running_reqs{model_name=\"m\"} 0\n\
                      sglang:max_total_num_tokens{model_name=\"m\"} 500000\n";
        let limits = metric_limits(&parse(sglang.as_bytes()));
        assert_eq!(
            (limits.engine, limits.kv_tokens),
            (Some(Flavour::Sglang), Some(500_000))
        );
        let tgi = "tgi_queue_size 0\ntgi_batch_max_total_tokens 16000\n";
        let limits = metric_limits(&parse(tgi.as_bytes()));
        assert_eq!(
            (limits.engine, limits.kv_tokens),
            (Some(Flavour::Tgi), Some(16_000))
        );
    }

    #[test]
    fn llama_cpp_states_no_limit() {
        let body = std::fs::read("tests/fixtures/llamacpp-metrics.txt").unwrap();
        let limits = metric_limits(&parse(&body));
        assert_eq!(
            limits,
            MetricLimits {
                engine: Some(Flavour::LlamaCpp),
                ..MetricLimits::default()
            }
        );
    }
}
