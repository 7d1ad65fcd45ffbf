//! A tune's own files: `tune.json` (the plan and the configurations, written when the tune
//! starts, checked by `--resume`) and `tune.jsonl` (the journal: one line per finished
//! configuration, flushed and synced as it ends, so a tune killed midway resumes without
//! measuring a finished configuration again and `goodput report` rebuilds it).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use goodput_core::report::tune::{TuneMeasure, TuneMode, TuneRun, TuneServer};
use goodput_core::report::{RunInfo, ToolInfo};
use serde::{Deserialize, Serialize};

/// The manifest's file.
pub(crate) const MANIFEST: &str = "tune.json";
/// The journal's file.
pub(crate) const JOURNAL: &str = "tune.jsonl";

/// `tune.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct TuneManifest {
    /// The tool that started the tune.
    pub(crate) tool: ToolInfo,
    /// When it first started, RFC 3339.
    pub(crate) started_at: String,
    /// Its command line (credentials redacted).
    pub(crate) command_line: Vec<String>,
    /// What every configuration's runs share (the tune report's `run`).
    pub(crate) run: RunInfo,
    /// What it measures and how.
    pub(crate) plan: PlanRecord,
    /// The configurations, in grid order.
    pub(crate) configurations: Vec<ConfigurationRecord>,
}

/// The plan a resumed tune must share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PlanRecord {
    /// Live or virtual time.
    pub(crate) mode: TuneMode,
    /// Capacity search or sweep.
    pub(crate) measure: TuneMeasure,
    /// The SLO, in flag syntax.
    pub(crate) slo: String,
    /// The attainment target.
    pub(crate) attainment: f64,
    /// How accelerators are counted.
    pub(crate) accelerators_basis: String,
    /// `--gpu-hour-cost`.
    pub(crate) gpu_hour_cost: Option<f64>,
    /// `--repeats`.
    pub(crate) repeats: u32,
    /// How the servers are run.
    pub(crate) server: Option<TuneServer>,
    /// `--verify-top`.
    pub(crate) verify_top: usize,
}

/// One configuration of the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ConfigurationRecord {
    /// Its name.
    pub(crate) name: String,
    /// Its placeholder values.
    pub(crate) values: BTreeMap<String, String>,
    /// Its accelerators.
    pub(crate) accelerators: u32,
    /// Its directory, relative to the tune's.
    pub(crate) dir: String,
}

/// Which measurement of a configuration a journal line holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum EntryKind {
    /// The configuration's measurement (or, in virtual time, its prediction).
    Measured,
    /// `--verify-top`: its live measurement.
    Verified,
}

/// One line of `tune.jsonl`: a finished configuration.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Entry {
    /// The configuration's index in the plan.
    pub(crate) index: usize,
    /// Which measurement.
    pub(crate) kind: EntryKind,
    /// Its name (for people reading the journal).
    pub(crate) name: String,
    /// What it gave.
    pub(crate) run: TuneRun,
}

/// Writes the manifest, or with `resume` checks that the one in `dir` has the same plan and
/// configurations (keeping its start); the manifest in force.
pub(crate) fn open(dir: &Path, manifest: TuneManifest, resume: bool) -> Result<TuneManifest> {
    let path = dir.join(MANIFEST);
    if resume {
        let recorded = read_manifest(dir)?;
        let mut wanted = manifest.plan.clone();
        // How long a server may take to start or stop may change; what is measured may not.
        if let (Some(wanted), Some(recorded)) = (wanted.server.as_mut(), &recorded.plan.server) {
            wanted.ready_timeout_secs = recorded.ready_timeout_secs;
            wanted.stop_grace_secs = recorded.stop_grace_secs;
        }
        if recorded.plan != wanted {
            bail!(
                "--resume {}: it was tuned with another plan ({}); rerun with the flags it \
                 was started with (tune.json's command_line)",
                dir.display(),
                differences(&recorded.plan, &wanted)
            );
        }
        if recorded.configurations != manifest.configurations {
            bail!(
                "--resume {}: its configurations differ from this grid's; rerun with the grid it \
                 was started with (tune.json)",
                dir.display()
            );
        }
        return Ok(recorded);
    }
    std::fs::create_dir_all(dir)
        .with_context(|| format!("--out: cannot create {}", dir.display()))?;
    crate::output::json::write_json(&path, &manifest)?;
    // A fresh journal: an empty one left by a tune that finished nothing is replaced.
    std::fs::write(dir.join(JOURNAL), "")
        .with_context(|| format!("cannot create {}", dir.join(JOURNAL).display()))?;
    Ok(manifest)
}

/// The plan fields two records disagree on.
fn differences(a: &PlanRecord, b: &PlanRecord) -> String {
    let (a, b) = (
        serde_json::to_value(a).unwrap_or_default(),
        serde_json::to_value(b).unwrap_or_default(),
    );
    let keys: Vec<String> = a
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(key, value)| b.get(key.as_str()) != Some(value))
        .map(|(key, value)| format!("{key} was {value}, now {}", b[key.as_str()]))
        .collect();
    keys.join("; ")
}

/// `tune.json` in `dir`.
pub(crate) fn read_manifest(dir: &Path) -> Result<TuneManifest> {
    let path = dir.join(MANIFEST);
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text)
        .with_context(|| format!("{} is not a tune manifest", path.display()))
}

/// Every finished entry of `dir`'s journal (a last line cut short by a kill is skipped).
pub(crate) fn read_entries(dir: &Path) -> Result<Vec<Entry>> {
    let path = dir.join(JOURNAL);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(error).with_context(|| format!("cannot read {}", path.display())),
    };
    let mut entries = Vec::new();
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    for (number, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Entry>(line.trim()) {
            Ok(entry) => entries.push(entry),
            Err(_) if !line.ends_with('\n') => {}
            Err(error) => bail!("{} line {}: {error}", path.display(), number + 1),
        }
    }
    Ok(entries)
}

/// The journal, open for appending.
#[derive(Debug)]
pub(crate) struct Journal {
    path: PathBuf,
}

impl Journal {
    /// The journal of `dir` (created by [`open`]).
    pub(crate) fn of(dir: &Path) -> Journal {
        Journal {
            path: dir.join(JOURNAL),
        }
    }

    /// Appends `entry` and syncs it to disk.
    pub(crate) fn append(&self, entry: &Entry) -> Result<()> {
        let line = serde_json::to_string(entry).context("serializing a tune journal line")?;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(&self.path)
            .with_context(|| format!("cannot open {}", self.path.display()))?;
        file.write_all(format!("{line}\n").as_bytes())
            .and_then(|()| file.sync_data())
            .with_context(|| format!("cannot write {}", self.path.display()))
    }
}
