//! `goodput merge`: the shards of one sharded run ([`crate::shard`]) back into one run — the
//! union of their journals under the one global manifest, so the report rebuilt from it is
//! exactly the report of those records in one process — plus what only the shards know: which
//! shard is missing or unfinished and what it lost ([`lost`]), how late each started, each
//! one's client overhead, and the clock skew between their machines ([`clock`]).
//!
//! Shards that are not parts of one run (another seed, load, workload, target, shard count or
//! start time) are refused, as is a request index recorded by two shards.

pub mod clock;
pub mod lost;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::manifest::RunManifest;
use crate::observe::overhead::{ClientOverhead, ClientReport};
use crate::record::RequestRecord;
use crate::report::Warning;
use crate::runner::journal::{JournalError, read_journal};

pub use crate::report::shards::{ShardSummary, ShardsReport};
pub use clock::ClockOffset;
pub use lost::Lost;

/// Lateness beyond which a shard is said to have started late, ms.
pub const LATE_MS: f64 = 1.0;
/// Clock skew between shards beyond which the merge warns, ms.
pub const SKEW_MS: f64 = 50.0;

/// Why shards cannot be merged.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// A file could not be read.
    #[error("{path}: {message}")]
    Read {
        /// The file.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// A journal could not be read.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// A run that was not started with `--shards`.
    #[error(
        "{0}: not a shard (its run.json has no shard; run with --shards, --shard-index, --start-at)"
    )]
    NotAShard(String),
    /// Two shards of different runs.
    #[error(
        "{first} and {second} are not shards of one run: their {what} differ ({a} vs {b}); every shard must run with the same flags and seed"
    )]
    DifferentRuns {
        /// One shard's directory.
        first: String,
        /// The other's.
        second: String,
        /// What differs.
        what: &'static str,
        /// Its value in the first.
        a: String,
        /// In the second.
        b: String,
    },
    /// The same shard given twice.
    #[error("shard {index} is given twice ({first} and {second})")]
    DuplicateShard {
        /// The shard index.
        index: u32,
        /// One directory.
        first: String,
        /// The other.
        second: String,
    },
    /// A request recorded by two shards.
    #[error(
        "request {index} of step {step} was recorded by shards {a} and {b}: these are not the journals of one sharded run"
    )]
    DuplicateRequest {
        /// Its index.
        index: u64,
        /// Its step.
        step: u32,
        /// One shard.
        a: u32,
        /// The other.
        b: u32,
    },
    /// Nothing to merge.
    #[error("no shard directories given")]
    Empty,
}

/// One shard's output directory, read.
#[derive(Debug, Clone)]
pub struct ShardDir {
    /// Where it was read from.
    pub source: String,
    /// Its `run.json`.
    pub manifest: RunManifest,
    /// Its journal.
    pub records: Vec<RequestRecord>,
    /// Whether the journal's last line was torn (the process died mid-write).
    pub torn_last_line: bool,
    /// How its run ended (`report.json`), or `None` when it never wrote its report.
    pub end_reason: Option<String>,
    /// Its client overhead section (`report.json`), when it wrote one.
    pub client: Option<ClientReport>,
}

impl ShardDir {
    /// Reads `run.json`, `requests.jsonl` and (if the shard finished) `report.json` from `dir`.
    pub fn read(dir: &Path) -> Result<Self, MergeError> {
        let source = dir.display().to_string();
        let manifest: RunManifest = read_json(&dir.join("run.json"))?;
        let contents = read_journal(&dir.join("requests.jsonl"))?;
        let report_path: PathBuf = dir.join("report.json");
        let report: Option<serde_json::Value> = if report_path.exists() {
            Some(read_json(&report_path)?)
        } else {
            None
        };
        // A report left by an earlier run in the same directory does not count.
        let report = report.filter(|r| r["run"]["started_at"] == manifest.run.started_at.as_str());
        let end_reason = report
            .as_ref()
            .and_then(|r| r["run"]["end_reason"].as_str().map(str::to_string));
        let client = report
            .as_ref()
            .and_then(|r| serde_json::from_value(r["client"].clone()).ok());
        Ok(ShardDir {
            source,
            manifest,
            records: contents.records,
            torn_last_line: contents.torn_last_line,
            end_reason,
            client,
        })
    }

    fn shard(&self) -> Result<&crate::shard::ShardInfo, MergeError> {
        self.manifest
            .shard
            .as_ref()
            .ok_or_else(|| MergeError::NotAShard(self.source.clone()))
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, MergeError> {
    let error = |message: String| MergeError::Read {
        path: path.display().to_string(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| error(e.to_string()))?;
    serde_json::from_str(&text).map_err(|e| error(format!("not valid: {e}")))
}

/// Shards merged into one run.
#[derive(Debug, Clone)]
pub struct Merged {
    /// The run's manifest (the shards' common one, without a shard).
    pub manifest: RunManifest,
    /// Every shard's records, in completion order (`end_us`, then index).
    pub records: Vec<RequestRecord>,
    /// What the merge knows about the shards.
    pub shards: ShardsReport,
}

/// Merges the shards of one run; refuses shards of different runs.
pub fn merge(mut dirs: Vec<ShardDir>) -> Result<Merged, MergeError> {
    if dirs.is_empty() {
        return Err(MergeError::Empty);
    }
    for dir in &dirs {
        dir.shard()?;
    }
    dirs.sort_by_key(|d| d.manifest.shard.as_ref().map_or(0, |s| s.index));
    for pair in dirs.windows(2) {
        same_run(&pair[0], &pair[1])?;
    }
    let records = union(&dirs)?;
    let first = &dirs[0];
    let info = first.shard()?.clone();
    let start_at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(info.start_at_unix_ms);
    let mut manifest = longest_steps(&dirs).manifest.clone();
    manifest.shard = None;
    manifest.run.started_at = crate::units::rfc3339(start_at);
    let given: BTreeMap<u32, &ShardDir> = dirs
        .iter()
        .filter_map(|d| Some((d.manifest.shard.as_ref()?.index, d)))
        .collect();
    let shards: Vec<ShardSummary> = (0..info.count)
        .map(|index| summarize(index, given.get(&index).copied(), &manifest, &dirs))
        .collect();
    let missing = (0..info.count).filter(|i| !given.contains_key(i)).collect();
    let offsets: Vec<&ClockOffset> = shards
        .iter()
        .filter_map(|s| s.clock_offset_ms.as_ref())
        .collect();
    let skew = clock::skew(&offsets);
    Ok(Merged {
        manifest,
        records,
        shards: ShardsReport {
            count: info.count,
            start_at: crate::units::rfc3339(start_at),
            shards,
            missing,
            clock_skew_ms: skew.map(|s| s.0),
            clock_skew_at_least_ms: skew.map(|s| s.1),
        },
    })
}

/// The shard that ran the most steps (a killed shard of a sweep recorded fewer).
fn longest_steps(dirs: &[ShardDir]) -> &ShardDir {
    dirs.iter()
        .max_by_key(|d| d.manifest.steps.len())
        .unwrap_or(&dirs[0])
}

/// Refuses two shards of different runs.
fn same_run(a: &ShardDir, b: &ShardDir) -> Result<(), MergeError> {
    let (ma, mb) = (&a.manifest, &b.manifest);
    let (sa, sb) = (a.shard()?, b.shard()?);
    if sa.index == sb.index {
        return Err(MergeError::DuplicateShard {
            index: sa.index,
            first: a.source.clone(),
            second: b.source.clone(),
        });
    }
    let differ = |what: &'static str, x: String, y: String| {
        if x == y {
            Ok(())
        } else {
            Err(MergeError::DifferentRuns {
                first: a.source.clone(),
                second: b.source.clone(),
                what,
                a: x,
                b: y,
            })
        }
    };
    differ(
        "seeds",
        ma.config.seed.to_string(),
        mb.config.seed.to_string(),
    )?;
    differ("shard counts", sa.count.to_string(), sb.count.to_string())?;
    differ(
        "start times (--start-at)",
        sa.start_at_unix_ms.to_string(),
        sb.start_at_unix_ms.to_string(),
    )?;
    differ("configurations", json(&ma.config), json(&mb.config))?;
    differ("workloads", json(&ma.run.workload), json(&mb.run.workload))?;
    differ("targets", ma.run.target.clone(), mb.run.target.clone())?;
    differ("models", ma.run.model.clone(), mb.run.model.clone())?;
    differ("APIs", ma.run.api.clone(), mb.run.api.clone())?;
    differ("sweeps", json(&ma.sweep), json(&mb.sweep))?;
    differ("capacity plans", json(&ma.capacity), json(&mb.capacity))?;
    let common = ma.steps.len().min(mb.steps.len());
    differ(
        "step loads",
        json(&ma.steps[..common].to_vec()),
        json(&mb.steps[..common].to_vec()),
    )
}

/// Anything serializable, as compact JSON (for comparing and naming differences).
fn json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// Every shard's records, refusing an index recorded twice, in completion order.
fn union(dirs: &[ShardDir]) -> Result<Vec<RequestRecord>, MergeError> {
    let mut owner: BTreeMap<(u32, u64), u32> = BTreeMap::new();
    let mut records = Vec::new();
    for dir in dirs {
        let shard = dir.shard()?.index;
        for record in &dir.records {
            if let Some(a) = owner.insert((record.step, record.index), shard) {
                return Err(MergeError::DuplicateRequest {
                    index: record.index,
                    step: record.step,
                    a,
                    b: shard,
                });
            }
            records.push(record.clone());
        }
    }
    records.sort_by_key(|r| (r.end_us, r.step, r.index));
    Ok(records)
}

fn summarize(
    index: u32,
    dir: Option<&ShardDir>,
    manifest: &RunManifest,
    dirs: &[ShardDir],
) -> ShardSummary {
    let Some(dir) = dir else {
        return ShardSummary {
            index,
            source: None,
            host: None,
            records: 0,
            end_reason: "missing".into(),
            late_ms: 0.0,
            clock_offset_ms: None,
            client: None,
            lost: lost::lost(manifest, index, &[], dirs),
        };
    };
    let info = dir.manifest.shard.as_ref();
    let finished = dir.end_reason.as_deref() == Some("completed");
    let client = dir.client.clone().or_else(|| {
        let mut overhead = ClientOverhead::from_records_only();
        dir.records.iter().for_each(|r| overhead.add(r));
        Some(overhead.report())
    });
    ShardSummary {
        index,
        source: Some(dir.source.clone()),
        host: info.and_then(|s| s.host.clone()),
        records: dir.records.len() as u64,
        end_reason: dir
            .end_reason
            .clone()
            .unwrap_or_else(|| "unfinished".into()),
        late_ms: info.map_or(0.0, |s| s.late_ms.iter().copied().fold(0.0, f64::max)),
        clock_offset_ms: clock::offset(dir),
        client,
        lost: (!finished)
            .then(|| lost::lost(manifest, index, &dir.records, dirs))
            .flatten(),
    }
}

impl ShardsReport {
    /// Warnings: a shard missing or unfinished (and what it lost), started late, or the
    /// bottleneck; clocks skewed.
    pub fn warnings(&self) -> Vec<Warning> {
        let mut warnings = Vec::new();
        for shard in &self.shards {
            warnings.extend(shard.warnings(self.count));
        }
        if let Some(skew) = self.clock_skew_at_least_ms.filter(|s| *s > SKEW_MS) {
            warnings.push(Warning::new(
                "shard_clock_skew",
                format!("the shards' clocks differ by at least {skew:.0} ms (measured against the target's Date headers): their common start was not common"),
                "synchronise the machines' clocks (NTP/chrony) before a sharded run",
            ));
        }
        warnings
    }
}

impl ShardSummary {
    fn warnings(&self, count: u32) -> Vec<Warning> {
        let mut warnings = Vec::new();
        let name = format!("shard {} of {count}", self.index);
        let lost = self
            .lost
            .as_ref()
            .map_or_else(String::new, |l| format!(": {}", l.describe()));
        match self.end_reason.as_str() {
            "completed" => {}
            "missing" => warnings.push(Warning::new(
                "shard_missing",
                format!("{name} is missing (no journal given){lost}; the merged figures cover only the other shards' part of the load"),
                "give every shard's output directory to goodput merge, or re-run the missing shard",
            )),
            reason => warnings.push(Warning::new(
                "shard_incomplete",
                format!("{name} did not complete ({reason}){lost}; the merged figures cover less than the planned load"),
                "find out why it stopped (killed pod, eviction, Ctrl-C) and re-run",
            )),
        }
        if self.late_ms > LATE_MS {
            warnings.push(Warning::new(
                "shard_late",
                format!("{name} started {:.1} ms after --start-at (its arrivals due by then were sent at once, in a burst)", self.late_ms),
                "set --start-at further ahead so every shard is waiting when it comes",
            ));
        }
        if let Some(reason) = self.client.as_ref().and_then(|c| c.reason.as_ref()) {
            warnings.push(Warning::new(
                "shard_bottleneck",
                format!("{name}'s client may have been the bottleneck: {reason}"),
                "use more shards (or bigger machines) so each one sends less",
            ));
        }
        warnings
    }
}
