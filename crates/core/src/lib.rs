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
//! Layout — the pipeline, in the order data flows:
//! - [`config`]: the validated description of a run (load, stop conditions, warmup, SLO, seed);
//!   [`profile`]: phase profiles (a load that changes over the run).
//! - [`workload`]: what to send (synthetic prompts of exact token length, datasets, traces,
//!   multi-turn sessions).
//! - [`schedule`]: when to send it (closed loop, or open-loop arrival processes).
//! - [`runner`]: sends on schedule, enforces timeouts and the no-progress deadline, finalizes
//!   each request into a [`record::RequestRecord`], journals it and aggregates it.
//! - [`backend`]: the [`backend::Backend`] seam and the OpenAI-compatible backend (SSE decoder).
//! - [`html`]: the self-contained HTML report and comparison page (one renderer for the
//!   command line and the Python package).
//! - [`http`]: a small purpose-built HTTP/1.1 client with a connection pool, TLS and pluggable
//!   connectors (TCP, or in-memory for tests).
//! - [`record`]: [`record::Exchange`] (filled while a request runs) and
//!   [`record::RequestRecord`] (the journal line every metric is computed from);
//!   [`manifest`]: the run manifest (`run.json`) that turns a journal back into its report.
//! - [`metrics`]: histograms, windows, SLOs, and the aggregator.
//! - [`assemble`]: steps into a report — one function for a live run and a journal rebuild.
//! - [`report`]: the versioned report structure every exporter reads — the leaf contract: every
//!   serde section type, importing no producer.
//!
//! Around the pipeline:
//! - [`observe`]: the server's `/metrics` during a run (server-side truth) or without one
//!   (monitoring), the machines involved, the client's own overhead, live snapshots for a UI.
//! - [`analysis`]: utilisation, speculative decoding, cost and energy derived from a step.
//! - [`methodology`]: the warnings a report carries when the run undermines its numbers.
//! - [`decide`]: sweeps and their knee, capacity searches, capacity planning, release gates,
//!   run comparisons and their statistics, dotted paths into reports.
//! - [`measure`]: in-process measurement of any async call (a model, a `generate` function)
//!   with the same runner, metrics and report.
//! - [`tokens`], [`units`]: token counting and unit handling at the edges.
#![deny(missing_docs)]

pub mod analysis;
pub mod assemble;
pub mod backend;
pub mod config;
pub mod decide;
pub mod html;
pub mod http;
pub mod manifest;
pub mod measure;
pub mod merge;
pub mod methodology;
pub mod metrics;
pub mod observe;
pub mod profile;
pub mod record;
pub mod report;
pub mod runner;
pub mod schedule;
pub mod shard;
pub mod tokens;
pub mod units;
pub mod workload;
