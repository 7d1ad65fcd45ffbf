//! The `client` section: the client's own overhead and whether it may have been the
//! bottleneck. Filled by [`crate::observe::overhead`].

use serde::{Deserialize, Serialize};

use super::LatencyStats;

/// The client's own overhead during a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientReport {
    /// `sent − dequeued` of every measured request that was sent: the client's own delay
    /// between a request being due (and allowed by any concurrency cap) and its hand-over to
    /// a connection (connecting included).
    pub dispatch_lag_ms: LatencyStats,
    /// Per measured request, the longest its answer's bytes waited in the socket, arrived but
    /// unread while the client was busy (`read_late_us`): how far behind the client read.
    /// Chunk times are the kernel's arrival times, so this lag is not in TTFT or ITL; large
    /// values mean the client was busy, and socket buffers that fill would slow the server's
    /// sending. `null` without kernel receive timestamps (not Linux, the in-process simulator).
    #[serde(default)]
    pub read_late_ms: Option<LatencyStats>,
    /// Response chunks (SSE events with tokens, or whole bodies) the client received, warm-up
    /// included.
    #[serde(default)]
    pub chunks_received: u64,
    /// `cpu_secs` per 1,000 received chunks, in ms: the client's cost per unit of streamed
    /// work (`null` without a CPU figure or chunks; includes the embedded simulator's CPU when
    /// `includes_simulator`).
    #[serde(default)]
    pub cpu_ms_per_1000_chunks: Option<f64>,
    /// CPU time (user + system) the goodput process used during the run, seconds; `null`
    /// when not measurable (a report rebuilt from the journal, or not Linux).
    pub cpu_secs: Option<f64>,
    /// Wall-clock length of the run as measured for `cpu_secs`, seconds.
    pub wall_secs: Option<f64>,
    /// Cores available to the process.
    pub cores: u32,
    /// `cpu_secs ÷ (wall_secs × cores)`: 1 means every core was busy all the time.
    pub cpu_utilization: Option<f64>,
    /// Whether the process also ran the embedded simulator (whose CPU use is then included).
    pub includes_simulator: bool,
    /// Dispatch lag p99 above which the client is judged the bottleneck, ms.
    pub lag_threshold_ms: f64,
    /// `cpu_utilization` at or above which the CPU counts as saturated.
    pub cpu_threshold: f64,
    /// Whether the client may have been the bottleneck.
    pub bottleneck: bool,
    /// Why, when it was.
    pub reason: Option<String>,
    /// `false` when the client may have been the bottleneck: the figures may describe goodput
    /// rather than the target.
    pub trustworthy: bool,
}
