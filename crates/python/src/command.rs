//! `goodput._native.command(argv)`: the `goodput` command of crates/cli run in this process
//! with a command line (program name first), without the GIL; returns its exit status. The
//! package's `goodput` console script (`goodput._cli.main`) calls it with `sys.argv`, so the
//! command pip installs is the same program as the native binary.

use std::ffi::OsString;

use pyo3::prelude::*;

/// Runs the `goodput` command line `argv` and returns its exit status (0 ok, 1 the run failed
/// its policy, 2 bad usage, 130 interrupted).
#[pyfunction]
pub(crate) fn command(py: Python<'_>, argv: Vec<OsString>) -> u8 {
    py.detach(move || goodput::main_with_args(argv))
}
