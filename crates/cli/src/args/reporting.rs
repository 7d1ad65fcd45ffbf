//! `goodput run` options about what happens with the results: the release gate, the history
//! store and the live view. Flattened into `RunArgs`.

use std::path::PathBuf;

/// Result handling options of `goodput run`.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct ReportingArgs {
    /// Release gate: judge the report against the conditions in this TOML file (see `goodput
    /// gate --help`); the run exits with status 1 when one fails.
    #[arg(long, value_name = "FILE", help_heading = "Output")]
    pub(crate) gate: Option<PathBuf>,
    /// Record the run in this SQLite history store (created if missing; see `goodput history`).
    #[arg(
        long,
        value_name = "DB",
        env = "GOODPUT_STORE",
        help_heading = "Output"
    )]
    pub(crate) store: Option<PathBuf>,
    /// Print plain progress lines instead of the live view, even on a terminal.
    #[arg(long, help_heading = "Output")]
    pub(crate) no_live: bool,
}
