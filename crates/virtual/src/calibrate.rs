//! Calibration's bridge between what the server told and measured (`goodput-core`'s
//! `decide::calibrate`) and the simulator's facts and probes (`goodput-sim`'s `calibrate`):
//! the facts the simulator is fitted to ([`facts`]), a probe as core runs it
//! ([`calibration_probe`]) and as the fit sees it ([`measured_probe`]), and the slots beyond the
//! waves ([`beyond_the_waves`]).

use goodput_core::decide::calibrate::{
    BatchLimit, CacheReading, CalibrationProbe, ProbeMeasurement, ServerFacts,
};
use goodput_core::observe::server::concepts::Flavour;
use goodput_protocol::hardware::DType;
use goodput_sim::calibrate::{Facts, MeasuredProbe, ProbeShape, queued_at_twice};
use goodput_sim::config::{EnginePolicy, SlotPromptSimilarity};

/// When every wave ran whole (the slots a lower bound) and the plan's probe at twice those
/// slots did not queue either, the server runs at least twice as many at once: `server` and
/// `facts` say so (the engine would queue what the server ran).
pub fn beyond_the_waves(
    (server, facts): (&mut ServerFacts, &mut Facts),
    limit: Option<BatchLimit>,
    probes: &[MeasuredProbe],
) {
    let Some(limit) = limit.filter(BatchLimit::is_lower_bound) else {
        return;
    };
    if queued_at_twice(probes, facts.slots) != Some(false) {
        return;
    }
    facts.slots = facts.slots.saturating_mul(2);
    server.slots = Some(facts.slots);
    server.sources.push(format!(
        "the probe at {} clients did not queue either: at least {} slots (beyond the waves' {})",
        facts.slots, facts.slots, limit.running
    ));
}

/// The probe that measures `shape`.
pub fn calibration_probe(shape: &ProbeShape) -> CalibrationProbe {
    CalibrationProbe {
        concurrency: shape.concurrency,
        input_tokens: shape.prompt_tokens,
        output_tokens: shape.output_tokens,
        requests: shape.requests,
    }
}

/// The fit's view of a measured probe: the prompt as the server counted it.
pub fn measured_probe(m: &ProbeMeasurement) -> MeasuredProbe {
    MeasuredProbe {
        shape: ProbeShape {
            concurrency: m.probe.concurrency,
            prompt_tokens: m.prompt_tokens.round().max(1.0) as u32,
            output_tokens: m.probe.output_tokens,
            requests: m.probe.requests,
        },
        ttft: m.ttft,
        tpot: m.tpot,
    }
}

/// The simulator's facts from the server's (defaults for what it did not say).
pub fn facts(model: &str, server: &ServerFacts) -> Facts {
    let defaults = Facts::default();
    // llama.cpp's slots (the server that reports them in `/props`), unless the slot probe
    // found one batch a step (a unified KV cache, shared by the slots); any other engine's
    // (found by the waves, stated in `/metrics`) run one batch a step.
    let by_slot = server.llama_slots && server.slot_split.is_none_or(|split| split.by_slot());
    Facts {
        model_name: model.to_string(),
        slots: server.slots.unwrap_or(defaults.slots),
        context_per_slot: server.context_per_slot.unwrap_or(defaults.context_per_slot),
        batch_tokens: server.batch_tokens.unwrap_or(defaults.batch_tokens),
        hidden: server.hidden.unwrap_or(defaults.hidden),
        vocab: server.vocab.unwrap_or(defaults.vocab),
        params: server.params.unwrap_or(defaults.params),
        weight_dtype: server
            .weight_format
            .as_deref()
            .and_then(gguf_dtype)
            .unwrap_or(defaults.weight_dtype),
        kv_dtype: defaults.kv_dtype,
        chat_template_tokens: defaults.chat_template_tokens,
        // llama.cpp (the server that reports its slots) with `-np N` gives every slot a KV
        // stream and splits each step into micro-batches by slot; without, the slots share
        // one cache of the context each reports.
        slot_ubatch_tokens: server
            .slots
            .filter(|_| by_slot)
            .map(|_| server.ubatch_tokens.unwrap_or(LLAMA_CPP_UBATCH)),
        // One batch a step is a unified cache or slots of their own whose micro-batches cost
        // nothing more; the cache probe tells, and unread the slots keep their own.
        shared_kv: server.llama_slots
            && !by_slot
            && matches!(server.kv_cache, Some(CacheReading::Shared { .. })),
        queue_order: server.queue_order.unwrap_or_default(),
        kv_tokens: server.kv_tokens,
        engine_policy: engine_policy(server.engine),
        prefix_caching: server.prefix_caching.unwrap_or(false),
        engines: server.engines.unwrap_or(1),
        // Read by the step-budget probe, which runs after the plan's probes.
        prompts_beside_decodes: false,
        // It also returns a prompt to a slot whose last prompt shares enough of it; what every
        // prompt shares is the template's header it tokenized for us.
        slot_prompt_similarity: server.slots.and(server.shared_prefix_tokens).map(
            |shared_prefix_tokens| SlotPromptSimilarity {
                threshold: LLAMA_CPP_SLOT_SIMILARITY,
                shared_prefix_tokens,
            },
        ),
    }
}

/// llama.cpp's default micro-batch (`--ubatch-size`), for servers that do not report theirs.
const LLAMA_CPP_UBATCH: u32 = 512;
/// llama.cpp's default `--slot-prompt-similarity` (its `/props` does not report it).
const LLAMA_CPP_SLOT_SIMILARITY: f64 = 0.1;

/// The weight format of a GGUF `ftype` name (`all F32`, `MOSTLY_F16`, `Q4_0`, …).
fn gguf_dtype(ftype: &str) -> Option<DType> {
    let upper = ftype.to_ascii_uppercase();
    [
        ("BF16", DType::Bf16),
        ("F32", DType::Fp32),
        ("F16", DType::Fp16),
        ("Q8", DType::Int8),
        ("Q4", DType::Int4),
    ]
    .into_iter()
    .find(|(name, _)| upper.contains(name))
    .map(|(_, dtype)| dtype)
}

/// Whose admission and preemption a server of `engine`'s family runs: vLLM's (blocks on
/// demand, the newest preempted), SGLang's (a share of every answer reserved), TGI's (the
/// whole `max_tokens` answer reserved, as TensorRT-LLM's guaranteed no-evict); vLLM's for
/// any other.
fn engine_policy(engine: Option<Flavour>) -> EnginePolicy {
    match engine {
        Some(Flavour::Sglang) => EnginePolicy::Sglang,
        Some(Flavour::Tgi) => EnginePolicy::TensorrtLlm,
        _ => EnginePolicy::Vllm,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use goodput_core::decide::calibrate::SlotSplit;

    #[test]
    fn llama_cpp_slots_are_simulated_with_micro_batches_by_slot_unless_it_has_none() {
        let llama = ServerFacts {
            slots: Some(4),
            llama_slots: true,
            ..ServerFacts::default()
        };
        assert_eq!(
            facts("m", &llama).slot_ubatch_tokens,
            Some(LLAMA_CPP_UBATCH)
        );
        // Slots another engine runs (found by the waves, or stated in its metrics): one batch
        // a step, a cache per slot's context.
        let waves = ServerFacts {
            llama_slots: false,
            ..llama.clone()
        };
        let simulated = facts("m", &waves);
        assert_eq!(simulated.slot_ubatch_tokens, None);
        assert!(!simulated.shared_kv);
        let reported = ServerFacts {
            ubatch_tokens: Some(256),
            ..llama
        };
        assert_eq!(facts("m", &reported).slot_ubatch_tokens, Some(256));
        let silent = ServerFacts::default();
        assert_eq!(facts("m", &silent).slot_ubatch_tokens, None);
        // Decodes a slot apart no slower than side by side: one batch a step, one shared cache.
        let unified = ServerFacts {
            slot_split: Some(SlotSplit {
                side_by_side: 0.0258,
                apart: 0.0251,
            }),
            ..reported.clone()
        };
        let simulated = facts("m", &unified);
        assert_eq!(simulated.slot_ubatch_tokens, None);
        // ... and a cache each until the cache probe says they share one (`-np 4` on a machine
        // where the second micro-batch costs nothing: 15.8 against 16.4 ms, 2026-12-04).
        assert!(!simulated.shared_kv);
        let per_slot = ServerFacts {
            kv_cache: Some(CacheReading::PerSlot),
            ..unified.clone()
        };
        assert!(!facts("m", &per_slot).shared_kv);
        let shared = ServerFacts {
            kv_cache: Some(CacheReading::Shared { refused: 4 }),
            ..unified
        };
        assert!(facts("m", &shared).shared_kv);
        assert!(!facts("m", &reported).shared_kv);
    }

    #[test]
    fn a_server_that_tokenizes_its_template_gets_slots_by_prompt_similarity() {
        let llama = ServerFacts {
            slots: Some(4),
            shared_prefix_tokens: Some(10),
            ..ServerFacts::default()
        };
        assert_eq!(
            facts("m", &llama).slot_prompt_similarity,
            Some(SlotPromptSimilarity {
                threshold: 0.1,
                shared_prefix_tokens: 10
            })
        );
        let untold = ServerFacts {
            shared_prefix_tokens: None,
            ..llama.clone()
        };
        assert_eq!(facts("m", &untold).slot_prompt_similarity, None);
        let slotless = ServerFacts {
            slots: None,
            ..llama
        };
        assert_eq!(facts("m", &slotless).slot_prompt_similarity, None);
    }
}
