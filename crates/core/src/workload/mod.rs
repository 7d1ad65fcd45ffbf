//! Workloads: what each request asks. A workload maps a request index to a [`RequestSpec`]
//! deterministically (same seed and index, same request, byte for byte), so a schedule can
//! later be split across processes by index and still send exactly the same requests.
//!
//! Kinds (see `docs/workloads.md`): fixed-length synthetic prompts ([`synthetic`]); prompts
//! whose lengths follow distributions, optionally behind shared prefixes ([`generated`],
//! [`lengths`]); datasets ([`dataset`], [`prepared`]); trace replay ([`trace`], [`replay`]);
//! multi-turn sessions ([`session`]) and recorded agent sessions ([`agent_trace`]). Exact
//! lengths in any tokenizer come from [`vocabulary`] (and [`tokenize`] for the target's own `/tokenize`). Expensive work —
//! reading files, counting tokens, calibrating a tokenizer — happens before the run, never
//! in [`Workload::request`].

pub mod agent;
pub mod agent_trace;
pub mod audio_lengths;
mod csv;
pub mod dataset;
pub mod generated;
pub mod generation;
pub mod history;
pub mod image;
pub mod lengths;
pub mod mix;
pub mod prepared;
pub mod replay;
pub mod samples;
pub mod session;
pub mod source;
pub mod step;
pub mod synthetic;
pub mod tokenize;
pub mod trace;
pub mod vocabulary;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::backend::RequestSpec;

/// A source of requests.
pub trait Workload: Send + Sync + fmt::Debug {
    /// The request at position `index` of the schedule.
    fn request(&self, index: u64) -> RequestSpec;

    /// A description for the report (kind, lengths, seed…).
    fn describe(&self) -> BTreeMap<String, serde_json::Value>;

    /// The workload this one wraps when it only adds to the wrapped one's requests (images,
    /// image settings, a model mix): every method below that it does not override answers as
    /// the wrapped one does. `None` (the default): a source of its own, and they answer
    /// nothing.
    fn inner(&self) -> Option<&dyn Workload> {
        None
    }

    /// Trace replay: the send offset of every request from the run start, in index order
    /// (used by load mode `replay`). `None`: the load decides when requests go.
    fn arrival_offsets(&self) -> Option<Arc<[Duration]>> {
        self.inner().and_then(Workload::arrival_offsets)
    }

    /// Prompt tokens of request `index` the workload expects a prefix cache could serve (a
    /// shared system prompt), for `steps[].prefix_reuse`. Sessions count their history
    /// themselves; this is for single-turn requests.
    fn expected_prefix_tokens(&self, index: u64) -> Option<u64> {
        self.inner().and_then(|w| w.expected_prefix_tokens(index))
    }

    /// Vision prompts: the images request `index` adds to its user message (empty without
    /// images). Single requests already carry them in [`Workload::request`]; a session's
    /// turns get them from here (every user turn its own), and the runner journals their
    /// sizes (`images`) for the per-resolution report.
    fn images(&self, index: u64) -> Vec<image::Image> {
        self.inner().map(|w| w.images(index)).unwrap_or_default()
    }

    /// Multi-turn: the sessions to play. When `Some`, the schedule starts sessions (an
    /// arrival or a free closed-loop worker starts one) and the runner sends their turns;
    /// [`Workload::request`] is then each session's opening turn.
    fn conversations(&self) -> Option<&dyn session::Conversations> {
        self.inner().and_then(Workload::conversations)
    }

    /// Which model, adapter and SLO class request `index` is ([`mix::Mixed`]; none of them
    /// outside a mix).
    fn labels(&self, index: u64) -> mix::Labels {
        self.inner().map(|w| w.labels(index)).unwrap_or_default()
    }
}

/// Notes on single request `index`'s record what `workload` knows of it: the prefix it expects
/// reusable, the sizes of its images and its model, adapter and class (the live runner and the virtual-time client alike).
pub fn note_request(
    workload: &dyn Workload,
    index: u64,
    record: &mut crate::record::RequestRecord,
) {
    record.expected_prefix_tokens = workload.expected_prefix_tokens(index);
    record.images = workload
        .images(index)
        .iter()
        .map(|image| image.size)
        .collect();
    let labels = workload.labels(index);
    record.model = labels.model;
    record.adapter = labels.adapter;
    record.class = labels.class;
}

/// Mixes a seed and an index into an independent 64-bit seed (SplitMix64 finaliser).
pub fn mix_seed(seed: u64, index: u64) -> u64 {
    let mut z = seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

pub use agent::AgentTurns;
pub use generated::{GeneratedWorkload, SharedPrefix};
pub use lengths::LengthDistribution;
pub use replay::{ReplayOptions, TraceWorkload};
pub use session::{Conversation, Conversations, SyntheticConversations, ThinkTime, Turn};
pub use synthetic::SyntheticWorkload;
pub use vocabulary::PromptVocabulary;
