//! Exporters: everything they print or write comes from the [`goodput_core::report::Report`].

pub(crate) mod json;
pub(crate) mod monitor;
pub(crate) mod plan;
pub(crate) mod server;
pub(crate) mod table;
