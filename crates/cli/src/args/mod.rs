//! Argument groups and their conversion into clap-free configurations (the LowArgs → HiArgs
//! step): every cross-field check happens here, with errors that name the flag to fix.

pub(crate) mod run;
pub(crate) mod sim;
pub(crate) mod workload;
