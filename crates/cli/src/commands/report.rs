//! `goodput report`: rebuild the report of a run from its journal (and the `run.json` beside
//! it, which records the SLO, load and window), e.g. after a crash or with another SLO. The
//! report is [`goodput_core::assemble::rebuild`]'s; this command reads the files, adds the
//! server-side scrapes, writes and prints. A tune's directory (`tune.json`) is rebuilt by
//! [`crate::commands::tune::rebuild`].

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use goodput_core::assemble;
use goodput_core::config::RunConfig;
use goodput_core::manifest::RunManifest;
use goodput_core::runner::read_journal;

use crate::exit::{EXIT_OK, EXIT_RUN_FAILED};
use crate::options::report::ReportOptions;
use crate::output;

/// Runs `goodput report`.
pub(crate) fn run(options: ReportOptions) -> Result<ExitCode> {
    if crate::commands::tune::is_tune_dir(&options.journal) {
        return crate::commands::tune::rebuild(options);
    }
    let (journal_path, dir) = locate(&options.journal);
    let manifest = read_manifest(&dir)?;
    let mut config: RunConfig = manifest.config.clone();
    if let Some(slo) = options.slo {
        config.slo = slo;
    }
    let contents = read_journal(&journal_path)?;
    if contents.torn_last_line {
        eprintln!(
            "note: the journal's last line was cut short (the run was killed mid-write); it was skipped"
        );
    }
    let report = rebuild(&manifest, &config, &contents.records, &dir)?;
    if let Some(out) = &options.out {
        std::fs::create_dir_all(out)
            .with_context(|| format!("--out: cannot create {}", out.display()))?;
        output::json::write_report(&out.join("report.json"), &report)?;
    }
    crate::wiring::run_extras::export_and_record(
        options.out.as_deref(),
        options.store.as_ref(),
        &report,
    )?;
    output::table::print_report(&report, options.summary, options.details)?;
    if !output::exports::send_all(&options.exports, &report) {
        return Ok(ExitCode::from(EXIT_RUN_FAILED));
    }
    Ok(ExitCode::from(EXIT_OK))
}

/// `run.json`, written when the run started.
pub(crate) fn read_manifest(dir: &Path) -> Result<RunManifest> {
    let path = dir.join("run.json");
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "cannot read {} (written when the run started)",
            path.display()
        )
    })?;
    serde_json::from_str(&text)
        .with_context(|| format!("{} is not a goodput run manifest", path.display()))
}

/// The report of `records` under `manifest` and `config`: the core rebuild plus the server's
/// scrapes found in `dir` (also what `goodput merge` builds its report with).
pub(crate) fn rebuild(
    manifest: &RunManifest,
    config: &RunConfig,
    records: &[goodput_core::record::RequestRecord],
    dir: &Path,
) -> Result<goodput_core::report::Report> {
    let buckets = crate::wiring::workload::recorded_buckets(&manifest.run.workload)?;
    let mut report = assemble::rebuild(manifest, config, &buckets, records);
    crate::wiring::server_side::rebuild(dir, records, &mut report, config.window)?;
    Ok(report)
}

/// The journal file and its directory, from either of them.
fn locate(path: &Path) -> (PathBuf, PathBuf) {
    if path.is_dir() {
        (path.join("requests.jsonl"), path.to_path_buf())
    } else {
        let dir = path
            .parent()
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        (path.to_path_buf(), dir)
    }
}
