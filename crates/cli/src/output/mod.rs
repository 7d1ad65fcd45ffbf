//! Exporters: everything they print or write comes from the [`goodput_core::report::Report`].

mod client;
mod failures;
pub(crate) mod json;
pub(crate) mod table;
