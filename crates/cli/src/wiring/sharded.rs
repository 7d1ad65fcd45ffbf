//! A session's part of a sharded run (`--shards`): its shard, the shared start of each step —
//! step k starts at `--start-at` + k × (`--duration` + `--request-timeout`), or, in a capacity
//! search, when the shards agreed — and how a sharded capacity search judges each probe on
//! every shard's records through the shared volume ([`merged_step`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use goodput_core::config::RunConfig;
use goodput_core::manifest::RunManifest;
use goodput_core::metrics::StepAggregator;
use goodput_core::report::RunInfo;
use goodput_core::runner::RunOutcome;
use goodput_core::runner::read_journal;
use goodput_core::shard::{ShardInfo, unix_ms};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::options::run::ShardPlan;
use crate::output;
use crate::wiring::session::Session;

/// A session's part of a sharded run.
#[derive(Debug)]
pub(crate) struct ShardState {
    /// The shard and the shared start.
    pub(crate) plan: ShardPlan,
    /// How late each step started, with a shared start time (ms).
    pub(crate) late_ms: Vec<f64>,
    /// A sharded capacity search: every probe is judged on all shards' records
    /// ([`merged_step`]).
    pub(crate) coordinated: bool,
    /// The shared start of the next step, once the shards agreed on one.
    pub(crate) next_start: Option<SystemTime>,
}

impl ShardState {
    /// A session's part of the run `plan` describes.
    pub(crate) fn new(plan: ShardPlan) -> Self {
        ShardState {
            plan,
            late_ms: Vec::new(),
            coordinated: false,
            next_start: None,
        }
    }

    /// What `run.json` records about the shard (with a shared start time).
    pub(crate) fn info(&self, run: &RunInfo) -> Option<ShardInfo> {
        let at = self.plan.start_at?;
        Some(ShardInfo {
            count: self.plan.shard.count,
            index: self.plan.shard.index,
            start_at_unix_ms: unix_ms(at),
            late_ms: self.late_ms.clone(),
            host: run.client_host.as_ref().and_then(|h| h.hostname.clone()),
        })
    }
}

impl Session {
    /// A session whose steps, when sharded, are judged on every shard's records (a capacity
    /// search: each probe's load depends on the previous verdict).
    pub(crate) fn coordinated(mut self) -> Self {
        self.sharding.coordinated = self.sharding.plan.shard.is_sharded();
        self
    }

    /// The shared start of step `index`: the one the shards agreed on (capacity), else
    /// `--start-at`, then every `--duration` plus `--request-timeout` (by then every request
    /// of the step before has ended, on every shard), so the shards of a sweep start each
    /// step together. Unsharded, only the first step waits for `--start-at`.
    pub(crate) fn step_start(&self, index: u32) -> Option<SystemTime> {
        if let Some(at) = self.sharding.next_start {
            return Some(at);
        }
        let at = self.sharding.plan.start_at?;
        if index > 0 && !self.sharding.plan.shard.is_sharded() {
            return None;
        }
        let period = self.config.duration.unwrap_or_default() + self.config.request_timeout;
        Some(at + period.div_f64(self.config.time_scale) * index)
    }

    /// Notes how late a step started (with a shared start time) in `run.json`.
    pub(crate) fn note_start(&mut self, outcome: &RunOutcome) -> Result<()> {
        if let Some(late) = outcome.late_start {
            self.sharding.late_ms.push(late.as_secs_f64() * 1e3);
            self.write_manifest()?;
        }
        Ok(())
    }
}

/// Pause between looks at the peers' progress.
const POLL: Duration = Duration::from_millis(200);
/// Allowance beyond a step's end for the slowest peer to finish it.
const BARRIER_SLACK: Duration = Duration::from_secs(60);
/// Gap between the last peer finishing a probe and the next probe's shared start.
const NEXT_STEP_GAP: Duration = Duration::from_secs(1);

/// A finished step's marker in a shard's output directory.
#[derive(Debug, Serialize, Deserialize)]
struct StepDone {
    /// When the shard finished the step (its clock), Unix ms.
    ended_unix_ms: u64,
}

/// A coordinated capacity probe's step `index`, seen whole: this shard marks the step done,
/// waits until every shard of the run (the sibling directories of `--out`, on a shared
/// volume) has, and aggregates the step's records of all their journals — so every shard
/// judges the probe on the same records and picks the same next probe, which all start
/// [`NEXT_STEP_GAP`] after the last shard finished.
pub(crate) async fn merged_step(
    session: &mut Session,
    index: usize,
    config: &RunConfig,
) -> Result<StepAggregator> {
    let Some(out) = session.options.output.out.clone() else {
        bail!("--shards: give --out");
    };
    if let Some(journal) = session.journal.as_mut() {
        journal.sync().context("syncing the journal")?;
    }
    let done = StepDone {
        ended_unix_ms: unix_ms(SystemTime::now()),
    };
    let marker = out.join("steps").join(format!("{index}.done"));
    std::fs::create_dir_all(out.join("steps"))?;
    output::json::write_json(&marker, &done)?;
    let shard = session.sharding.plan.shard;
    let deadline = Instant::now() + config.request_timeout + BARRIER_SLACK;
    let peers = loop {
        let (peers, waiting) = peers_done(&out, session, index)?;
        if waiting.is_empty() {
            break peers;
        }
        if Instant::now() > deadline || session.cancel.is_cancelled() {
            bail!(
                "probe {}: shards {waiting:?} of {} did not finish it (no {}/steps/{index}.done \
                 beside {}); the capacity search cannot go on without their records",
                index + 1,
                shard.count,
                "<shard dir>",
                out.display()
            );
        }
        tokio::time::sleep(POLL).await;
    };
    let mut aggregator = session.aggregator(config);
    let mut last_end = 0;
    for dir in &peers {
        let done: StepDone = read(&dir.join("steps").join(format!("{index}.done")))?;
        last_end = last_end.max(done.ended_unix_ms);
        let journal = read_journal(&dir.join("requests.jsonl"))?;
        let step = u32::try_from(index).unwrap_or(u32::MAX);
        for record in journal.records.iter().filter(|r| r.step == step) {
            aggregator.add(record);
        }
    }
    session.sharding.next_start =
        Some(UNIX_EPOCH + Duration::from_millis(last_end) + NEXT_STEP_GAP);
    Ok(aggregator)
}

/// The run's shard directories (siblings of `out` whose `run.json` names the same run) that
/// finished step `index`, and the shard indices still missing.
fn peers_done(out: &Path, session: &Session, index: usize) -> Result<(Vec<PathBuf>, Vec<u32>)> {
    let parent = out.parent().unwrap_or(Path::new("."));
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let shard = session.sharding.plan.shard;
    let start = session.sharding.plan.start_at.map(unix_ms);
    let mut found: BTreeMap<u32, PathBuf> = BTreeMap::new();
    let entries = std::fs::read_dir(parent)
        .with_context(|| format!("reading the shards' directory {}", parent.display()))?;
    for entry in entries.flatten() {
        let dir = entry.path();
        if !dir.join("steps").join(format!("{index}.done")).exists() {
            continue;
        }
        let Ok(manifest) = read::<RunManifest>(&dir.join("run.json")) else {
            continue;
        };
        let Some(info) = manifest.shard else { continue };
        let same = info.count == shard.count
            && Some(info.start_at_unix_ms) == start
            && manifest.config.seed == session.seed;
        if same {
            found.insert(info.index, dir);
        }
    }
    let waiting = (0..shard.count)
        .filter(|k| !found.contains_key(k))
        .collect();
    Ok((found.into_values().collect(), waiting))
}

fn read<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("{} is not valid", path.display()))
}
