//! Exporters: everything they print or write comes from the [`goodput_core::report::Report`].

pub(crate) mod breakdown;
pub(crate) mod json;
pub(crate) mod table;
