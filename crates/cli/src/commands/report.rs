//! `goodput report`: rebuild the report of a run from its journal (and the `run.json` beside
//! it, which records the SLO, load and window), e.g. after a crash or with another SLO.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use goodput_core::capacity::{CapacityPlan, CapacityReport};
use goodput_core::config::RunConfig;
use goodput_core::manifest::RunManifest;
use goodput_core::metrics::StepAggregator;
use goodput_core::metrics::aggregate::Compliance;
use goodput_core::overhead::ClientOverhead;
use goodput_core::record::RequestRecord;
use goodput_core::report::{LoadReport, Report, StepReport};
use goodput_core::runner::{EndReason, read_journal};
use goodput_core::sweep::{SweepReport, find_knee};
use goodput_core::warnings;

use crate::app::EXIT_OK;
use crate::args::run::parse_slo;
use crate::cli::ReportArgs;
use crate::output;

/// Runs `goodput report`.
pub(crate) fn run(args: ReportArgs) -> Result<ExitCode> {
    let (journal_path, dir) = locate(&args.journal);
    let manifest = read_manifest(&dir)?;
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
    let report = rebuild(&manifest, &config, &contents.records, &dir)?;
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out)
            .with_context(|| format!("--out: cannot create {}", out.display()))?;
        output::json::write_report(&out.join("report.json"), &report)?;
    }
    super::run_extras::export_and_record(args.out.as_deref(), args.store.as_deref(), &report)?;
    if args.json {
        output::json::print_report(&report)?
    } else {
        output::table::print_summary(&report)?
    }
    Ok(ExitCode::from(EXIT_OK))
}

/// The report of `records` under `manifest` (with `config`, its configuration or an SLO
/// override): what `goodput report` prints, and what `goodput merge` computes from the union
/// of the shards' records. `dir` holds the run's server-side files, if any.
pub(crate) fn rebuild(
    manifest: &RunManifest,
    config: &RunConfig,
    records: &[RequestRecord],
    dir: &Path,
) -> Result<Report> {
    let buckets = crate::commands::workload::recorded_buckets(&manifest.run.workload)?;
    let mut server_headers = goodput_core::environment::ServerHeaders::default();
    let mut overhead = ClientOverhead::from_records_only();
    for record in records {
        server_headers.add(record);
        overhead.add(record);
    }
    let (steps, compliance) = rebuild_steps(manifest, config, &buckets, records);
    let mut run = manifest.run.clone();
    run.slo = config.slo.as_ref().map(ToString::to_string);
    if run.end_reason == "running" {
        run.end_reason = "unknown (rebuilt from the journal of an unfinished run)".into();
    }
    let mut warnings = warnings::check(config, &steps, EndReason::Completed);
    warnings.extend(goodput_core::checks::check_run(&run, &steps));
    run.server_info =
        Some(server_headers.server_info(run.server_info.take().unwrap_or_default().models));
    let sweep = manifest.sweep.as_ref().map(|plan| SweepReport {
        knee: find_knee(plan.dimension, &plan.loads, &steps, plan.knee_min_gain),
        ..plan.clone()
    });
    let capacity = manifest
        .capacity
        .as_ref()
        .map(|plan| rejudge_capacity(plan, config.slo.as_ref(), &steps, &compliance));
    let mut report = Report::new(manifest.tool.clone(), run, steps, warnings);
    report.sweep = sweep;
    report.capacity = capacity;
    overhead.attach(&mut report);
    super::server_side::rebuild(dir, records, &mut report, config.window)?;
    Ok(report)
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

/// One step report (and SLO tally) per step of the run: the manifest's `steps` for a sweep or
/// capacity search (records carry their step index), else the single configured load.
fn rebuild_steps(
    manifest: &RunManifest,
    config: &RunConfig,
    buckets: &goodput_core::metrics::buckets::LengthBuckets,
    records: &[RequestRecord],
) -> (Vec<StepReport>, Vec<Compliance>) {
    let loads = if manifest.steps.is_empty() {
        vec![config.load.clone()]
    } else {
        manifest.steps.clone()
    };
    let mut aggregators: Vec<StepAggregator> = loads
        .iter()
        .map(|_| {
            StepAggregator::new(config.slo.clone(), config.window)
                .with_length_buckets(buckets.clone())
        })
        .collect();
    for record in records {
        let index = usize::try_from(record.step).unwrap_or(usize::MAX);
        // A plain run has one step; a record of an unknown step is counted in the last.
        let last = aggregators.len() - 1;
        aggregators[index.min(last)].add(record);
    }
    let steps = loads
        .iter()
        .zip(&aggregators)
        .map(|(load, aggregator)| aggregator.report(LoadReport::from(load)))
        .collect();
    let compliance = aggregators.iter().map(StepAggregator::compliance).collect();
    (steps, compliance)
}

/// The capacity verdict again from the probe steps, under `slo` (the recorded one, or the
/// --slo override).
fn rejudge_capacity(
    plan: &CapacityPlan,
    slo: Option<&goodput_core::metrics::Slo>,
    steps: &[StepReport],
    compliance: &[Compliance],
) -> CapacityReport {
    let mut criteria = plan.criteria.clone();
    if let Some(slo) = slo {
        criteria.slo = slo.clone();
    }
    let probes: Vec<(f64, &StepReport, &Compliance)> = steps
        .iter()
        .zip(compliance)
        .skip(plan.first_probe_step)
        .map(|(step, tally)| {
            let load = step
                .load
                .rate_per_sec
                .or(step.load.concurrency.map(f64::from))
                .unwrap_or(f64::NAN);
            (load, step, tally)
        })
        .collect();
    CapacityPlan {
        criteria,
        ..plan.clone()
    }
    .report_from(&probes)
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
