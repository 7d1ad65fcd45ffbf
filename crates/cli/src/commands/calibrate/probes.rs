//! What `goodput calibrate` measures: the probe plan run pass after pass until the budget ends
//! ([`run_probes`]) and the waves that find the slots of a server that does not say
//! ([`with_batch_limit`]). What the simulator makes of it is `goodput_virtual::calibrate`'s.

use std::time::Instant;

use anyhow::Result;
use goodput_core::decide::calibrate::{
    BatchLimit, ProbeMeasurement, ServerFacts, WAVES, batch_limit, measure,
};
use goodput_core::http::HttpClient;
use goodput_sim::calibrate::ProbeShape;
use goodput_virtual::calibrate::calibration_probe;
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
