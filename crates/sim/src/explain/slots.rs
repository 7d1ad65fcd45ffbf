//! `goodput sim --explain` on sequence slots: llama.cpp's micro-batches by slot and slots by
//! prompt similarity, a slot's setup, and the launch window that keeps clients beyond the
//! slots in step.

use std::fmt::Write as _;

use crate::config::BatchingConfig;

/// What a configuration with llama.cpp's slot rules does beyond a plain continuous batch.
pub(super) fn explain_slots(out: &mut String, config: &BatchingConfig) {
    if let Some(cap) = config.slot_ubatch_tokens {
        let _ = writeln!(
            out,
            "micro-batches by slot (llama.cpp, a KV stream per slot): each request takes the \
             free slot released longest ago; a step runs as micro-batches of consecutive slots \
             with equal tokens each, at most {cap} tokens, each costed as below (the tables \
             assume consecutive slots: one micro-batch)"
        );
    }
    if let Some(similarity) = &config.slot_prompt_similarity {
        let _ = writeln!(
            out,
            "slots by prompt similarity: a prompt of fewer than {:.0} tokens shares more than \
             {:.0} % of itself ({} tokens every prompt starts with) with a used free slot and \
             takes the lowest such slot instead",
            f64::from(similarity.shared_prefix_tokens) / similarity.threshold,
            similarity.threshold * 100.0,
            similarity.shared_prefix_tokens
        );
    }
    if let Some(us) = config.slot_setup_us {
        let _ = writeln!(
            out,
            "slot setup: a request holds its sequence slot {:.3} ms before its prompt is \
             scheduled (the other sequences run on meanwhile); one queued for a slot waits for \
             it after the slot frees",
            us / 1000.0
        );
    }
    if let Some(us) = config.launch_window_us {
        let _ = writeln!(
            out,
            "launch window: a step launching a request that waited for a free slot starts \
             {:.3} ms after the step before it, and requests arriving meanwhile join it \
             (clients re-sending at once stay in step beyond the slots)",
            us / 1000.0
        );
    }
}
