//! The step budget of a server that does not report it: core's step-budget probe run once
//! after the plan's probes (which time it), and what it found put into the facts.

use std::time::Instant;

use goodput_core::decide::calibrate::{
    BudgetProbe, ProbeMeasurement, ServerFacts, StepBudget, step_budget,
};
use goodput_core::http::HttpClient;
use goodput_sim::calibrate::Facts;
use tokio_util::sync::CancellationToken;

use crate::args::calibrate::CalibrateArgs;
use crate::output::calibrate as render;

/// Mixed into the probe's seed.
const BUDGET_SEED: u64 = 0x4255_4447_4554_0000;

/// Measures the step budget when `server` does not report it, one sequence can decode while
/// another's prompt runs (two slots or more) and the budget has time left; a measured budget
/// becomes the server's, a lower bound raises the typical one the fit starts from.
pub(super) async fn with_step_budget(
    (args, started): (&CalibrateArgs, Instant),
    (client, model): (&HttpClient, &str),
    (server, facts): (&mut ServerFacts, &mut Facts),
    measured: &[ProbeMeasurement],
    cancel: &CancellationToken,
) {
    if server.batch_tokens.is_some() || facts.slots < 2 || started.elapsed() >= args.budget {
        return;
    }
    let Some(probe) = BudgetProbe::sized(facts.context_per_slot, measured) else {
        return;
    };
    let seed = args
        .seed
        .unwrap_or_else(crate::wiring::session::random_seed)
        ^ BUDGET_SEED;
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
        Ok(None) | Err(_) => {}
    }
}
