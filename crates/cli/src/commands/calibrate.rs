//! `goodput calibrate`: probes a real server (core's `decide::calibrate`), fits the
//! simulator's constants to what it measured (`goodput_sim::calibrate`) and writes the
//! configuration; `--check` replays a held-out workload live and in virtual time and, with an
//! SLO, searches its shapes' capacity on both (core's `decide::calibrate::capacity` live,
//! `virtual_target::virtual_capacity_with` on the configuration, the same prompts each probe).

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use goodput_core::backend::discovery::list_models;
use goodput_core::config::RunConfig;
use goodput_core::decide::calibrate::CapacityShape;
use goodput_core::decide::calibrate::capacity::{capacity_shapes, live_capacity, run_seed};
use goodput_core::decide::calibrate::{
    CapacityCheck, CapacityComparison, CheckPlan, PatternCapacity, ProbeMeasurement, Repeatability,
    ServerFacts, SpeedBand, StepPattern, combine_passes, server_facts,
};
use goodput_core::decide::capacity::{CapacityReport, Probe, ProbePlan, ProbeRun, SearchConfig};
use goodput_core::http::{HttpClient, HttpConfig};
use goodput_sim::calibrate::{
    Facts, MeasuredProbe, Predicted, calibrated_config, chat_template_tokens, fit,
    fit_unknown_budget, held_out, plan, predict, speed_factor, speed_reference,
};
use goodput_sim::{EngineConfig, SimConfig};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::commands::capacity::{print_probe, probe_plan, search_config};
use crate::options::calibrate::CalibrateOptions;
use crate::options::capacity::SearchOptions;
use crate::options::random_seed;
use crate::output::calibrate::{self as render, CheckRow};
use crate::virtual_target::{VirtualRequests, VirtualTarget, virtual_capacity_with};

mod probes;
mod steps;

use goodput_virtual::calibrate::{beyond_the_waves, facts, measured_probe};
use probes::{run_probes, with_batch_limit};
use steps::{after_the_plan, with_slot_split};

const FACTS_TIMEOUT: Duration = Duration::from_secs(10);

/// Runs `goodput calibrate`.
pub(crate) async fn run(options: CalibrateOptions) -> Result<ExitCode> {
    let client = HttpClient::tcp(options.target.clone(), HttpConfig::default());
    let model = list_models(&client, FACTS_TIMEOUT)
        .await
        .context("--target")?
        .into_iter()
        .next()
        .unwrap_or_default();
    let server = server_facts(&client, FACTS_TIMEOUT).await;
    match &options.check {
        Some(path) => check(&options, client, &model, &server, path).await,
        None => calibrate(&options, client, &model, &server).await,
    }
}

async fn calibrate(
    options: &CalibrateOptions,
    client: HttpClient,
    model: &str,
    server: &ServerFacts,
) -> Result<ExitCode> {
    // The budget counts the batch-limit waves too.
    let started = Instant::now();
    let cancel = crate::wiring::session::cancel_on_signal();
    let (mut server, limit) = with_batch_limit(options, &client, model, server, &cancel).await?;
    // Reported by the server, or a wave that queued.
    let exact_slots = server.slots.is_some() && limit.as_ref().is_none_or(|l| !l.is_lower_bound());
    with_slot_split(options, (&client, model), &mut server, &cancel).await;
    let mut facts = facts(model, &server);
    let shapes = plan(&facts, options.repeats);
    let passes = run_probes(options, client.clone(), model, (&shapes, started), &cancel).await?;
    let counted: Vec<(u32, f64)> = passes
        .iter()
        .flatten()
        .map(|m| (m.probe.input_tokens, m.prompt_tokens))
        .collect();
    facts.chat_template_tokens = chat_template_tokens(&counted);
    let (measured, repeatability) = combine_passes(&passes);
    let probes: Vec<MeasuredProbe> = measured.iter().map(measured_probe).collect();
    beyond_the_waves((&mut server, &mut facts), limit, &probes);
    after_the_plan(
        (options, started),
        (&client, model),
        (&mut server, &mut facts),
        (&measured, exact_slots),
        &cancel,
    )
    .await;
    let server = &server;
    let (mut fit, facts) = match server.batch_tokens {
        Some(_) => (fit(&facts, &probes).context("the fit")?, facts),
        // Not reported: bounded at a typical engine's budget, or not at all.
        None => fit_unknown_budget(&facts, &probes).context("the fit")?,
    };
    if let Some(r) = &repeatability {
        fit = fit.with_server_noise(r.fitted_figures());
    }
    let config = calibrated_config(&facts, &fit.constants);
    let text = toml::to_string(&config).context("serialising the configuration")?;
    let header = render::config_header(&options.target_url, server, &fit);
    std::fs::write(&options.out, format!("{header}{text}"))
        .with_context(|| format!("--out: cannot write {}", options.out.display()))?;
    if options.json {
        let value = json!({"facts": server, "fit": fit, "repeatability": repeatability,
                           "config": options.out});
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print!("{}", render::fit_table(&fit, server));
        print!("{}", render::repeatability_line(repeatability.as_ref()));
        println!("wrote {}", options.out.display());
    }
    Ok(ExitCode::SUCCESS)
}

async fn check(
    options: &CalibrateOptions,
    client: HttpClient,
    model: &str,
    server: &ServerFacts,
    path: &std::path::Path,
) -> Result<ExitCode> {
    let started = Instant::now();
    let config =
        SimConfig::from_file(path).with_context(|| format!("--check {}", path.display()))?;
    let facts = check_facts(&config, path, model, server)?;
    // A calibration probe first (twice the requests: its median scales every at-speed
    // figure, so its own noise is halved in variance), then the held-out shapes.
    let mut shapes = vec![speed_reference(&facts, 2 * options.repeats)];
    shapes.extend(held_out(&facts, options.repeats));
    let cancel = crate::wiring::session::cancel_on_signal();
    let passes = run_probes(options, client.clone(), model, (&shapes, started), &cancel).await?;
    let (mut measured, repeatability) = combine_passes(&passes);
    let reference = (!measured.is_empty()).then(|| measured.remove(0));
    let reference = reference.map(|m| (m, predict(&config, &measured_probe(&m).shape)));
    // The configuration at the server's speed now: the reference's factor divided out.
    let now = reference
        .as_ref()
        .and_then(|(m, p)| speed_factor(m.e2e, p))
        .and_then(|factor| Some((factor, config.at_speed(factor)?)));
    let live = Live {
        client,
        model,
        started,
        cancel,
    };
    // The other step pattern beyond the slots, at the server's speed now when measured.
    let other = other_pattern(now.as_ref().map_or(&config, |(_, c)| c));
    let sims = Sims {
        calibrated: &config,
        now: now.as_ref().map(|(f, c)| (*f, c)),
        other: other.as_ref().map(|(pattern, c)| (*pattern, c)),
    };
    let capacity = match &options.capacity {
        Some(search) => {
            search_capacities(options, search, &live, sims, (&measured, facts.slots)).await?
        }
        None => not_searched(
            "no --slo: capacity is the highest load that meets an SLO; give one (e.g. --slo e2e=2s) to search it on the server and in virtual time",
        ),
    };
    let rows = check_rows(sims, &measured, facts.slots);
    let figures = CheckFigures {
        reference: reference.as_ref(),
        factor: now.as_ref().map(|(f, _)| *f),
        repeatability: repeatability.as_ref(),
        rows: &rows,
        capacity: &capacity,
    };
    print_check(options.json, &figures)?;
    match &options.rescaled {
        Some(out) => write_rescaled(out, path, now),
        None => Ok(ExitCode::SUCCESS),
    }
}

/// The facts of a checked server: its own, and the configuration's slots (every replica's
/// sequences) and context where it does not say.
fn check_facts(
    config: &SimConfig,
    path: &std::path::Path,
    model: &str,
    server: &ServerFacts,
) -> Result<Facts> {
    let EngineConfig::Batching(engine) = &config.engine else {
        bail!(
            "--check {}: not a batching-engine configuration",
            path.display()
        );
    };
    Ok(Facts {
        slots: server
            .slots
            .unwrap_or(engine.max_num_seqs().saturating_mul(config.replicas.max(1))),
        context_per_slot: server
            .context_per_slot
            .unwrap_or(engine.effective_max_model_len()),
        ..facts(model, server)
    })
}

/// Each held-out shape measured, predicted by the configuration and at the server's speed,
/// and beyond the server's `slots` with the other step pattern.
fn check_rows(sims: Sims<'_>, measured: &[ProbeMeasurement], slots: u32) -> Vec<CheckRow> {
    measured
        .iter()
        .map(|m| {
            let shape = measured_probe(m).shape;
            let beyond = shape.concurrency > slots;
            CheckRow {
                measured: *m,
                predicted: predict(sims.calibrated, &shape),
                at_speed: sims.now.map(|(_, c)| predict(c, &shape)),
                other: sims
                    .other
                    .filter(|_| beyond)
                    .map(|(pattern, c)| (pattern, predict(c, &shape))),
            }
        })
        .collect()
}

/// `config` with the other step pattern beyond the slots, and that pattern (a batching
/// engine's configuration only).
fn other_pattern(config: &SimConfig) -> Option<(StepPattern, SimConfig)> {
    let other = config.other_step_pattern()?;
    let pattern = match other.keeps_clients_in_step()? {
        true => StepPattern::InStep,
        false => StepPattern::Staggered,
    };
    Some((pattern, other))
}

/// Writes the configuration `checked` at the server's speed now (`now`: its factor and the
/// configuration) to `out`; an error when that speed was not measured.
fn write_rescaled(
    out: &std::path::Path,
    checked: &std::path::Path,
    now: Option<(f64, SimConfig)>,
) -> Result<ExitCode> {
    let Some((factor, config)) = now else {
        bail!(
            "--rescaled {}: not written: the speed reference was not measured (the budget ran \
             out before it), so the server's speed now is unknown",
            out.display()
        );
    };
    let text = toml::to_string(&config).context("serialising the configuration")?;
    let header = format!(
        "# {} at the server's speed measured by `goodput calibrate --check`: every engine cost \
         divided by {factor:.4}\n",
        checked.display()
    );
    std::fs::write(out, format!("{header}{text}"))
        .with_context(|| format!("--rescaled: cannot write {}", out.display()))?;
    eprintln!("wrote {} (speed ×{factor:.3})", out.display());
    Ok(ExitCode::SUCCESS)
}

/// The check's figures: the speed reference (and the server's speed factor), how closely the
/// server repeated the check's probes, the held-out rows, the capacities.
struct CheckFigures<'a> {
    reference: Option<&'a (ProbeMeasurement, Predicted)>,
    factor: Option<f64>,
    repeatability: Option<&'a Repeatability>,
    rows: &'a [CheckRow],
    capacity: &'a CapacityCheck,
}

/// Prints the check's figures as tables or JSON.
fn print_check(as_json: bool, f: &CheckFigures<'_>) -> Result<()> {
    let pair = |(m, p): &(ProbeMeasurement, Predicted)| json!({"measured": m, "predicted": p});
    let (reference, factor, capacity) = (f.reference, f.factor, f.capacity);
    if as_json {
        let held_out: Vec<_> = f
            .rows
            .iter()
            .map(|r| {
                let other = r.other.map(
                    |(pattern, predicted)| json!({"pattern": pattern, "predicted": predicted}),
                );
                json!({"measured": r.measured, "predicted": r.predicted,
                       "predicted_at_speed": r.at_speed, "other_pattern": other})
            })
            .collect();
        let value = json!({
            "speed_reference": reference.map(pair),
            "speed_factor": factor,
            "repeatability": f.repeatability,
            "held_out": held_out,
            "capacity": capacity,
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        print!("{}", render::speed_line(reference, factor));
        print!("{}", render::repeatability_line(f.repeatability));
        print!("{}", render::check_table(f.rows));
        print!("{}", render::capacity_table(capacity));
    }
    Ok(())
}

/// The live server of a check, and when the check started (its budget runs from there).
struct Live<'a> {
    client: HttpClient,
    model: &'a str,
    started: Instant,
    /// Cancelled by Ctrl-C.
    cancel: CancellationToken,
}

fn not_searched(reason: &str) -> CapacityCheck {
    CapacityCheck {
        plan: None,
        not_searched: Some(reason.to_string()),
        shapes: Vec::new(),
    }
}

/// Searches the capacity of every held-out shape that fills the slots on the server and on
/// `config` in virtual time, with the same probes; the live searches share what is left of
/// the budget.
async fn search_capacities(
    options: &CalibrateOptions,
    search: &SearchOptions,
    live: &Live<'_>,
    sims: Sims<'_>,
    (held_out, slots): (&[ProbeMeasurement], u32),
) -> Result<CapacityCheck> {
    let criteria = search.criteria.clone();
    let measured_requests = search.measured_requests;
    let seed = options.seed.unwrap_or_else(random_seed);
    let base = RunConfig {
        seed,
        request_timeout: Duration::from_secs(600),
        ..RunConfig::default()
    };
    let plan = probe_plan(search, base);
    let given = search.start.unwrap_or(0.0);
    let mut check = CapacityCheck {
        plan: Some(CheckPlan {
            dimension: plan.dimension,
            criteria,
            requests_per_probe: measured_requests,
            timing: plan.timing(),
            search: search_config(search, given, None),
        }),
        not_searched: None,
        shapes: Vec::new(),
    };
    let shapes = capacity_shapes(held_out, slots, plan.dimension);
    let mut skipped = Vec::new();
    for (index, (shape, start)) in shapes.iter().enumerate() {
        let left = options.budget.saturating_sub(live.started.elapsed());
        let name = shape.to_string();
        let Some(start) = search.start.or(*start) else {
            skipped.push(format!("{name}: no request completed on it"));
            continue;
        };
        if left.is_zero() {
            skipped.push(format!("{name}: the budget was spent"));
            continue;
        }
        let share = left / u32::try_from(shapes.len() - index).unwrap_or(1);
        let bounds = search_config(search, start, Some(share));
        let both = Both {
            live,
            sims,
            plan: &plan,
            seed,
        };
        check
            .shapes
            .push(both.compare(*shape, start, bounds).await?);
    }
    if !skipped.is_empty() {
        check.not_searched = Some(format!("not searched: {}", skipped.join("; ")));
    }
    Ok(check)
}

/// The checked configuration, the same at the server's speed now (with that speed's factor)
/// when it was measured, and that one with the other step pattern beyond the slots.
#[derive(Clone, Copy)]
struct Sims<'a> {
    calibrated: &'a SimConfig,
    now: Option<(f64, &'a SimConfig)>,
    other: Option<(StepPattern, &'a SimConfig)>,
}

/// How far either side of the server's measured speed the check predicts the capacity too:
/// the ±10 % a latency prediction is held to.
const SPEED_MARGIN: f64 = 0.10;

/// One capacity search on the server and the same on the configuration in virtual time (at
/// its own speed, and at the server's speed now).
struct Both<'a> {
    live: &'a Live<'a>,
    sims: Sims<'a>,
    plan: &'a ProbePlan,
    seed: u64,
}

impl Both<'_> {
    async fn compare(
        &self,
        shape: CapacityShape,
        start: f64,
        search: SearchConfig,
    ) -> Result<CapacityComparison> {
        let (plan, seed) = (self.plan, self.seed);
        let show = |probe: &Probe| print_probe(probe, plan.dimension);
        eprintln!("capacity of {shape} on the server:");
        let live = self.live;
        let server = (live.client.clone(), live.model);
        let (measured, _) =
            live_capacity(server, shape, plan, search, seed, &live.cancel, show).await?;
        eprintln!("… and in virtual time:");
        let predicted = self.virtual_search(shape, search, self.sims.calibrated, true);
        let compared = CapacityComparison::new(shape, start, measured, predicted);
        let compared = self.at_speed(compared, search);
        let Some((pattern, config)) = self.sims.other else {
            return Ok(compared);
        };
        let capacity = self
            .virtual_search(shape, search, config, false)
            .lower_bound;
        eprintln!(
            "… with clients {} beyond the slots: capacity {}",
            pattern.name(),
            capacity.map_or("none".to_string(), |c| format!("{c}"))
        );
        Ok(compared.with_other_pattern(PatternCapacity { pattern, capacity }))
    }

    /// The search of `shape` on `sim` in virtual time, unbudgeted (its probes printed when
    /// `shown`).
    fn virtual_search(
        &self,
        shape: CapacityShape,
        search: SearchConfig,
        sim: &SimConfig,
        shown: bool,
    ) -> CapacityReport {
        // Each probe run's prompts and lengths are those the live search sends on that run.
        let run_probe = |call: &ProbeRun, config: &RunConfig| {
            let requests = VirtualRequests::generated(shape.workload(run_seed(self.seed, call)));
            let target = VirtualTarget {
                sim: sim.clone(),
                requests,
            };
            target
                .probe_until(config, Some(self.plan.stopping(call.load)))
                .map_err(|error| goodput_core::decide::capacity::ProbeError {
                    load: call.load,
                    message: error.to_string(),
                })
        };
        let unbudgeted = SearchConfig {
            budget_secs: None,
            ..search
        };
        let dimension = self.plan.dimension;
        let show = |probe: &Probe| {
            if shown {
                print_probe(probe, dimension);
            }
        };
        virtual_capacity_with(run_probe, self.plan, unbudgeted, show).0
    }

    /// `compared` with the same search at the server's speed now, and at a margin either side
    /// of it (when that speed was measured).
    fn at_speed(&self, compared: CapacityComparison, search: SearchConfig) -> CapacityComparison {
        let Some((factor, now)) = self.sims.now else {
            return compared;
        };
        let shape = compared.shape;
        eprintln!("… and in virtual time at the server's speed now (×{factor:.3}):");
        let at_speed = self.virtual_search(shape, search, now, true);
        let [slower, faster] = [1.0 - SPEED_MARGIN, 1.0 + SPEED_MARGIN].map(|k| {
            let config = self.sims.calibrated.at_speed(factor * k)?;
            let capacity = self
                .virtual_search(shape, search, &config, false)
                .lower_bound;
            eprintln!(
                "… at {:.0} % of that speed: capacity {}",
                k * 100.0,
                capacity.map_or("none".to_string(), |c| format!("{c}"))
            );
            capacity
        });
        let band = SpeedBand {
            margin: SPEED_MARGIN,
            slower,
            faster,
        };
        compared.with_prediction_at_speed(at_speed, Some(band))
    }
}
