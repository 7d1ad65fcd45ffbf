//! The command line: `goodput run | sweep | capacity | calibrate | sim | report | merge | compare | gate | history
//! | plan | monitor`, defined with clap derive. Doc comments are the help text. Values are parsed here; cross-field validation happens when the arguments
//! are turned into the engine's configuration (see `args`).

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::args::analysis::{CompareArgs, GateArgs, HistoryArgs};
use crate::args::run::RunArgs;
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
    Run(Box<RunArgs>),
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
    Report(ReportArgs),
    /// Merge the shards of a sharded run (`--shards`) into one run and one report.
    Merge(crate::args::merge::MergeArgs),
    /// Compare two runs: every figure side by side, significance of latency changes, and
    /// warnings when the conditions differ.
    Compare(CompareArgs),
    /// Judge a report against release criteria (exit 0 pass, 1 fail, 2 usage error).
    Gate(GateArgs),
    /// List the runs recorded with --store, or show a figure's trend across them.
    History(HistoryArgs),
    /// How many devices a peak demand needs: safety factor, N−k failures, growth, cost.
    Plan(crate::args::plan::PlanArgs),
    /// Watch a live server's /metrics: arrivals vs completions, queue trend, KV usage,
    /// length drift; flags a growing queue and a throughput drop.
    Monitor(crate::args::monitor::MonitorArgs),
}

/// Arguments of `goodput report`.
#[derive(Debug, clap::Args)]
pub(crate) struct ReportArgs {
    /// The journal (`requests.jsonl`) or the run's output directory.
    pub(crate) journal: PathBuf,
    /// Override the SLO recorded with the run (`none` to drop it).
    #[arg(long)]
    pub(crate) slo: Option<String>,
    /// Write `report.json` into this directory (default: print only).
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// Print the report as JSON instead of the summary table (= --format json).
    #[arg(long)]
    pub(crate) json: bool,
    /// What is printed on stdout: the terminal summary, the report as JSON, or Markdown tables.
    #[arg(long, value_enum, default_value_t)]
    pub(crate) format: crate::args::reporting::SummaryFormat,
    /// Terminal summary: also show the sections beyond the first screen (see `goodput run
    /// --help`).
    #[arg(long)]
    pub(crate) details: bool,
    /// Record the rebuilt report in this SQLite history store.
    #[arg(long, value_name = "DB")]
    pub(crate) store: Option<PathBuf>,
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
