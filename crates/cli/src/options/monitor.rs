//! `goodput monitor`'s configuration: the metrics URL watched and how its rows are made and
//! written.

use std::path::PathBuf;
use std::time::Duration;

use goodput_core::observe::monitor::MonitorConfig;

/// Everything `goodput monitor` runs with.
#[derive(Debug, Clone)]
pub(crate) struct MonitorOptions {
    /// The metrics URL: `--metrics-url`, else `--target`'s `/metrics`.
    pub(crate) url: String,
    /// Interval, window and trend, checked.
    pub(crate) config: MonitorConfig,
    /// `--duration` (default: until Ctrl-C).
    pub(crate) duration: Option<Duration>,
    /// `--jsonl`: every row appended to this file.
    pub(crate) jsonl: Option<PathBuf>,
    /// `--json`: rows as JSON lines on stdout.
    pub(crate) json: bool,
}
