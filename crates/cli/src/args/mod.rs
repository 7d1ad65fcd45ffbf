//! The argument groups (clap derive; doc comments are the help text) and their conversion
//! into the plain configurations of [`crate::options`] — the LowArgs → HiArgs step: each
//! subcommand's `into_options` parses every flag value once (`--slo` in [`slo::parse_slo`])
//! and makes every cross-field check, with errors that name the flag to fix (exit status 2).
//! Only `cli` and `app` import this module.

pub(crate) mod analysis;
pub(crate) mod audio;
pub(crate) mod calibrate;
pub(crate) mod capacity;
pub(crate) mod fleet;
pub(crate) mod generation;
pub(crate) mod http_stream;
pub(crate) mod image;
pub(crate) mod load;
pub(crate) mod merge;
pub(crate) mod monitor;
pub(crate) mod plan;
pub(crate) mod realtime;
pub(crate) mod report;
pub(crate) mod reporting;
pub(crate) mod request;
pub(crate) mod run;
pub(crate) mod run_command;
pub(crate) mod server;
pub(crate) mod shard;
pub(crate) mod sim;
pub(crate) mod sim_deploy;
pub(crate) mod slo;
pub(crate) mod sweep;
pub(crate) mod tensor;
pub(crate) mod tune;
pub(crate) mod tune_grid;
pub(crate) mod tune_knobs;
pub(crate) mod ui;
pub(crate) mod workload;
