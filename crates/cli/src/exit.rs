//! The exit statuses every subcommand chooses from (the command line's contract with scripts).

/// Success.
pub(crate) const EXIT_OK: u8 = 0;
/// The run happened but failed its policy (every request failed, error budget exceeded, no
/// progress, journal failure, an export to another tool that failed).
pub(crate) const EXIT_RUN_FAILED: u8 = 1;
/// Bad flags, bad configuration, or an error before the run could start.
pub(crate) const EXIT_USAGE: u8 = 2;
/// Interrupted (Ctrl-C / SIGTERM).
pub(crate) const EXIT_INTERRUPTED: u8 = 130;
