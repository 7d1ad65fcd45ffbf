//! Sharded runs: one global schedule split across N processes (N machines, e.g. the pods of a
//! Kubernetes Indexed Job), each taking a deterministic part of it, all starting at one wall
//! clock time, so their journals merge into exactly the run one process would have made.
//!
//! * Open loop (rate, phases, trace replay): request `i` of the global schedule belongs to
//!   shard `i mod N`. Each shard computes the whole schedule from the seed and sends only its
//!   own arrivals, at their global offsets, with their global index (so the workload builds the
//!   same request for index `i` whichever process sends it): the union of the shards' arrivals
//!   *is* the single-process schedule.
//! * Closed loop: the concurrency is split (shard `k` gets `⌊C/N⌋`, plus one when
//!   `k < C mod N`); each shard numbers its requests `k, k + N, k + 2N, …`, so no index is
//!   sent twice, and with `--requests M` the shards together send exactly `0..M`.
//! * Sessions (multi-turn): session `s` belongs to shard `s mod N` (open loop) or is numbered
//!   `k + jN` (closed loop); request indices are strided as in closed loop.
//! * A client-side cap (`--max-concurrency`) is split like a closed-loop concurrency.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// Which part of the global schedule this process sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// Shards in the run (N ≥ 1).
    pub count: u32,
    /// This shard, `0..count`.
    pub index: u32,
}

/// A shard specification that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    /// `--shards 0`.
    #[error("--shards: must be at least 1")]
    NoShards,
    /// The index is not below the count.
    #[error("--shard-index {index}: must be below --shards {count} (0-based)")]
    IndexOutOfRange {
        /// The index given.
        index: u32,
        /// The shard count.
        count: u32,
    },
    /// A concurrency (or client cap) smaller than the shard count leaves a shard idle.
    #[error("{flag} {value}: must be at least --shards {count} (every shard needs a worker)")]
    TooFewWorkers {
        /// The flag.
        flag: &'static str,
        /// Its value.
        value: u32,
        /// The shard count.
        count: u32,
    },
    /// `--start-at` could not be read.
    #[error(
        "--start-at {0}: expected an RFC 3339 UTC time (2026-12-01T17:00:00Z) or Unix seconds (1796230800)"
    )]
    BadStartTime(String),
}

impl Default for Shard {
    fn default() -> Self {
        Shard::SINGLE
    }
}

impl Shard {
    /// The whole schedule in one process.
    pub const SINGLE: Shard = Shard { count: 1, index: 0 };

    /// Shard `index` of `count`.
    pub fn new(count: u32, index: u32) -> Result<Self, ShardError> {
        if count == 0 {
            return Err(ShardError::NoShards);
        }
        if index >= count {
            return Err(ShardError::IndexOutOfRange { index, count });
        }
        Ok(Shard { count, index })
    }

    /// Whether this is one shard of several.
    pub fn is_sharded(&self) -> bool {
        self.count > 1
    }

    /// Whether global schedule position `index` (request or session) is this shard's.
    pub fn owns(&self, index: u64) -> bool {
        index % u64::from(self.count) == u64::from(self.index)
    }

    /// The global index of this shard's `local`-th request (or session) when shards number
    /// their own (closed loop, sessions): `index + local × count`.
    pub fn global_index(&self, local: u64) -> u64 {
        local
            .saturating_mul(u64::from(self.count))
            .saturating_add(u64::from(self.index))
    }

    /// This shard's part of `total` workers: `⌊total/N⌋`, plus one for the first
    /// `total mod N` shards, so the parts add up to `total`.
    pub fn split(&self, total: u32) -> u32 {
        total / self.count + u32::from(self.index < total % self.count)
    }

    /// Checks that `flag`'s `value` workers leave none of the shards without one.
    pub fn check_split(&self, flag: &'static str, value: u32) -> Result<(), ShardError> {
        if value < self.count {
            return Err(ShardError::TooFewWorkers {
                flag,
                value,
                count: self.count,
            });
        }
        Ok(())
    }
}

/// What a shard records about itself in `run.json` (and what `goodput merge` checks).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShardInfo {
    /// Shards in the run.
    pub count: u32,
    /// This shard.
    pub index: u32,
    /// The agreed start, Unix milliseconds (all shards' schedules count from it).
    pub start_at_unix_ms: u64,
    /// How late this shard began each step it ran (by its own clock, ms; 0 when it was
    /// waiting at the step's start time), in step order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub late_ms: Vec<f64>,
    /// The host the shard ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// Parses `--start-at`: RFC 3339 in UTC (`2026-12-01T17:00:00Z`, fractional seconds allowed)
/// or Unix seconds (`1796230800`, `1796230800.5`).
pub fn parse_start_at(text: &str) -> Result<SystemTime, ShardError> {
    let bad = || ShardError::BadStartTime(text.to_string());
    let trimmed = text.trim();
    if let Ok(secs) = trimmed.trim_start_matches('@').parse::<f64>() {
        if !(secs.is_finite() && secs >= 0.0) {
            return Err(bad());
        }
        return Ok(UNIX_EPOCH + Duration::from_secs_f64(secs));
    }
    parse_rfc3339_utc(trimmed).ok_or_else(bad)
}

/// An RFC 3339 time in UTC (`Z` or `+00:00`, `T`, `t` or a space between date and time, any
/// fraction of a second); `None` in any other form.
pub fn parse_rfc3339_utc(text: &str) -> Option<SystemTime> {
    let text = text
        .strip_suffix('Z')
        .or_else(|| text.strip_suffix("+00:00"))?;
    let (date, time) = text.split_once(['T', 't', ' '])?;
    let mut date = date.splitn(3, '-').map(str::parse::<i64>);
    let (year, month, day) = (date.next()?.ok()?, date.next()?.ok()?, date.next()?.ok()?);
    let (hms, fraction) = time.split_once('.').unwrap_or((time, ""));
    let mut hms = hms.splitn(3, ':').map(str::parse::<i64>);
    let (hour, minute, second) = (hms.next()?.ok()?, hms.next()?.ok()?, hms.next()?.ok()?);
    let valid = (1..=12).contains(&month)
        && (1..=31).contains(&day)
        && (0..24).contains(&hour)
        && (0..60).contains(&minute)
        && (0..=60).contains(&second);
    if !valid || (!fraction.is_empty() && !fraction.bytes().all(|b| b.is_ascii_digit())) {
        return None;
    }
    let nanos = if fraction.is_empty() {
        0
    } else {
        format!("{fraction:0<9}").get(..9)?.parse::<u32>().ok()?
    };
    let days = crate::units::days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3_600 + minute * 60 + second;
    let secs = u64::try_from(secs).ok()?;
    Some(UNIX_EPOCH + Duration::new(secs, nanos))
}

/// Milliseconds since the Unix epoch.
pub fn unix_ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn every_index_has_exactly_one_owner() {
        let shards: Vec<Shard> = (0..4).map(|k| Shard::new(4, k).unwrap()).collect();
        for index in 0..1000u64 {
            assert_eq!(shards.iter().filter(|s| s.owns(index)).count(), 1);
        }
        let mut strided: Vec<u64> = shards
            .iter()
            .flat_map(|s| (0..25).map(|local| s.global_index(local)))
            .collect();
        strided.sort_unstable();
        assert_eq!(strided, (0..100).collect::<Vec<_>>());
    }

    #[test]
    fn splits_add_up_to_the_total() {
        for total in 4..40 {
            let parts: Vec<u32> = (0..4)
                .map(|k| Shard::new(4, k).unwrap().split(total))
                .collect();
            assert_eq!(parts.iter().sum::<u32>(), total);
            assert!(parts.iter().max().unwrap() - parts.iter().min().unwrap() <= 1);
        }
        let shard = Shard::new(4, 3).unwrap();
        assert!(shard.check_split("--concurrency", 3).is_err());
        assert!(shard.check_split("--concurrency", 4).is_ok());
    }

    #[test]
    fn bad_shards_are_refused() {
        assert_eq!(Shard::new(0, 0), Err(ShardError::NoShards));
        assert!(matches!(
            Shard::new(4, 4),
            Err(ShardError::IndexOutOfRange { .. })
        ));
    }

    #[test]
    fn start_times_parse_in_both_forms() {
        let at = parse_start_at("2026-12-01T17:00:00Z").unwrap();
        assert_eq!(unix_ms(at), 1_796_144_400_000);
        assert_eq!(parse_start_at("1796144400").unwrap(), at);
        let fraction = parse_start_at("2026-12-01T17:00:00.25Z").unwrap();
        assert_eq!(unix_ms(fraction), 1_796_144_400_250);
        assert_eq!(unix_ms(parse_start_at("1970-01-01T00:00:00Z").unwrap()), 0);
        assert_eq!(
            unix_ms(parse_start_at("2000-03-01T00:00:00+00:00").unwrap()),
            951_868_800_000
        );
        for bad in [
            "tomorrow",
            "2026-13-01T00:00:00Z",
            "2026-12-01T17:00:00",
            "-5",
        ] {
            assert!(parse_start_at(bad).is_err(), "{bad}");
        }
    }
}
