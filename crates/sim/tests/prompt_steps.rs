//! Whether a step that carries prompts also carries the running decodes: SGLang runs prompts in
//! steps of their own (`enable_mixed_chunk` off, its default), as vLLM V0 does without chunked
//! prefill; vLLM V1, V0 with chunked prefill and TensorRT-LLM mix them into the decodes' step.
//! One request decoding, a second arriving while it does.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use support::engine_request as request;

use goodput_sim::config::{BatchingConfig, EnginePolicy};
use goodput_sim::engine::batching::BatchingEngine;
use goodput_sim::engine::{EngineEvent, StepSummary};
use goodput_sim::virtual_time::Simulation;

/// The steps of a run under `policy`: a 64-token prompt answered with 100 tokens, and a
/// 512-token prompt arriving 50 ms later.
fn steps(policy: EnginePolicy) -> Vec<StepSummary> {
    steps_of(BatchingConfig {
        policy,
        ..BatchingConfig::default()
    })
}

/// The steps of that run on `config`.
fn steps_of(config: BatchingConfig) -> Vec<StepSummary> {
    let mut sim = Simulation::new(Box::new(BatchingEngine::new(config, 1)));
    sim.submit(Duration::ZERO, request(0, 64, 100));
    sim.submit(Duration::from_millis(50), request(1, 512, 10));
    let mut events = Vec::new();
    sim.run_until_collecting(Duration::from_secs(60), &mut events);
    events
        .into_iter()
        .filter_map(|e| match e {
            EngineEvent::Step(step) => Some(step),
            _ => None,
        })
        .collect()
}

/// The step that computed the second prompt.
fn second_prompt_step(steps: &[StepSummary]) -> StepSummary {
    *steps.iter().find(|s| s.prefill_tokens == 512).unwrap()
}

/// The second prompt's step, checked to carry that prompt alone, whole, with decodes in steps
/// after it (the first request's answer went on).
fn prompt_step_alone(steps: &[StepSummary]) -> StepSummary {
    let prompt = second_prompt_step(steps);
    assert_eq!(
        (prompt.sequences, prompt.batched_tokens),
        (1, 512),
        "{steps:?}"
    );
    assert!(
        steps
            .iter()
            .any(|s| s.started > prompt.started && s.prefill_tokens == 0),
        "{steps:?}"
    );
    prompt
}

#[test]
fn sglang_runs_a_prompt_in_a_step_of_its_own() {
    prompt_step_alone(&steps(EnginePolicy::Sglang));
}

#[test]
fn vllm_and_tensorrt_llm_put_the_prompt_in_the_decodes_step() {
    for policy in [EnginePolicy::Vllm, EnginePolicy::TensorrtLlm] {
        let prompt = second_prompt_step(&steps(policy));
        assert_eq!(prompt.sequences, 2, "{policy:?}: {prompt:?}");
        assert_eq!(prompt.batched_tokens, 513, "{policy:?}: {prompt:?}");
    }
}

#[test]
fn vllm_v0_runs_a_prompt_alone_without_chunked_prefill_and_mixes_with_it() {
    let v0 = |chunked_prefill| {
        steps_of(BatchingConfig {
            policy: EnginePolicy::VllmV0,
            chunked_prefill,
            ..BatchingConfig::default()
        })
    };
    prompt_step_alone(&v0(false));
    // With chunked prefill V0 schedules the decodes first and the prompt beside them, in
    // chunks of its 512-token budget: the decode's token and 511 of the prompt's.
    let mixed = v0(true);
    let first_chunk = mixed
        .iter()
        .find(|s| s.started >= Duration::from_millis(50) && s.prefill_tokens > 0)
        .unwrap();
    assert_eq!(
        (
            first_chunk.sequences,
            first_chunk.batched_tokens,
            first_chunk.prefill_tokens
        ),
        (2, 512, 511),
        "{first_chunk:?}"
    );
}

#[test]
fn a_prompt_run_alone_has_the_whole_token_budget_the_decodes_it_displaces_take_none() {
    // A 512-token budget and a 512-token prompt arriving while a decode runs: the decode's
    // token does not shorten the prompt's step (SGLang's `PrefillAdder` without mixed chunks
    // budgets prompts alone; vLLM V0 schedules prompts before the running decodes).
    for (policy, chunked_prefill) in [(EnginePolicy::Sglang, true), (EnginePolicy::VllmV0, false)] {
        let steps = steps_of(BatchingConfig {
            policy,
            chunked_prefill,
            max_num_batched_tokens: Some(512),
            ..BatchingConfig::default()
        });
        let prompt = prompt_step_alone(&steps);
        // Not deferred until the first request finished: both decode after it.
        assert!(
            steps
                .iter()
                .any(|s| s.started > prompt.started && s.prefill_tokens == 0 && s.sequences == 2),
            "{policy:?}: {steps:?}"
        );
    }
}
