//! The `goodput` binary: parses the command line and hands over to [`app::run`], which returns
//! the exit status. Errors print with their causes; a closed stdout (`| head`) is not an error.

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
mod wiring;

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::parse();
    match app::run(cli) {
        Ok(code) => code,
        Err(error) if app::is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(exit::EXIT_USAGE)
        }
    }
}
