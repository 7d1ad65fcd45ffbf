//! `goodput calibrate`'s configuration: the server, the probing budget and passes, and where
//! the fitted configuration goes — or, with `--check`, the configuration to check and the
//! capacity searches of the check.

use std::path::PathBuf;
use std::time::Duration;

use goodput_core::http::Target;

use super::capacity::SearchOptions;

/// Everything `goodput calibrate` runs with.
#[derive(Debug, Clone)]
pub(crate) struct CalibrateOptions {
    /// `--target` as given (named in the written configuration's header).
    pub(crate) target_url: String,
    /// `--target`, parsed.
    pub(crate) target: Target,
    /// `--budget`: most time spent probing.
    pub(crate) budget: Duration,
    /// `--out`: where the fitted configuration is written.
    pub(crate) out: PathBuf,
    /// `--check`: the configuration to check instead of fitting.
    pub(crate) check: Option<PathBuf>,
    /// `--rescaled`: where the checked configuration at the server's speed now goes.
    pub(crate) rescaled: Option<PathBuf>,
    /// `--seed` (default: a fresh one for each kind of probe).
    pub(crate) seed: Option<u64>,
    /// `--repeats`: requests of each probe shape per client.
    pub(crate) repeats: u32,
    /// `--passes`.
    pub(crate) passes: u32,
    /// `--json`.
    pub(crate) json: bool,
    /// The check's capacity searches (`--check` with `--slo`); `None`: not searched.
    pub(crate) capacity: Option<SearchOptions>,
}
