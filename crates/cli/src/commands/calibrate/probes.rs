//! What `goodput calibrate` measures and tells the simulator: the probe plan run pass after
//! pass until the budget ends ([`run_probes`]), a measured probe as the fit sees it
//! ([`measured_probe`]), and the simulator's facts from the server's ([`facts`]).

use std::time::Instant;

use anyhow::Result;
use goodput_core::decide::calibrate::{
    BatchLimit, CacheReading, CalibrationProbe, ProbeMeasurement, ServerFacts, WAVES, batch_limit,
    measure,
};
use goodput_core::http::HttpClient;
use goodput_core::observe::server::concepts::Flavour;
use goodput_protocol::hardware::DType;
use goodput_sim::calibrate::{Facts, MeasuredProbe, ProbeShape, queued_at_twice};
use goodput_sim::config::{EnginePolicy, SlotPromptSimilarity};
use tokio_util::sync::CancellationToken;

use crate::options::calibrate::CalibrateOptions;
use crate::output::calibrate as render;

/// Runs `shapes` in order, `--passes` times over, until the budget (counted from `started`)
/// is spent: `out[k][i]` is shape `i` in pass `k` (the last pass may stop short).
pub(super) async fn run_probes(
    options: &CalibrateOptions,
    client: HttpClient,
    model: &str,
    (shapes, started): (&[ProbeShape], Instant),
    cancel: &CancellationToken,
) -> Result<Vec<Vec<ProbeMeasurement>>> {
    let seed = probe_seed(options, 0);
    let total = shapes.len() * options.passes as usize;
    let mut out: Vec<Vec<ProbeMeasurement>> = Vec::new();
    for run in 0..total {
        let (pass, index) = (run / shapes.len(), run % shapes.len());
        if started.elapsed() >= options.budget {
            eprintln!(
                "calibrate: budget {:?} spent; {} of {total} probe runs skipped ({} passes of {})",
                options.budget,
                total - run,
                options.passes,
                shapes.len()
            );
            break;
        }
        let probe = calibration_probe(&shapes[index]);
        let seed = seed.wrapping_add(run as u64);
        let measured = match measure(client.clone(), model, &probe, seed, cancel.clone()).await {
            Ok(measured) => measured,
            // A later pass that fails (or is cancelled) keeps the passes already measured.
            Err(e) if pass > 0 => {
                eprintln!(
                    "calibrate: pass {} stopped at probe {}: {e}; the probes measured so far are \
                     used",
                    pass + 1,
                    index + 1
                );
                break;
            }
            Err(e) => return Err(e.into()),
        };
        let label = (options.passes > 1).then_some((pass, options.passes));
        eprintln!(
            "{}",
            render::probe_line((index, shapes.len()), label, &measured)
        );
        if index == 0 {
            out.push(Vec::new());
        }
        out[pass].push(measured);
    }
    Ok(out)
}

/// The seed of a kind of probe: `--seed`, or a fresh one on every run (a server that caches
/// prompts — llama.cpp slots, vLLM prefix caching — must not answer a probe from an earlier
/// run's cache), mixed with `kind` so each kind sends prompts of its own.
pub(super) fn probe_seed(options: &CalibrateOptions, kind: u64) -> u64 {
    options.seed.unwrap_or_else(crate::options::random_seed) ^ kind
}

/// Mixed into the waves' seed (the probes take `--seed` plus their run's number).
const WAVE_SEED: u64 = 0x5741_5645_0000_0000;

/// `server`'s facts, with the requests it runs at once measured ([`batch_limit`]) when it
/// does not report its slots, and what the waves found.
pub(super) async fn with_batch_limit(
    options: &CalibrateOptions,
    client: &HttpClient,
    model: &str,
    server: &ServerFacts,
    cancel: &CancellationToken,
) -> Result<(ServerFacts, Option<BatchLimit>)> {
    let mut server = server.clone();
    if server.slots.is_some() || options.budget.is_zero() {
        return Ok((server, None));
    }
    // Prompts of their own: a server's prompt cache must not answer a probe from a wave.
    let seed = probe_seed(options, WAVE_SEED);
    let Some(limit) = batch_limit(client, model, &WAVES, (seed, cancel)).await? else {
        return Ok((server, None));
    };
    eprintln!("{}", render::batch_limit_line(&limit));
    server.slots = Some(limit.running.max(1));
    server.sources.push(format!(
        "a wave of {} requests sent together: {}",
        limit.wave,
        if limit.is_lower_bound() {
            format!("all ran at once, so at least {} slots", limit.running)
        } else {
            format!("{} ran at once", limit.running)
        }
    ));
    Ok((server, Some(limit)))
}

/// When every wave ran whole (the slots a lower bound) and the plan's probe at twice those
/// slots did not queue either, the server runs at least twice as many at once: `server` and
/// `facts` say so (the engine would queue what the server ran).
pub(super) fn beyond_the_waves(
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
fn calibration_probe(shape: &ProbeShape) -> CalibrationProbe {
    CalibrationProbe {
        concurrency: shape.concurrency,
        input_tokens: shape.prompt_tokens,
        output_tokens: shape.output_tokens,
        requests: shape.requests,
    }
}

/// The fit's view of a measured probe: the prompt as the server counted it.
pub(super) fn measured_probe(m: &ProbeMeasurement) -> MeasuredProbe {
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
pub(super) fn facts(model: &str, server: &ServerFacts) -> Facts {
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
