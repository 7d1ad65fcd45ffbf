//! `goodput run`: one measured step — with the server's metrics scraped beside it, the live
//! view or progress lines, the server's self-description — then the report, exports, gate,
//! history record and exit status (see [`crate::wiring::session`] for what every command shares).

use std::process::ExitCode;

use anyhow::Result;
use goodput_core::observe::overhead::ClientOverhead;
use goodput_core::report::LoadReport;
use goodput_core::runner::RecordSink;

use crate::options::run::RunOptions;
use crate::wiring::session::{Session, spawn_progress};

/// Runs `goodput run`.
pub(crate) async fn run(options: RunOptions, command_line: Vec<String>) -> Result<ExitCode> {
    if options.virtual_time {
        return crate::virtual_target::run::run(options, command_line).await;
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
