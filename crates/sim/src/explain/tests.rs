//! The explanation's figures and wording.

use std::time::Duration;

use super::*;
use crate::config::EnginePolicy;

#[test]
fn batching_explanation_names_every_figure() {
    let text = explain(&SimConfig::default());
    for needle in [
        "parameters",
        "8.030 B",
        "KV bytes per token",
        "131072 B",
        "capacity",
        "blocks",
        "memory",
        "compute",
        "overhead",
        "tokens/s",
        "prefill",
        "output tok/s",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    let rows = text
        .lines()
        .filter(|line| line.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .count();
    assert_eq!(rows, DECODE_BATCHES.len(), "{text}");
}

#[test]
fn micro_batches_by_slot_are_said_when_configured() {
    let plain = explain(&SimConfig::default());
    assert!(!plain.contains("micro-batches"), "{plain}");
    assert!(!plain.contains("similarity"), "{plain}");
    let slots = |slot_prompt_similarity| SimConfig {
        engine: EngineConfig::Batching(BatchingConfig {
            slot_ubatch_tokens: Some(256),
            slot_prompt_similarity,
            ..BatchingConfig::default()
        }),
        ..SimConfig::default()
    };
    let text = explain(&slots(None));
    assert!(text.contains("at most 256 tokens"), "{text}");
    let similarity = crate::config::SlotPromptSimilarity {
        threshold: 0.1,
        shared_prefix_tokens: 10,
    };
    let text = explain(&slots(Some(similarity)));
    assert!(text.contains("fewer than 100 tokens"), "{text}");
    assert!(text.contains("more than 10 % of itself"), "{text}");
}

#[test]
fn decode_table_is_capped_by_max_num_seqs() {
    let config = SimConfig {
        engine: EngineConfig::Batching(BatchingConfig {
            max_num_seqs: Some(40),
            ..BatchingConfig::default()
        }),
        ..SimConfig::default()
    };
    let text = explain(&config);
    assert!(text.contains("(capped from 64)"), "{text}");
    assert!(
        !text.contains("(capped from 128)"),
        "duplicates are dropped:\n{text}"
    );
}

#[test]
fn fixed_explanation_gives_service_time_and_capacity() {
    let fixed = FixedTimingConfig {
        ttft: Duration::from_millis(200),
        itl: Duration::from_millis(10),
        slots: 4,
        ..FixedTimingConfig::default()
    };
    let config = SimConfig {
        engine: EngineConfig::Fixed(fixed),
        ..SimConfig::default()
    };
    let text = explain(&config);
    // S = 200 + 255 · 10 = 2750 ms; capacity = 4 / 2.75 s.
    assert!(text.contains("2750.000 ms"), "{text}");
    assert!(text.contains("1.455 requests/s"), "{text}");
}

#[test]
fn a_disaggregated_layout_and_adapters_are_said() {
    let mut config = SimConfig::default();
    crate::config::Layout::parse("2p:tp2+6d")
        .and_then(|layout| layout.apply(&mut config))
        .expect("a layout");
    let text = explain(&config);
    assert!(
        text.contains("2 prefill engine(s) at TP 2 + 6 decode engine(s) at TP 1"),
        "{text}"
    );
    assert!(!text.contains("behind one load balancer"), "{text}");
    config.adapters = Some(crate::config::AdapterConfig {
        count: 8,
        slots: 2,
        load_ms: 25.0,
    });
    let text = explain(&config);
    assert!(
        text.contains("LoRA adapters: 8 in use, 2 slot(s) per replica, 25 ms"),
        "{text}"
    );
}

#[test]
fn the_kv_pool_is_explained_as_each_engine_reads_its_memory_fraction() {
    let pool_line = |policy| {
        let mut config = SimConfig::default();
        if let EngineConfig::Batching(batching) = &mut config.engine {
            batching.policy = policy;
        }
        let text = explain(&config);
        let line = text.lines().find(|l| l.trim_start().starts_with("pool"));
        line.unwrap_or_default().to_string()
    };
    let vllm = pool_line(EnginePolicy::Vllm);
    assert!(
        vllm.contains("memory · utilisation · tp − weights"),
        "{vllm}"
    );
    let sglang = pool_line(EnginePolicy::Sglang);
    assert!(
        sglang.contains("static fraction") && sglang.contains("SGLang"),
        "{sglang}"
    );
    let trt = pool_line(EnginePolicy::TensorrtLlm);
    assert!(
        trt.contains("free fraction · (memory · tp") && trt.contains("TensorRT-LLM"),
        "{trt}"
    );
    // 8B on an H100 at 0.9: the static reading adds back the activations (5.5 GiB), the free
    // one gives up a tenth of what the model leaves.
    let gib = |line: &str| -> f64 {
        let figure = line.split_whitespace().nth(1).unwrap_or_default();
        figure.parse().unwrap_or(f64::NAN)
    };
    assert!(
        (gib(&sglang) - gib(&vllm) - 5.5).abs() < 0.01,
        "{vllm}\n{sglang}"
    );
    let free = 80.0 - 16.06e9 / GIB - 5.65;
    assert!((gib(&trt) - 0.9 * free).abs() < 0.01, "{trt}");
}
