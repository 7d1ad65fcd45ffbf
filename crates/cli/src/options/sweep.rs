//! `goodput sweep`'s configuration: the base run and the plan of its steps (what varies, the
//! levels, the knee threshold).

use goodput_core::decide::sweep::SweepReport;

use super::run::RunOptions;

/// Everything `goodput sweep` runs with.
#[derive(Debug, Clone)]
pub(crate) struct SweepOptions {
    /// The base run every step shares.
    pub(crate) run: RunOptions,
    /// The dimension, its levels and the knee threshold (`knee` still unknown).
    pub(crate) plan: SweepReport,
    /// Whether `--rate` was given: a batch sweep then sends its batches at that rate (else
    /// at `--concurrency`, by default one request at a time).
    pub(crate) rate_given: bool,
}
