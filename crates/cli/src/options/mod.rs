//! The plain configuration each subcommand runs with: typed values (`RunConfig`, `Slo`,
//! workload specifications, durations, paths, enums of its own), every flag value already
//! parsed once by the argument groups of `args` — the HiArgs of their LowArgs → HiArgs step
//! (`app` calls each subcommand's `into_options`). Nothing here names clap or `args`:
//! `commands`, `wiring`, `virtual_target`, `output` and `embedded_sim` read these types, never
//! the command line.

pub(crate) mod analysis;
pub(crate) mod calibrate;
pub(crate) mod capacity;
pub(crate) mod monitor;
pub(crate) mod plan;
pub(crate) mod report;
pub(crate) mod run;
pub(crate) mod sim;
pub(crate) mod store;
pub(crate) mod sweep;
pub(crate) mod tune;
pub(crate) mod ui;
pub(crate) mod workload;

/// The seed drawn when `--seed` is not given (recorded in the report, so the run can be
/// repeated).
pub(crate) fn random_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    (nanos as u64) ^ u64::from(std::process::id()).rotate_left(32)
}
