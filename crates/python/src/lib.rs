//! The `goodput._native` Python extension module (feature `python`, built by maturin): the
//! in-process measurement of [`goodput_core::measure`] driven from Python, and the HTML
//! rendering of reports. The Python package (`python/goodput`) wraps it; `goodput.run` and
//! `goodput.capacity` run the bundled `goodput` command instead.
//!
//! Without the `python` feature the crate is empty, so the workspace builds and tests without
//! Python or PyO3.

#[cfg(feature = "python")]
mod calls;
#[cfg(feature = "python")]
mod module;
