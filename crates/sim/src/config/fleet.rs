//! Fleet layouts beyond identical replicas: prefill/decode disaggregation (two pools joined by
//! a KV-transfer link) and LoRA adapters (slots per replica, a load on a miss).

use serde::{Deserialize, Serialize};

use super::{ConfigError, MAX_REPLICAS};

/// Prefill/decode disaggregation: `prefill_replicas` engines compute prompts and first tokens,
/// `decode_replicas` engines generate the rest; each prompt's KV cache crosses the link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DisaggregationConfig {
    /// Engines in the prefill pool.
    pub prefill_replicas: u32,
    /// Engines in the decode pool.
    pub decode_replicas: u32,
    /// Tensor parallelism of each prefill engine (default: the engine's `tensor_parallel`).
    pub prefill_tensor_parallel: Option<u32>,
    /// Tensor parallelism of each decode engine (default: the engine's `tensor_parallel`).
    pub decode_tensor_parallel: Option<u32>,
    /// Each prefill replica's outbound KV bandwidth, GB/s (default 50: one 400 Gb/s
    /// InfiniBand NDR / RoCE NIC, the per-GPU NIC of the DGX H100 and of Mooncake's nodes).
    pub kv_link_gb_per_s: f64,
    /// Fixed cost of one transfer, ms (handshake, RDMA registration): default 1.0, an
    /// assumption (no published per-transfer figure; see docs/simulator.md#fleets).
    pub kv_link_latency_ms: f64,
    /// KV bytes per prompt token (default: the batching engine's model, every layer; the
    /// fixed-timing engine has no model and sends nothing unless this is set).
    pub kv_bytes_per_token: Option<f64>,
}

impl Default for DisaggregationConfig {
    fn default() -> Self {
        DisaggregationConfig {
            prefill_replicas: 1,
            decode_replicas: 1,
            prefill_tensor_parallel: None,
            decode_tensor_parallel: None,
            kv_link_gb_per_s: 50.0,
            kv_link_latency_ms: 1.0,
            kv_bytes_per_token: None,
        }
    }
}

impl DisaggregationConfig {
    /// Checks every field, naming the one to fix.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (field, count) in [
            ("disaggregation.prefill_replicas", self.prefill_replicas),
            ("disaggregation.decode_replicas", self.decode_replicas),
        ] {
            if !(1..=MAX_REPLICAS).contains(&count) {
                return Err(ConfigError::invalid(
                    field,
                    &format!("must be between 1 and {MAX_REPLICAS}"),
                ));
            }
        }
        for (field, tp) in [
            (
                "disaggregation.prefill_tensor_parallel",
                self.prefill_tensor_parallel,
            ),
            (
                "disaggregation.decode_tensor_parallel",
                self.decode_tensor_parallel,
            ),
        ] {
            if tp == Some(0) {
                return Err(ConfigError::invalid(field, "must be at least 1"));
            }
        }
        if !(self.kv_link_gb_per_s.is_finite() && self.kv_link_gb_per_s > 0.0) {
            return Err(ConfigError::invalid(
                "disaggregation.kv_link_gb_per_s",
                "must be a positive number",
            ));
        }
        let non_negative = |v: f64| v.is_finite() && v >= 0.0;
        if !non_negative(self.kv_link_latency_ms) {
            return Err(ConfigError::invalid(
                "disaggregation.kv_link_latency_ms",
                "must be a non-negative number",
            ));
        }
        if self.kv_bytes_per_token.is_some_and(|b| !non_negative(b)) {
            return Err(ConfigError::invalid(
                "disaggregation.kv_bytes_per_token",
                "must be a non-negative number",
            ));
        }
        Ok(())
    }
}

/// LoRA adapters on every replica: the workload's requests spread over `count` adapters;
/// a replica holds `slots` of them (vLLM's `max_loras`) and loads a missing one in `load_ms`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AdapterConfig {
    /// Distinct adapters the requests use; each request's is drawn uniformly from the seed
    /// and its id (the client sends one model name).
    pub count: u32,
    /// Adapters one replica holds at once (vLLM `--max-loras`, default 1).
    pub slots: u32,
    /// Time to load a missing adapter, ms: default 25 (an assumption: a rank-16 adapter of an
    /// 8B model, ~40 MiB, from host memory over PCIe Gen5, plus vLLM's bookkeeping).
    pub load_ms: f64,
}

impl Default for AdapterConfig {
    fn default() -> Self {
        AdapterConfig {
            count: 1,
            slots: 1,
            load_ms: 25.0,
        }
    }
}

impl AdapterConfig {
    /// Checks every field, naming the one to fix.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.count == 0 {
            return Err(ConfigError::invalid("adapters.count", "must be at least 1"));
        }
        if self.slots == 0 {
            return Err(ConfigError::invalid("adapters.slots", "must be at least 1"));
        }
        if !(self.load_ms.is_finite() && self.load_ms >= 0.0) {
            return Err(ConfigError::invalid(
                "adapters.load_ms",
                "must be a non-negative number",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::super::SimConfig;

    #[test]
    fn a_two_plus_six_layout_reads_from_toml_and_counts_its_accelerators() {
        let text = "[engine]\nkind = \"batching\"\ntensor_parallel = 2\n\
                    [disaggregation]\nprefill_replicas = 2\ndecode_replicas = 6\n\
                    decode_tensor_parallel = 1\n";
        let config: SimConfig = toml::from_str(text).unwrap();
        config.validate().unwrap();
        assert_eq!(config.accelerators(), 2 * 2 + 6);
        let back: SimConfig = toml::from_str(&toml::to_string(&config).unwrap()).unwrap();
        assert_eq!(back, config);
    }

    #[test]
    fn fleet_fields_out_of_range_are_named() {
        for (text, field) in [
            ("replicas = 2\n[disaggregation]\n", "replicas"),
            ("[disaggregation]\ndecode_replicas = 0\n", "decode_replicas"),
            (
                "[disaggregation]\nkv_link_gb_per_s = 0.0\n",
                "kv_link_gb_per_s",
            ),
            (
                "[disaggregation]\nprefill_tensor_parallel = 0\n",
                "prefill_tensor_parallel",
            ),
            ("[adapters]\nslots = 0\n", "adapters.slots"),
            ("[adapters]\nload_ms = -1.0\n", "adapters.load_ms"),
        ] {
            let config: SimConfig = toml::from_str(text).unwrap();
            let error = config.validate().unwrap_err().to_string();
            assert!(error.contains(field), "{text}: {error}");
        }
    }
}
