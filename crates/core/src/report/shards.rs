//! The `shards` section of a merged report (`goodput merge`): each shard's end, lateness,
//! clock offset, client overhead and what it lost. Filled by [`crate::merge`].

use serde::{Deserialize, Serialize};

use super::client::ClientReport;

/// What the merge knows about one shard.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardSummary {
    /// The shard's index.
    pub index: u32,
    /// Where it was read from (`null`: missing).
    pub source: Option<String>,
    /// Its host.
    pub host: Option<String>,
    /// Records in its journal.
    pub records: u64,
    /// How its run ended: `completed`, `interrupted`, …, `unfinished` (no report: killed),
    /// or `missing` (not given).
    pub end_reason: String,
    /// How late it began its latest-starting step, ms (by its own clock).
    pub late_ms: f64,
    /// Its clock against the target's (`Date` headers), when measurable.
    pub clock_offset_ms: Option<ClockOffset>,
    /// Its client overhead: from its report, or (unfinished) from its records.
    pub client: Option<ClientReport>,
    /// What an unfinished or missing shard did not send.
    pub lost: Option<Lost>,
}

/// The shards section of a merged report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardsReport {
    /// Shards in the run.
    pub count: u32,
    /// The agreed start, RFC 3339.
    pub start_at: String,
    /// Every shard, given or missing, by index.
    pub shards: Vec<ShardSummary>,
    /// Indices of the shards not given.
    pub missing: Vec<u32>,
    /// Largest difference between two shards' clock offset estimates, ms (when at least two
    /// were measurable).
    pub clock_skew_ms: Option<f64>,
    /// The part of that skew the offsets' intervals prove, ms.
    pub clock_skew_at_least_ms: Option<f64>,
}

/// A shard's clock offset against the target's clock, ms (positive: the shard's clock is
/// ahead).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClockOffset {
    /// The middle of the interval.
    pub estimate_ms: f64,
    /// The offset is above this.
    pub low_ms: f64,
    /// The offset is at most this.
    pub high_ms: f64,
    /// Responses with a `Date` header that bounded it.
    pub samples: u64,
}

/// What a shard did not send.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lost {
    /// Requests of its part of the schedule that were never recorded (open loop: exact;
    /// `null` in closed loop, where the count depends on how fast the server answered).
    pub requests: Option<u64>,
    /// Target time from the run start at which its losses began, seconds.
    pub from_secs: f64,
    /// Target time until which the other shards went on, seconds.
    pub others_until_secs: f64,
}
