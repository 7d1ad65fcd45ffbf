//! Wiring: builds the tokio runtime, dispatches to the subcommand, and defines the exit codes.

use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};

use crate::cli::{Cli, Command};
use crate::commands;

/// Success.
pub(crate) const EXIT_OK: u8 = 0;
/// The run happened but failed its policy (every request failed, error budget exceeded, no
/// progress, journal failure).
pub(crate) const EXIT_RUN_FAILED: u8 = 1;
/// Bad flags, bad configuration, or an error before the run could start.
pub(crate) const EXIT_USAGE: u8 = 2;
/// Interrupted (Ctrl-C / SIGTERM).
pub(crate) const EXIT_INTERRUPTED: u8 = 130;

/// Runs the parsed command line and returns the exit status.
pub(crate) fn run(cli: Cli) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let command_line: Vec<String> = std::env::args().collect();
    runtime.block_on(async move {
        match cli.command {
            Command::Run(args) => commands::run::run(*args, command_line).await,
            Command::Sweep(args) => commands::sweep::run(*args, command_line).await,
            Command::Capacity(args) => commands::capacity::run(*args, command_line).await,
            Command::Sim(args) => commands::sim::run(*args).await,
            Command::Report(args) => commands::report::run(args),
            Command::Compare(args) => commands::compare::run(args),
            Command::Gate(args) => commands::gate::run(args),
            Command::History(args) => commands::history::run(args),
            Command::Plan(args) => commands::plan::run(args),
            Command::Monitor(args) => commands::monitor::run(args).await,
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

/// `time` as RFC 3339 UTC with second precision, e.g. `2026-11-29T09:02:01Z`.
pub(crate) fn rfc3339(time: SystemTime) -> String {
    let secs = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar
/// (Howard Hinnant's algorithm).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn formats_utc_dates() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let leap_day = UNIX_EPOCH + Duration::from_secs(1_709_210_096);
        assert_eq!(rfc3339(leap_day), "2024-02-29T12:34:56Z");
    }
}
