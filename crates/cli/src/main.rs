//! The `goodput` binary: runs this process's command line with the library ([`goodput::main`])
//! and exits with its status.

use std::process::ExitCode;

fn main() -> ExitCode {
    goodput::main()
}
