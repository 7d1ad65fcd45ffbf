//! The command line: `goodput run | sweep | capacity | calibrate | sim | report | merge |
//! compare | gate | history | ui | plan | monitor | tune`, defined with clap derive over the argument
//! groups of `args` (doc comments are the help text); [`parse_from`] reads a command line. Single
//! values are parsed by clap; the cross-field checks happen when `app` turns a subcommand's
//! arguments into its plain configuration (`args` → `options`).

use clap::{Parser, Subcommand};

use crate::args::analysis::{CompareArgs, GateArgs, HistoryArgs};
use crate::args::run_command::RunCommandArgs;
use crate::args::sim::SimArgs;

/// Measure how much work an LLM inference deployment completes per second while meeting its
/// latency targets.
///
/// Without a target, `goodput run` benchmarks an embedded simulated inference engine, so it
/// works on any machine.
#[derive(Debug, Parser)]
#[command(name = "goodput", version, max_term_width = 100)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Benchmark an OpenAI-compatible server (default: the embedded simulator) under open- or
    /// closed-loop load and report throughput, latency percentiles and goodput.
    Run(Box<RunCommandArgs>),
    /// Run one measured step per load level (concurrency, arrival rate or batch size) and
    /// find the knee, where throughput stops growing while latency keeps rising.
    Sweep(Box<crate::args::sweep::SweepArgs>),
    /// Find the highest load at which the queue stays stable and the SLO holds, with its
    /// bounds and confidence (bracketing, then bisection; each probe long enough to prove
    /// the attainment target).
    Capacity(Box<crate::args::capacity::CapacityArgs>),
    /// Fit the simulator to a real server from a short profile (decode, prefill, a
    /// concurrency sweep, its slots), write the configuration; --check compares a held-out
    /// workload predicted in virtual time with the server.
    Calibrate(crate::args::calibrate::CalibrateArgs),
    /// Serve the simulated inference engine over an OpenAI-compatible HTTP API, or explain its
    /// derived figures (--explain).
    Sim(Box<SimArgs>),
    /// Rebuild a report from a run's journal (requests.jsonl).
    Report(crate::args::report::ReportArgs),
    /// Merge the shards of a sharded run (`--shards`) into one run and one report.
    Merge(crate::args::merge::MergeArgs),
    /// Compare two runs: every figure side by side, significance of latency changes, and
    /// warnings when the conditions differ.
    Compare(CompareArgs),
    /// Judge a report against release criteria (exit 0 pass, 1 fail, 2 usage error).
    Gate(GateArgs),
    /// List the runs recorded with --store, or show a figure's trend across them.
    History(HistoryArgs),
    /// Serve the runs recorded with --store as a local web app: runs filtered by tag, model,
    /// target and date, each run's report, trends with significance marks, comparisons.
    Ui(crate::args::ui::UiArgs),
    /// How many devices a peak demand needs: safety factor, N−k failures, growth, cost.
    Plan(crate::args::plan::PlanArgs),
    /// Watch a live server's /metrics: arrivals vs completions, queue trend, KV usage,
    /// length drift; flags a growing queue and a throughput drop.
    Monitor(crate::args::monitor::MonitorArgs),
    /// Find the server configuration that serves the most under the SLO per accelerator:
    /// start each configuration of a grid from a command template (or simulate it in virtual
    /// time), measure its capacity, stop it; the Pareto front and the best configuration.
    Tune(Box<crate::args::tune::TuneArgs>),
}

/// A command line (program name first), parsed; or, when clap printed help, the version or a
/// usage error instead (to stdout or stderr, as `Cli::parse` would), the exit status to return.
pub(crate) fn parse_from(args: Vec<std::ffi::OsString>) -> Result<Cli, u8> {
    Cli::try_parse_from(args).map_err(|error| {
        let _ = error.print();
        u8::try_from(error.exit_code()).unwrap_or(crate::exit::EXIT_USAGE)
    })
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        // Catches duplicate flags, bad defaults and conflicting groups across subcommands.
        Cli::command().debug_assert();
    }
}
