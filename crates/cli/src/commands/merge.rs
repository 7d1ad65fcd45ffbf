//! `goodput merge`: the shards of a sharded run into one run directory and one report — the
//! report `goodput report` computes from the union of their journals, plus the shards section
//! (missing or unfinished shards and their losses, lateness, clock skew, client overhead).

use std::process::ExitCode;

use anyhow::{Context, Result};
use goodput_core::merge::{ShardDir, ShardsReport, merge};
use goodput_core::runner::JournalWriter;

use crate::exit::{EXIT_OK, EXIT_RUN_FAILED};
use crate::options::report::MergeOptions;
use crate::options::run::SummaryFormat;
use crate::output;

/// Runs `goodput merge`. Exit status 1 when a shard is missing or did not complete (the
/// merged report is still written).
pub(crate) fn run(options: MergeOptions) -> Result<ExitCode> {
    let mut dirs = Vec::with_capacity(options.dirs.len());
    for dir in &options.dirs {
        let shard =
            ShardDir::read(dir).with_context(|| format!("reading shard {}", dir.display()))?;
        if shard.torn_last_line {
            eprintln!(
                "note: {}: the journal's last line was cut short (the shard was killed mid-write); it was skipped",
                dir.display()
            );
        }
        dirs.push(shard);
    }
    let merged = merge(dirs)?;
    let mut config = merged.manifest.config.clone();
    if let Some(slo) = options.slo.clone() {
        config.slo = slo;
    }
    let server_dir = &options.dirs[0];
    let mut report =
        super::report::rebuild(&merged.manifest, &config, &merged.records, server_dir)?;
    report.warnings.extend(merged.shards.warnings());
    report.shards = Some(merged.shards.clone());
    write_run(&options, &merged, &report)?;
    if options.json {
        output::json::print_report(&report)?;
    } else {
        output::table::print_report(&report, SummaryFormat::Text, false)?;
        print_shards(&merged.shards);
    }
    let complete = merged
        .shards
        .shards
        .iter()
        .all(|s| s.end_reason == "completed");
    Ok(ExitCode::from(if complete {
        EXIT_OK
    } else {
        EXIT_RUN_FAILED
    }))
}

/// The merged run directory: manifest, union journal, report and exports.
fn write_run(
    options: &MergeOptions,
    merged: &goodput_core::merge::Merged,
    report: &goodput_core::report::Report,
) -> Result<()> {
    let out = &options.out;
    std::fs::create_dir_all(out)
        .with_context(|| format!("--out: cannot create {}", out.display()))?;
    output::json::write_json(&out.join("run.json"), &merged.manifest)?;
    let path = out.join("requests.jsonl");
    let mut journal = JournalWriter::create(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    for record in &merged.records {
        journal
            .append(record)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    journal.sync()?;
    // The server side as the first shard scraped it, so `goodput report` on the merged run
    // finds it too.
    for name in [
        crate::wiring::server_side::ANALYSIS_FILE,
        crate::wiring::server_side::SCRAPES_FILE,
    ] {
        let from = options.dirs[0].join(name);
        if from.exists() {
            std::fs::copy(&from, out.join(name))
                .with_context(|| format!("copying {}", from.display()))?;
        }
    }
    output::json::write_report(&out.join("report.json"), report)?;
    crate::wiring::run_extras::write_exports(out, report)
}

/// One line per shard on stderr.
fn print_shards(shards: &ShardsReport) {
    eprintln!("shards ({}, start {}):", shards.count, shards.start_at);
    for shard in &shards.shards {
        let lag = shard
            .client
            .as_ref()
            .and_then(|c| c.dispatch_lag_ms.p99)
            .map_or_else(|| "–".to_string(), |p99| format!("{p99:.2} ms"));
        let clock = shard.clock_offset_ms.as_ref().map_or_else(
            || "–".to_string(),
            |c| {
                format!(
                    "{:+.0} ±{:.0} ms",
                    c.estimate_ms,
                    (c.high_ms - c.low_ms) / 2.0
                )
            },
        );
        eprintln!(
            "  {:>3}  {:<11} {:>8} records  late {:>7.1} ms  dispatch lag p99 {:>9}  clock {:>12}  {}",
            shard.index,
            shard.end_reason,
            shard.records,
            shard.late_ms,
            lag,
            clock,
            shard.source.as_deref().unwrap_or("(not given)")
        );
        if let Some(lost) = &shard.lost {
            eprintln!("       lost: {}", lost.describe());
        }
    }
    if let Some(skew) = shards.clock_skew_ms {
        let proven = shards.clock_skew_at_least_ms.unwrap_or(0.0);
        eprintln!(
            "  clock skew between shards: {skew:.0} ms (at least {proven:.0} ms; against the target's Date headers)"
        );
    }
}
