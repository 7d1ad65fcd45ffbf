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
#![deny(missing_docs)]

pub mod backend;
pub mod config;
pub mod http;
pub mod manifest;
pub mod metrics;
pub mod overhead;
pub mod record;
pub mod report;
pub mod runner;
pub mod schedule;
pub mod tokens;
pub mod units;
pub mod warnings;
pub mod workload;
