//! Tests of the calibrated configuration, the equivalent model, the probe plan and the chat
//! template's tokens.
#![allow(clippy::unwrap_used)]

use super::*;

#[test]
fn the_equivalent_model_has_the_servers_parameter_count() {
    let facts = Facts {
        hidden: 512,
        vocab: 32_000,
        params: 42_082_816.0,
        ..Facts::default()
    };
    let model = facts.model();
    assert!(
        (model.params() / facts.params - 1.0).abs() < 1e-3,
        "{model:?}"
    );
}

#[test]
fn the_calibrated_config_is_valid_and_round_trips_through_toml() {
    let constants = Constants {
        weight_gb_per_sec: 18.0,
        gemm_gflops: 90.0,
        attention_gflops: 40.0,
        kv_gb_per_sec: 30.0,
        batch_factors: vec![
            BatchFactor {
                tokens: 1,
                factor: 6.0,
            },
            BatchFactor {
                tokens: 4,
                factor: 3.0,
            },
        ],
        full_rate_tokens: 64,
        latency_ms: 2.0,
        latency_holds_slot: false,
    };
    for holds_slot in [false, true] {
        let constants = Constants {
            latency_holds_slot: holds_slot,
            ..constants.clone()
        };
        let config = calibrated_config(&Facts::default(), &constants);
        config.validate().unwrap();
        let text = toml::to_string(&config).unwrap();
        let back: SimConfig = toml::from_str(&text).unwrap();
        back.validate().unwrap();
        assert_eq!(back, config);
        let EngineConfig::Batching(engine) = &config.engine else {
            panic!("{config:?}")
        };
        assert_eq!(
            engine.gemm_batch_factors,
            vec![[1.0, 6.0], [4.0, 3.0], [64.0, 1.0]]
        );
        // The latency is in one place: before the queue, or in the slot.
        let frontend = engine.effective_overheads().frontend_us;
        let in_slot = engine.slot_setup_us.unwrap_or(0.0);
        assert_eq!(
            (frontend, in_slot),
            if holds_slot {
                (0.0, 2000.0)
            } else {
                (2000.0, 0.0)
            }
        );
    }
}

#[test]
fn the_template_tokens_are_the_median_excess_over_the_simulators_count() {
    // llama.cpp's test model: 28 template tokens and a tokenizer 2 % longer than cl100k.
    let probes = [
        (16, 44.0),
        (512, 550.0),
        (64, 93.0),
        (256, 288.0),
        (64, 93.2),
    ];
    assert_eq!(chat_template_tokens(&probes), 22);
    assert_eq!(chat_template_tokens(&[(64, 71.0)]), 0);
    // A server counting the text alone (the simulator's chat adds 7), or fewer still.
    assert_eq!(chat_template_tokens(&[(64, 64.0), (256, 256.0)]), -7);
    assert_eq!(chat_template_tokens(&[(64, 60.0)]), -11);
    assert_eq!(chat_template_tokens(&[]), 0);
    let config = calibrated_config(
        &Facts {
            chat_template_tokens: 22,
            ..Facts::default()
        },
        &unit_constants(),
    );
    assert_eq!(config.chat_template_tokens, 22);
}

/// A server of 4 slots holding 2,048 tokens each.
fn four_slots_of_2048() -> Facts {
    Facts {
        slots: 4,
        context_per_slot: 2048,
        ..Facts::default()
    }
}

#[test]
fn the_sweep_takes_every_level_to_four_then_doubles_to_the_slots() {
    assert_eq!(sweep(1), Vec::<u32>::new());
    assert_eq!(sweep(4), vec![2, 3, 4]);
    assert_eq!(sweep(12), vec![2, 3, 4, 8, 12]);
    assert_eq!(sweep(16), vec![2, 3, 4, 8, 16]);
}

#[test]
fn the_batch_points_are_the_decode_batches_and_the_prompts_below_the_full_rate() {
    let facts = four_slots_of_2048();
    let (points, full) = batch_layout(&facts, &plan(&facts, 1));
    assert_eq!(full, 128);
    assert_eq!(points, vec![1, 2, 3, 4, 16]);
    // As the server counts them: the sweep's prompts a token above the prefill probe's.
    let counted: Vec<ProbeShape> = plan(&facts, 1)
        .into_iter()
        .map(|p| ProbeShape {
            prompt_tokens: p.prompt_tokens + 28 + u32::from(p.concurrency > 1),
            ..p
        })
        .collect();
    let (points, full) = batch_layout(&facts, &counted);
    assert_eq!(full, 156);
    assert_eq!(points, vec![1, 2, 3, 4, 44]);
}

#[test]
fn the_speed_reference_is_the_plans_probe_with_every_slot_busy() {
    let facts = four_slots_of_2048();
    let reference = speed_reference(&facts, 3);
    let shape = (
        reference.concurrency,
        reference.prompt_tokens,
        reference.output_tokens,
        reference.requests,
    );
    assert_eq!(shape, (4, 64, 48, 12));
    assert!(plan(&facts, 3).contains(&reference));
    assert!(!held_out(&facts, 3).contains(&reference));
}

#[test]
fn slots_sharing_one_cache_get_the_context_once() {
    let constants = unit_constants();
    let blocks = |facts: &Facts| match calibrated_config(facts, &constants).engine {
        EngineConfig::Batching(engine) => engine.kv_blocks_override,
        other => panic!("{other:?}"),
    };
    // 16-token blocks, and one spare.
    assert_eq!(blocks(&four_slots_of_2048()), Some(4 * 2048 / 16 + 1));
    let shared = Facts {
        shared_kv: true,
        ..four_slots_of_2048()
    };
    assert_eq!(blocks(&shared), Some(2048 / 16 + 1));
}

#[test]
fn a_kv_cache_the_server_states_sizes_the_pool_and_its_family_the_admission() {
    let facts = Facts {
        kv_tokens: Some(3200),
        engine_policy: EnginePolicy::Sglang,
        prefix_caching: true,
        queue_order: QueueOrder::LongestOutput,
        ..four_slots_of_2048()
    };
    let EngineConfig::Batching(engine) = calibrated_config(&facts, &unit_constants()).engine else {
        panic!("not a batching engine");
    };
    assert_eq!(engine.kv_blocks_override, Some(3200 / 16 + 1));
    assert_eq!(engine.policy, EnginePolicy::Sglang);
    assert!(engine.prefix_caching);
    assert_eq!(engine.queue_order, QueueOrder::LongestOutput);
    // A stated cache smaller than the slots' contexts: the engine can run out of blocks.
    assert!(engine.kv_blocks() < u64::from(4 * 2048 / engine.block_size));
}

#[test]
fn engines_behind_one_endpoint_are_replicas_with_a_share_each() {
    // Two vLLM data-parallel engines: 8 sequences and 6,400 KV tokens between them, a step
    // budget of 512 each.
    let facts = Facts {
        slots: 8,
        kv_tokens: Some(6400),
        batch_tokens: 512,
        engines: 2,
        ..four_slots_of_2048()
    };
    let config = calibrated_config(&facts, &unit_constants());
    assert_eq!(config.replicas, 2);
    assert_eq!(config.routing, Routing::LeastLoaded);
    let EngineConfig::Batching(engine) = &config.engine else {
        panic!("not a batching engine");
    };
    assert_eq!(engine.max_num_seqs, Some(4));
    assert_eq!(engine.kv_blocks_override, Some(3200 / 16 + 1));
    assert_eq!(engine.max_num_batched_tokens, Some(512));
    config.validate().unwrap();
    let text = toml::to_string(&config).unwrap();
    let back: SimConfig = toml::from_str(&text).unwrap();
    assert_eq!((back.replicas, back.routing), (2, Routing::LeastLoaded));
    // One engine: one replica, the default routing, the facts' figures whole.
    let one = calibrated_config(&four_slots_of_2048(), &unit_constants());
    assert_eq!((one.replicas, one.routing), (1, Routing::RoundRobin));
    // Facts written before the field read as one engine.
    let written = serde_json::to_value(four_slots_of_2048()).unwrap();
    assert!(written.get("engines").is_none(), "{written}");
    let read: Facts = serde_json::from_value(written).unwrap();
    assert_eq!(read.engines, 1);
}

/// Every rate 1, no factors, no latency.
fn unit_constants() -> Constants {
    Constants {
        weight_gb_per_sec: 1.0,
        gemm_gflops: 1.0,
        attention_gflops: 1.0,
        kv_gb_per_sec: 1.0,
        batch_factors: Vec::new(),
        full_rate_tokens: 64,
        latency_ms: 0.0,
        latency_holds_slot: false,
    }
}
