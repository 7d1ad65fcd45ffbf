//! One configuration measured live: a free port, the templates expanded, the server started
//! in its own process group (its log in the configuration's directory), readied, measured by
//! the capacity search (or sweep) of `goodput capacity` (`sweep`) on a session cancelled when
//! the server exits, then stopped — and whatever went wrong (no port, never ready, exited at
//! start, crashed mid-step, survived SIGKILL) recorded with the last lines of its log.

use std::path::Path;

use anyhow::{Context, Result};
use goodput_core::decide::sweep::conclude;
use goodput_core::report::Report;
use goodput_core::report::tune::{TuneFailure, TuneRun};
use goodput_core::runner::RunOutcome;
use std::sync::atomic::Ordering;
use tokio_util::sync::CancellationToken;

use super::{Measured, Tune};
use crate::options::run::TargetOptions;
use crate::options::tune::{Configuration, PORT};
use crate::wiring::server_process::{
    LOG_TAIL_LINES, Server, ServerFailure, free_port, log_tail, ready_urls,
};
use crate::wiring::session::Session;

/// The server's log, in the configuration's directory.
pub(crate) const SERVER_LOG: &str = "server.log";

/// The URLs of one configuration's server.
struct Urls {
    target: String,
    ready: Vec<String>,
    reset: Option<String>,
}

/// Starts, readies, measures and stops `configuration`'s server, its files in `dir` (relative
/// to the tune's directory).
pub(super) async fn measure(
    tune: &Tune,
    configuration: &Configuration,
    dir: &str,
) -> Result<Measured> {
    let server = tune.options.server.as_ref().context("no --server-cmd")?;
    let root = tune.options.out.join(dir);
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).with_context(|| format!("cannot create {}", root.display()))?;
    let mut run = TuneRun {
        dir: dir.to_string(),
        command: None,
        target: None,
        startup_secs: None,
        failure: None,
        figures: None,
    };
    let mut values = configuration.map();
    match free_port() {
        Ok(port) => values.insert(PORT.to_string(), port.to_string()),
        Err(error) => {
            return Ok(failed(
                run,
                "start",
                format!("no free port: {error}"),
                &root,
            ));
        }
    };
    let command = server.command.expand(&values);
    let target = server.target.expand(&values);
    let urls = Urls {
        ready: ready_urls(
            &target,
            server.ready_url.as_ref().map(|t| t.expand(&values)),
        ),
        reset: server.reset_url.as_ref().map(|t| t.expand(&values)),
        target: target.clone(),
    };
    (run.command, run.target) = (Some(command.clone()), Some(target));
    if !tune.quiet() {
        eprintln!("  starting: {command}");
    }
    let process = match Server::start(&command, &root.join(SERVER_LOG)) {
        Ok(process) => process,
        Err(failure) => return Ok(failed(run, failure.stage, failure.reason, &root)),
    };
    tune.interrupt
        .current
        .store(process.pgid(), Ordering::SeqCst);
    let outcome = ready_and_measure(tune, configuration, &process, &urls, &root).await;
    // A server that exited on its own before being stopped crashed (its failed requests may
    // have ended the measurement before the watch saw it go).
    let crashed = process.exit_status();
    let stopped = process.stop(server.stop_grace).await;
    tune.interrupt.current.store(0, Ordering::SeqCst);
    judge(tune, configuration, run, (outcome, crashed, stopped), &root)
}

/// What the server and its measurement came to.
enum Outcome {
    /// Never ready (or exited first).
    NotReady(ServerFailure),
    /// Ready after the seconds given; measured (or the measurement's error).
    Measured(f64, Box<Result<(Report, RunOutcome)>>),
}

/// Waits for the server, then measures it on a session the server's exit cancels.
async fn ready_and_measure(
    tune: &Tune,
    configuration: &Configuration,
    process: &Server,
    urls: &Urls,
    root: &Path,
) -> Outcome {
    let server = tune.options.server.as_ref();
    let timeout = server.map_or(std::time::Duration::from_secs(300), |s| s.ready_timeout);
    let startup = match process
        .wait_ready(&urls.ready, timeout, &tune.interrupt.cancel)
        .await
    {
        Ok(startup) => startup.as_secs_f64(),
        Err(failure) => return Outcome::NotReady(failure),
    };
    if !tune.quiet() {
        eprintln!("  ready in {startup:.1} s at {}", urls.target);
    }
    let token = tune.interrupt.cancel.child_token();
    let watch = process.watch(token.clone());
    let measured = session_measure(tune, configuration, urls, root, token).await;
    watch.abort();
    Outcome::Measured(startup, Box::new(measured))
}

/// The configuration's capacity search (or sweep) on `urls.target`, its files in `root`.
async fn session_measure(
    tune: &Tune,
    configuration: &Configuration,
    urls: &Urls,
    root: &Path,
    token: CancellationToken,
) -> Result<(Report, RunOutcome)> {
    let options = &tune.options;
    let mut capacity = options.capacity.clone();
    let time_scale = options.server.as_ref().map_or(1.0, |s| s.time_scale);
    let run = &mut capacity.run;
    run.virtual_time = false;
    run.target = TargetOptions::Server {
        url: urls.target.clone(),
        time_scale,
    };
    run.config.time_scale = time_scale;
    run.output.out = Some(root.to_path_buf());
    run.server_side.accelerators = Some(configuration.accelerators);
    run.server_side.analysis.cost.accelerators = Some(configuration.accelerators);
    let mut session = Session::open_with(run.clone(), tune.command_line.clone(), Some(token))
        .await?
        .coordinated();
    session.reset_url = urls.reset.clone();
    let (report, outcome) = match &options.sweep {
        None => crate::commands::capacity::search_all(&mut session, &capacity).await?,
        Some(plan) => {
            let (steps, outcome) =
                crate::commands::sweep::measure(&mut session, plan, false).await?;
            let (sweep, repeats) = conclude(plan, &steps);
            let mut report = session.report(steps, outcome.end_reason);
            report.sweep = Some(sweep);
            report.repeats = repeats;
            (report, outcome)
        }
    };
    if let Some(journal) = session.journal.as_mut() {
        journal.sync().context("syncing the journal")?;
    }
    write_report(root, &report)?;
    Ok((report, outcome))
}

/// Writes a configuration's `report.json` and its exports (`report.html`, …).
pub(super) fn write_report(root: &Path, report: &Report) -> Result<()> {
    crate::output::json::write_report(&root.join("report.json"), report)?;
    crate::wiring::run_extras::write_exports(root, report)
}

/// The configuration's run from what happened: interrupted by the user (not journaled), or
/// finished — measured, or failed with the reason and its log's tail.
fn judge(
    tune: &Tune,
    configuration: &Configuration,
    mut run: TuneRun,
    (outcome, crashed, stopped): (
        Outcome,
        Option<std::process::ExitStatus>,
        Result<(), ServerFailure>,
    ),
    root: &Path,
) -> Result<Measured> {
    let user = tune.interrupt.cancel.is_cancelled();
    let (startup, measured) = match outcome {
        Outcome::NotReady(_) if user => return Ok(Measured::Interrupted),
        Outcome::NotReady(failure) => return Ok(failed(run, failure.stage, failure.reason, root)),
        Outcome::Measured(startup, measured) => (startup, measured),
    };
    run.startup_secs = Some(startup);
    if let Some(status) = crashed {
        let reason = format!("the server exited mid-measurement ({status})");
        return Ok(failed(run, "measure", reason, root));
    }
    if user {
        return Ok(Measured::Interrupted);
    }
    match *measured {
        Ok((report, _)) => {
            run.figures = Some(goodput_core::decide::tune::figures(
                &report,
                tune.judging(configuration),
            ))
        }
        Err(error) => return Ok(failed(run, "measure", format!("{error:#}"), root)),
    }
    if let Err(failure) = stopped {
        run.failure = Some(TuneFailure {
            stage: failure.stage.into(),
            reason: failure.reason,
            log_tail: log_tail(&root.join(SERVER_LOG), LOG_TAIL_LINES),
        });
    }
    Ok(Measured::Done(Box::new(run)))
}

/// `run` failed at `stage` for `reason`, with its server log's tail.
fn failed(mut run: TuneRun, stage: &str, reason: String, root: &Path) -> Measured {
    run.failure = Some(TuneFailure {
        stage: stage.to_string(),
        reason,
        log_tail: log_tail(&root.join(SERVER_LOG), LOG_TAIL_LINES),
    });
    Measured::Done(Box::new(run))
}
