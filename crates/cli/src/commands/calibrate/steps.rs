//! How a server forms its steps, where it does not say: its step budget (core's step-budget
//! probe, run once after the plan's probes, which time it), whether a llama.cpp server
//! splits its steps by slot (two requests pinned to slots, before the plan) and which queued
//! request a freed slot takes (the queue-order probe, after the plan's); what each found goes
//! into the facts.

use std::time::Instant;

use goodput_core::decide::calibrate::{
    BudgetProbe, ProbeMeasurement, QueueProbe, QueueReading, ServerFacts, StepBudget, cache_probe,
    kv_sharing, queue_order, slot_split, step_budget,
};
use goodput_core::http::HttpClient;
use goodput_sim::calibrate::Facts;
use tokio_util::sync::CancellationToken;

use crate::options::calibrate::CalibrateOptions;
use crate::output::calibrate as render;

use super::probes::probe_seed;

/// Mixed into the probes' seeds.
const BUDGET_SEED: u64 = 0x4255_4447_4554_0000;
const SLOTS_SEED: u64 = 0x534c_4f54_5300_0000;
const QUEUE_SEED: u64 = 0x5155_4555_4500_0000;
const CACHE_SEED: u64 = 0x4341_4348_4500_0000;

/// Asks a llama.cpp server with three slots or more (reported by its `/props`) whether its
/// steps run as micro-batches by slot (`-np N`) or as one batch (its default, a unified KV
/// cache); a server that does not honour `id_slot` leaves it unknown (by slot, as before).
pub(super) async fn with_slot_split(
    options: &CalibrateOptions,
    (client, model): (&HttpClient, &str),
    server: &mut ServerFacts,
    cancel: &CancellationToken,
) {
    let llama = server.llama_slots && server.slots.is_some_and(|slots| slots >= 3);
    if !llama || options.budget.is_zero() {
        return;
    }
    let seed = probe_seed(options, SLOTS_SEED);
    let found = slot_split(client, model, (seed, cancel)).await;
    let line = render::slot_split_line(&found);
    eprintln!("{line}");
    server.sources.push(line);
    if let Ok(Some(split)) = found {
        server.slot_split = Some(split);
        if !split.by_slot() {
            with_kv_sharing(options, (client, model), server, cancel).await;
        }
    }
}

/// Asks a llama.cpp server whose slots ran as one batch whether they share one KV cache
/// (`--kv-unified`) or each has its own (`-np N` on a machine where the micro-batches cost
/// nothing more): the slot probe cannot tell, and the simulated pool differs by the slots.
async fn with_kv_sharing(
    options: &CalibrateOptions,
    live: (&HttpClient, &str),
    server: &mut ServerFacts,
    cancel: &CancellationToken,
) {
    let (Some(slots), Some(context)) = (server.slots, server.context_per_slot) else {
        return;
    };
    let Some(probe) = cache_probe(slots, context) else {
        let line = render::cache_skipped_line(slots, context);
        eprintln!("{line}");
        server.sources.push(line);
        return;
    };
    let seed = probe_seed(options, CACHE_SEED);
    let found = kv_sharing(live, &probe, (seed, cancel)).await;
    let line = render::cache_line(&probe, context, &found);
    eprintln!("{line}");
    server.sources.push(line);
    if let Ok(reading) = found {
        server.kv_cache = reading;
    }
}

/// The probes the plan's probes time, once after them: the step budget, then the queue order
/// (its holders' answers sized by the steps measured).
pub(super) async fn after_the_plan(
    (options, started): (&CalibrateOptions, Instant),
    (client, model): (&HttpClient, &str),
    (server, facts): (&mut ServerFacts, &mut Facts),
    (measured, exact_slots): (&[ProbeMeasurement], bool),
    cancel: &CancellationToken,
) {
    let live = (client, model);
    with_step_budget((options, started), live, (server, facts), measured, cancel).await;
    let probes = (measured, exact_slots);
    with_queue_order((options, started), live, (server, facts), probes, cancel).await;
}

/// Measures the step budget when `server` does not report it, one sequence can decode while
/// another's prompt runs (two slots or more) and the budget has time left; a measured budget
/// becomes the server's, a lower bound raises the typical one the fit starts from, a prompt
/// run beside the decodes makes the fit prefer no bound.
async fn with_step_budget(
    (options, started): (&CalibrateOptions, Instant),
    (client, model): (&HttpClient, &str),
    (server, facts): (&mut ServerFacts, &mut Facts),
    measured: &[ProbeMeasurement],
    cancel: &CancellationToken,
) {
    if server.batch_tokens.is_some() || facts.slots < 2 || started.elapsed() >= options.budget {
        return;
    }
    let Some(probe) = BudgetProbe::sized(facts.context_per_slot, measured) else {
        return;
    };
    let seed = probe_seed(options, BUDGET_SEED);
    let found = step_budget(client, model, &probe, (seed, cancel)).await;
    let line = render::step_budget_line(&probe, &found);
    eprintln!("{line}");
    server.sources.push(line);
    match found {
        Ok(Some(StepBudget::Measured { tokens, .. })) => {
            server.batch_tokens = Some(tokens);
            facts.batch_tokens = tokens;
        }
        Ok(Some(StepBudget::AtLeast { tokens })) => {
            facts.batch_tokens = facts.batch_tokens.max(tokens);
        }
        Ok(Some(StepBudget::Beside)) => facts.prompts_beside_decodes = true,
        Ok(None) | Err(_) => {}
    }
}

/// Reads which queued request a freed slot takes, on a server whose slots are known exactly
/// (reported, or a wave that queued) while the budget has time left; first come first served
/// stays when the probe shows no one order.
async fn with_queue_order(
    (options, started): (&CalibrateOptions, Instant),
    (client, model): (&HttpClient, &str),
    (server, facts): (&mut ServerFacts, &mut Facts),
    (measured, exact_slots): (&[ProbeMeasurement], bool),
    cancel: &CancellationToken,
) {
    if !exact_slots || started.elapsed() >= options.budget {
        return;
    }
    let Some(probe) = QueueProbe::sized(facts.slots, measured) else {
        return;
    };
    let seed = probe_seed(options, QUEUE_SEED);
    let began = Instant::now();
    let found = queue_order(client, model, &probe, (seed, cancel)).await;
    let line = render::queue_order_line(&probe, &found, began.elapsed());
    eprintln!("{line}");
    server.sources.push(line);
    if let Ok(QueueReading::Read { order, .. }) = found {
        server.queue_order = Some(order);
        facts.queue_order = order;
    }
}
