//! `goodput run`: one measured step — with the server's metrics scraped beside it, the live
//! view or progress lines, the server's self-description — then the report, exports, gate,
//! history record and exit status (see [`crate::wiring::session`] for what every command
//! shares); with `--repeats N`, N such steps and the headline figures across them.

use std::process::ExitCode;

use anyhow::{Context, Result};
use goodput_core::decide::repeats;
use goodput_core::observe::overhead::ClientOverhead;
use goodput_core::report::LoadReport;
use goodput_core::runner::{EndReason, RecordSink};

use crate::options::run::RunOptions;
use crate::wiring::session::{Session, spawn_progress};

/// Runs `goodput run`, the configuration measured `repeats` times.
pub(crate) async fn run(
    options: RunOptions,
    repeats: u32,
    command_line: Vec<String>,
) -> Result<ExitCode> {
    if options.virtual_time {
        return match repeats {
            0 | 1 => crate::virtual_target::run::run(options, command_line).await,
            _ => crate::virtual_target::run::repeated(options, repeats, command_line).await,
        };
    }
    if repeats > 1 {
        return repeated(options, repeats, command_line).await;
    }
    let mut session = Session::open(options, command_line).await?;
    let config = session.config.clone();
    session.record_step_load(&config.load)?;
    let runner = session.runner(&config, 0, None);
    let mut server_side = session.server_side(&config, None).await?;
    let mut aggregator = session.aggregator(&config);
    let cancel = session.cancel.clone();
    let mut extras = crate::wiring::run_extras::Extras::start(
        &session.options.output,
        &config,
        &session.run_info,
        &runner,
        cancel.clone(),
    )?;
    let progress = (!session.options.output.quiet && !extras.has_view())
        .then(|| spawn_progress(runner.monitor(), cancel.clone()));
    session.overhead = ClientOverhead::start(session.endpoint.simulator.is_some());
    let outcome = {
        server_side.begin();
        let mut sinks: Vec<&mut dyn RecordSink> = vec![&mut aggregator, &mut session.overhead];
        sinks.extend(extras.sinks());
        if let Some(journal) = session.journal.as_mut() {
            sinks.push(journal);
        }
        sinks.push(server_side.tally());
        runner.run(&mut sinks, cancel).await
    };
    session.note_start(&outcome)?;
    server_side.end().await;
    if let Some(progress) = progress {
        progress.abort();
    }
    extras.finish_view();
    let step = aggregator.report(LoadReport::from(&config.load));
    let mut report = session.report(vec![step], outcome.end_reason);
    report.run.server_info = Some(extras.server_info(session.served_models.clone()));
    server_side.enrich(&mut report, config.window);
    session.finish(&report, &outcome)
}

/// `goodput run --repeats N`: the configuration measured N times, one run after the other,
/// each a step of the report (progress lines, not the live view), then each headline figure
/// across the runs.
async fn repeated(
    options: RunOptions,
    repeats: u32,
    command_line: Vec<String>,
) -> Result<ExitCode> {
    let mut session = Session::open(options, command_line).await?;
    session.repeats = Some(repeats);
    let (mut steps, mut last) = (Vec::new(), None);
    for index in 0..repeats {
        let config = repeats::run_config(&session.config, index);
        if !session.options.output.quiet {
            eprintln!("run {}/{repeats}: started", index + 1);
        }
        let step = session.run_step(&config, None, None).await?;
        if !session.options.output.quiet {
            crate::commands::sweep::print_result(
                "run",
                (index as usize, repeats as usize),
                &step.step,
            );
        }
        let ended = step.outcome.end_reason;
        steps.push(step.step);
        last = Some(step.outcome);
        if ended != EndReason::Completed {
            break;
        }
    }
    let outcome = last.context("--repeats: no run was measured")?;
    let mut report = session.report(steps, outcome.end_reason);
    report.repeats = Some(repeats::summarise(&report.steps));
    session.finish(&report, &outcome)
}
