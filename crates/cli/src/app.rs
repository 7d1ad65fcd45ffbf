//! Dispatch: builds the tokio runtime, turns the subcommand's arguments into its plain
//! configuration (`crate::args` → `crate::options`) and runs it (exit codes: [`crate::exit`]).

use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::cli::{Cli, Command};
use crate::commands;

/// Runs the parsed command line and returns the exit status; `command_line` (the arguments as
/// given, program name first) is recorded in the run's manifest.
pub(crate) fn run(cli: Cli, command_line: Vec<String>) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        match cli.command {
            Command::Run(args) => {
                let (options, repeats) = args.into_options()?;
                commands::run::run(options, repeats, command_line).await
            }
            Command::Sweep(args) => commands::sweep::run(args.into_options()?, command_line).await,
            Command::Capacity(args) => {
                commands::capacity::run(args.into_options()?, command_line).await
            }
            Command::Calibrate(args) => commands::calibrate::run(args.into_options()?).await,
            Command::Sim(args) => commands::sim::run(args.into_options()?).await,
            Command::Report(args) => commands::report::run(args.into_options()?),
            Command::Merge(args) => commands::merge::run(args.into_options()?),
            Command::Compare(args) => commands::compare::run(args.into_options()?),
            Command::Gate(args) => commands::gate::run(args.into_options()?),
            Command::History(args) => commands::history::run(args.into_options()?),
            Command::Ui(args) => commands::ui::run(args.into_options()?).await,
            Command::Plan(args) => commands::plan::run(args.into_options()?),
            Command::Monitor(args) => commands::monitor::run(args.into_options()?).await,
            Command::Tune(args) => commands::tune::run(args.into_options()?, command_line).await,
        }
    })
}

/// Whether the error is a closed pipe on stdout (`goodput … | head`).
pub(crate) fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use goodput_core::units::rfc3339;

    #[test]
    fn formats_utc_dates() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let leap_day = UNIX_EPOCH + Duration::from_secs(1_709_210_096);
        assert_eq!(rfc3339(leap_day), "2024-02-29T12:34:56Z");
    }
}
