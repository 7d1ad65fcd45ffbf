//! `goodput report`: rebuild the report of a run from its journal (and the `run.json` beside
//! it, which records the SLO, load and window), e.g. after a crash or with another SLO.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use goodput_core::config::RunConfig;
use goodput_core::manifest::RunManifest;
use goodput_core::metrics::StepAggregator;
use goodput_core::overhead::ClientOverhead;
use goodput_core::report::{LoadReport, Report, SCHEMA_VERSION};
use goodput_core::runner::{EndReason, read_journal};
use goodput_core::warnings;

use crate::app::EXIT_OK;
use crate::args::run::parse_slo;
use crate::cli::ReportArgs;
use crate::output;

/// Runs `goodput report`.
pub(crate) fn run(args: ReportArgs) -> Result<ExitCode> {
    let (journal_path, dir) = locate(&args.journal);
    let manifest_path = dir.join("run.json");
    let manifest: RunManifest = {
        let text = std::fs::read_to_string(&manifest_path).with_context(|| {
            format!(
                "cannot read {} (written when the run started)",
                manifest_path.display()
            )
        })?;
        serde_json::from_str(&text)
            .with_context(|| format!("{} is not a goodput run manifest", manifest_path.display()))?
    };
    let mut config: RunConfig = manifest.config.clone();
    if let Some(slo) = &args.slo {
        config.slo = parse_slo(slo)?;
    }
    let contents = read_journal(&journal_path)?;
    if contents.torn_last_line {
        eprintln!(
            "note: the journal's last line was cut short (the run was killed mid-write); it was skipped"
        );
    }
    let mut aggregator = StepAggregator::new(config.slo.clone(), config.window);
    let mut overhead = ClientOverhead::from_records_only();
    for record in &contents.records {
        aggregator.add(record);
        overhead.add(record);
    }
    let mut run = manifest.run;
    run.slo = config.slo.as_ref().map(ToString::to_string);
    if run.end_reason == "running" {
        run.end_reason = "unknown (rebuilt from the journal of an unfinished run)".into();
    }
    let steps = vec![aggregator.report(LoadReport::from(&config.load))];
    let warnings = warnings::check(&config, &steps, EndReason::Completed);
    let mut report = Report {
        schema_version: SCHEMA_VERSION,
        tool: manifest.tool,
        run,
        steps,
        warnings,
        client: None,
    };
    overhead.attach(&mut report);
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out)
            .with_context(|| format!("--out: cannot create {}", out.display()))?;
        output::json::write_report(&out.join("report.json"), &report)?;
    }
    if args.json {
        output::json::print_report(&report)?
    } else {
        output::table::print_summary(&report)?
    }
    Ok(ExitCode::from(EXIT_OK))
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
