//! The explanation's figures and wording.

use std::time::Duration;

use super::*;

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
