//! goodput's measurement engine. It knows nothing of command lines, terminals or HTTP servers;
//! data flows one way:
//!
//! ```text
//! workload ─► schedule ─► runner ─► backend ─► RequestRecord ─► metrics ─► report
//!                            │                      │
//!                        activity,              journal (requests.jsonl)
//!                        cancellation
//! ```
//!
//! Layout:
//! - [`workload`]: what to send (synthetic prompts of exact token length, later datasets).
//! - [`schedule`]: when to send it (closed loop, or open-loop arrival processes).
//! - [`runner`]: sends on schedule, enforces timeouts and the no-progress deadline, finalizes
//!   each request into a [`record::RequestRecord`], journals it and aggregates it.
//! - [`backend`]: the [`backend::Backend`] seam and the OpenAI-compatible backend (SSE decoder).
//! - [`http`]: a small HTTP/1.1 client over hyper with a connection pool, TLS and pluggable
//!   connectors (TCP, or in-memory for tests).
//! - [`record`]: [`record::Exchange`] (filled while a request runs) and
//!   [`record::RequestRecord`] (the journal line every metric is computed from).
//! - [`metrics`]: histograms, windows, SLOs, and the aggregator.
//! - [`report`]: the versioned report structure every exporter reads.
//! - [`overhead`]: the client's own overhead (dispatch lag, CPU) and whether it was the
//!   bottleneck.
//! - [`tokens`], [`units`]: token counting and unit handling at the edges.
//! - [`report_path`], [`gate`], [`compare`], [`significance`]: reading figures out of reports,
//!   release gates, run comparisons and the statistics behind them.
//! - [`environment`], [`checks`], [`live`]: run metadata (client host, server identity),
//!   run-level methodology checks, and live snapshots for a UI.
//! - [`server`]: scraping the server's Prometheus metrics during a run (server-side truth).
//! - [`analysis`]: utilisation, speculative decoding, cost and energy derived from a step.
//! - [`plan`]: how many devices a demand needs (capacity planning arithmetic).
//! - [`monitor`]: watching a live server's metrics window by window.
//! - [`measure`]: in-process measurement of any async call (a model, a `generate` function)
//!   with the same runner, metrics and report.
#![deny(missing_docs)]

pub mod analysis;
pub mod backend;
pub mod capacity;
pub mod checks;
pub mod compare;
pub mod config;
pub mod environment;
pub mod gate;
pub mod http;
pub mod live;
pub mod manifest;
pub mod measure;
pub mod merge;
pub mod metrics;
pub mod monitor;
pub mod overhead;
pub mod plan;
pub mod profile;
pub mod record;
pub mod report;
pub mod report_path;
pub mod runner;
pub mod schedule;
pub mod server;
pub mod shard;
pub mod significance;
pub mod sweep;
pub mod tokens;
pub mod units;
pub mod warnings;
pub mod workload;
