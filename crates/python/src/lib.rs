//! The `goodput._native` Python extension module (feature `python`, built by maturin): the
//! in-process measurement of [`goodput_core::measure`] driven from Python, the HTML rendering of
//! reports, and the `goodput` command itself (`goodput::main_with_args`, the library of
//! crates/cli), which the package's `goodput` console script runs in-process. The
//! Python package (`python/goodput`) wraps it; `goodput.run` and `goodput.capacity` start that
//! command in the background.
//!
//! Without the `python` feature the crate is empty, so the workspace builds and tests without
//! Python or PyO3.

#[cfg(feature = "python")]
mod calls;
#[cfg(feature = "python")]
mod command;
#[cfg(feature = "python")]
mod module;
