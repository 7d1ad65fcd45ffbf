//! What a shard that did not complete (killed, interrupted) or was not given at all lost: in
//! open loop the global schedule says exactly which of its arrivals were never recorded; in
//! closed loop, from when its workers fell silent while the other shards went on.

use std::collections::BTreeSet;
use std::time::Duration;

use super::ShardDir;
use crate::config::{LoadSpec, RunConfig};
use crate::manifest::RunManifest;
use crate::record::RequestRecord;
pub use crate::report::shards::Lost;
use crate::schedule::open_loop_arrivals;
use crate::shard::Shard;

/// Longest schedule regenerated to count what was lost.
const MAX_SCHEDULE: usize = 50_000_000;

impl Lost {
    /// One line for a warning.
    pub fn describe(&self) -> String {
        match self.requests {
            Some(n) => format!(
                "{n} requests of its part of the schedule were never recorded, from {:.1} s on",
                self.from_secs
            ),
            None => format!(
                "it sent nothing from {:.1} s on while the other shards went on to {:.1} s",
                self.from_secs, self.others_until_secs
            ),
        }
    }
}

/// What shard `index` lost, given what it recorded (`None` for a multi-step run, whose steps
/// it may never have reached).
pub fn lost(
    manifest: &RunManifest,
    index: u32,
    recorded: &[RequestRecord],
    dirs: &[ShardDir],
) -> Option<Lost> {
    if manifest.steps.len() > 1 {
        return None;
    }
    let count = dirs.first()?.manifest.shard.as_ref()?.count;
    let shard = Shard::new(count, index).ok()?;
    let others_until_secs = dirs
        .iter()
        .flat_map(|d| &d.records)
        .map(|r| r.end_us)
        .max()
        .unwrap_or(0) as f64
        / 1e6;
    let last_end = recorded.iter().map(|r| r.end_us).max().unwrap_or(0) as f64 / 1e6;
    let config = &manifest.config;
    let Some((missing, first_offset)) = missing_arrivals(config, shard, recorded) else {
        return Some(Lost {
            requests: None,
            from_secs: last_end,
            others_until_secs,
        });
    };
    Some(Lost {
        requests: Some(missing),
        from_secs: first_offset.map_or(last_end, |o| o.as_secs_f64()),
        others_until_secs,
    })
}

/// Open loop (rate or phases): how many of `shard`'s scheduled arrivals have no record, and
/// the offset of the first; `None` for loads not scheduled from the seed alone.
fn missing_arrivals(
    config: &RunConfig,
    shard: Shard,
    recorded: &[RequestRecord],
) -> Option<(u64, Option<Duration>)> {
    if !matches!(
        config.load,
        LoadSpec::Open { .. } | LoadSpec::Profile { .. }
    ) {
        return None;
    }
    let (schedule, _) = open_loop_arrivals(&config.load, config.seed, None)?;
    let seen: BTreeSet<u64> = recorded.iter().map(|r| r.index).collect();
    let (mut missing, mut first) = (0, None);
    for (index, offset) in (0u64..).zip(schedule).take(MAX_SCHEDULE) {
        let admitted = config.admits(index, offset);
        if !admitted {
            break;
        }
        if shard.owns(index) && !seen.contains(&index) {
            missing += 1;
            first.get_or_insert(offset);
        }
    }
    Some((missing, first))
}
