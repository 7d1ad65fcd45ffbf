//! `goodput report DIR` on a tune's directory: every finished configuration's figures again
//! from its own files (its journal and `run.json` rebuilt as `goodput report` rebuilds any run,
//! or, in virtual time, its `report.json`), the start-up times and failures from the tune's
//! journal, and the ranking, front and best configuration concluded anew — under `--slo` when
//! given.

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use goodput_core::decide::tune::{Judging, figures};
use goodput_core::report::Report;
use goodput_core::report::tune::TuneRun;
use goodput_core::runner::read_journal;

use super::journal::{self, MANIFEST, PlanRecord};
use crate::options::report::ReportOptions;

/// Whether `path` is a tune's output directory (it holds `tune.json`).
pub(crate) fn is_tune_dir(path: &Path) -> bool {
    path.is_dir() && path.join(MANIFEST).is_file()
}

/// Rebuilds, writes (`--out`) and prints a tune's report.
pub(crate) fn rebuild(options: ReportOptions) -> Result<ExitCode> {
    let exports = &options.exports;
    let exported = exports.push_gateway.is_some()
        || exports.llmd_report.is_some()
        || exports.mlflow.is_some()
        || exports.otlp.is_some();
    if options.store.is_some() || exported {
        bail!("--store and the exports take one run's report: give a configuration's directory");
    }
    let dir = &options.journal;
    let mut manifest = journal::read_manifest(dir)?;
    if let Some(slo) = &options.slo {
        manifest.plan.slo = slo.as_ref().map_or("none".into(), ToString::to_string);
    }
    let count = manifest.configurations.len();
    let (runs, verified) = super::finished(dir, count)?;
    let mut rebuilt = Vec::with_capacity(count);
    for (record, run) in manifest.configurations.iter().zip(runs) {
        let judging = judging(&manifest.plan, record.accelerators);
        rebuilt.push(match run {
            Some(run) => Some(refigure(dir, run, judging, &options)?),
            None => None,
        });
    }
    let mut checked = std::collections::BTreeMap::new();
    for (index, run) in verified {
        let accelerators = manifest
            .configurations
            .get(index)
            .map_or(1, |r| r.accelerators);
        let judging = judging(&manifest.plan, accelerators);
        checked.insert(index, refigure(dir, run, judging, &options)?);
    }
    let unfinished = rebuilt.iter().any(Option::is_none);
    let report = super::assemble(&manifest, rebuilt, checked, unfinished);
    if let Some(out) = &options.out {
        std::fs::create_dir_all(out)
            .with_context(|| format!("--out: cannot create {}", out.display()))?;
        crate::output::json::write_report(&out.join("report.json"), &report)?;
        crate::wiring::run_extras::write_exports(out, &report)?;
    }
    crate::output::table::print_report(&report, options.summary, options.details)?;
    Ok(ExitCode::from(super::status(&report, false)))
}

/// How the configurations of `plan` are judged, one with `accelerators`.
fn judging(plan: &PlanRecord, accelerators: u32) -> Judging {
    Judging {
        measure: plan.measure,
        attainment: plan.attainment,
        accelerators,
        gpu_hour_cost: plan.gpu_hour_cost,
    }
}

/// `run`'s figures from its directory's files (a run that failed before measuring is kept).
fn refigure(
    dir: &Path,
    mut run: TuneRun,
    judging: Judging,
    options: &ReportOptions,
) -> Result<TuneRun> {
    if run.figures.is_none() {
        return Ok(run);
    }
    let report = configuration_report(&dir.join(&run.dir), options)?;
    run.figures = Some(figures(&report, judging));
    Ok(run)
}

/// A configuration's report: rebuilt from its journal, else (virtual time) as written.
fn configuration_report(root: &Path, options: &ReportOptions) -> Result<Report> {
    let journal = root.join("requests.jsonl");
    if !journal.exists() {
        let path = root.join("report.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        return serde_json::from_str(&text)
            .with_context(|| format!("{} is not a goodput report", path.display()));
    }
    let manifest = crate::commands::report::read_manifest(root)?;
    let mut config = manifest.config.clone();
    if let Some(slo) = &options.slo {
        config.slo = slo.clone();
    }
    let contents = read_journal(&journal)?;
    crate::commands::report::rebuild(&manifest, &config, &contents.records, root)
}
