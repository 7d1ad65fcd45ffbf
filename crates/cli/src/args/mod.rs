//! Argument groups and their conversion into clap-free configurations (the LowArgs → HiArgs
//! step): every cross-field check happens here, with errors that name the flag to fix.

pub(crate) mod analysis;
pub(crate) mod calibrate;
pub(crate) mod capacity;
pub(crate) mod http_stream;
pub(crate) mod image;
pub(crate) mod load;
pub(crate) mod merge;
pub(crate) mod monitor;
pub(crate) mod plan;
pub(crate) mod report;
pub(crate) mod reporting;
pub(crate) mod request;
pub(crate) mod run;
pub(crate) mod server;
pub(crate) mod shard;
pub(crate) mod sim;
pub(crate) mod sim_deploy;
pub(crate) mod slo;
pub(crate) mod sweep;
pub(crate) mod tensor;
pub(crate) mod workload;
