//! Exporters: everything they print or write comes from the [`goodput_core::report::Report`].

pub(crate) mod breakdown;
pub(crate) mod calibrate;
mod channels;
mod client;
pub(crate) mod color;
pub(crate) mod comparison;
pub(crate) mod csv;
pub(crate) mod exports;
mod failures;
pub(crate) mod html;
pub(crate) mod json;
mod llmd;
pub(crate) mod markdown;
mod mlflow;
pub(crate) mod monitor;
pub(crate) mod plan;
mod push;
mod repeats;
mod send;
pub(crate) mod server;
pub(crate) mod steps;
pub(crate) mod table;
mod tune;
