//! The exit statuses every subcommand chooses from (the command line's contract with scripts).

use std::process::ExitCode;

/// Success.
pub(crate) const EXIT_OK: u8 = 0;
/// The run happened but failed its policy (every request failed, error budget exceeded, no
/// progress, journal failure, an export to another tool that failed).
pub(crate) const EXIT_RUN_FAILED: u8 = 1;
/// Bad flags, bad configuration, or an error before the run could start.
pub(crate) const EXIT_USAGE: u8 = 2;
/// Interrupted (Ctrl-C / SIGTERM).
pub(crate) const EXIT_INTERRUPTED: u8 = 130;

/// The number behind a subcommand's [`ExitCode`] (which does not expose it): every subcommand
/// returns one of the statuses above.
pub(crate) fn status(code: ExitCode) -> u8 {
    [EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE, EXIT_INTERRUPTED]
        .into_iter()
        .find(|&status| ExitCode::from(status) == code)
        .unwrap_or(EXIT_RUN_FAILED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_survives_the_exit_code() {
        for status_code in [EXIT_OK, EXIT_RUN_FAILED, EXIT_USAGE, EXIT_INTERRUPTED] {
            assert_eq!(status(ExitCode::from(status_code)), status_code);
        }
        assert_eq!(status(ExitCode::SUCCESS), EXIT_OK);
    }
}
