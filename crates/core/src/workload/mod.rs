//! Workloads: what each request asks. A workload maps a request index to a [`RequestSpec`]
//! deterministically (same seed and index, same request, byte for byte), so a schedule can
//! later be split across processes by index and still send exactly the same requests.

pub mod synthetic;

use std::collections::BTreeMap;
use std::fmt;

use crate::backend::RequestSpec;

/// A source of requests.
pub trait Workload: Send + Sync + fmt::Debug {
    /// The request at position `index` of the schedule.
    fn request(&self, index: u64) -> RequestSpec;

    /// A description for the report (kind, lengths, seed…).
    fn describe(&self) -> BTreeMap<String, serde_json::Value>;
}

/// Mixes a seed and an index into an independent 64-bit seed (SplitMix64 finaliser).
pub fn mix_seed(seed: u64, index: u64) -> u64 {
    let mut z = seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

pub use synthetic::SyntheticWorkload;
