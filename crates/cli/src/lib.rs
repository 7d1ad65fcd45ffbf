//! The `goodput` command as a library: [`main`] runs this process's command line,
//! [`main_with_args`] any command line, and both return the command's exit status (0 ok, 1 the
//! run failed its policy, 2 bad usage, 130 interrupted). The `goodput` binary (`main.rs`) calls
//! [`main`]; the Python package's `goodput` command calls [`main_with_args`] in-process with
//! `sys.argv`, so both are the same program.

mod app;
mod args;
mod cli;
mod commands;
mod embedded_sim;
mod exit;
mod options;
mod output;
mod store;
mod ui;
mod virtual_target;
mod web;
mod wiring;

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

/// Runs the command line of this process (`std::env::args_os`).
pub fn main() -> ExitCode {
    ExitCode::from(main_with_args(std::env::args_os()))
}

/// Runs a command line (its first item is the program's name, as in `argv`) and returns the exit
/// status. Help, `--version` and usage errors are printed as clap prints them; errors print with
/// their causes; a closed stdout (`goodput … | head`) is not an error. Some paths still end the
/// process, as the binary does: a second Ctrl-C during a run exits at once with status 130.
pub fn main_with_args<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString>,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let command_line = args
        .iter()
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    let status = match cli::parse_from(args) {
        Ok(cli) => match app::run(cli, command_line) {
            Ok(code) => exit::status(code),
            Err(error) if app::is_broken_pipe(&error) => exit::EXIT_OK,
            Err(error) => {
                eprintln!("error: {error:#}");
                exit::EXIT_USAGE
            }
        },
        Err(status) => status,
    };
    // The binary's runtime flushes stdout when `main` returns; a caller that goes on (Python)
    // must see every line printed.
    let _ = std::io::stdout().flush();
    status
}
