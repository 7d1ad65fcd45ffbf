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
//! Layout — by layer, from the leaves up. A module imports only modules of the layers below
//! it (`scripts/check-imports.py` fails CI on a cycle; `--layers` prints this order):
//!
//! 0. [`record`] (what one request did: [`record::Exchange`], filled while it runs, and
//!    [`record::RequestRecord`], the journal line every metric is computed from), [`shard`]
//!    (one process's part of a global schedule), [`tokens`], [`units`]: the leaves.
//! 1. [`http`] (a purpose-built HTTP/1.1 client with a pool, TLS and pluggable connectors)
//!    → record; [`report`] (the versioned report every exporter reads — the leaf contract,
//!    importing no producer) → units.
//! 2. [`backend`] (the [`backend::Backend`] seam: OpenAI chat/completions/responses, encoders,
//!    KServe v2, JSON templates) → http, record; [`profile`] (phase profiles and arrival
//!    processes) → report, units; [`export`] (a report's headline figures in the formats other
//!    tools receive: Prometheus, OpenTelemetry, MLflow, llm-d) → report, shard.
//! 3. [`workload`] (what to send: synthetic prompts, datasets, traces, sessions, images) →
//!    backend, http, record, tokens, units.
//! 4. [`metrics`] (histograms, windows, SLOs, the aggregator) → record, report, units, workload.
//! 5. [`config`] (the validated description of a run) → metrics, profile, units.
//! 6. [`schedule`] (when to send: closed loop or open-loop arrivals) → config, profile.
//! 7. [`runner`] (sends on schedule, enforces timeouts and the no-progress deadline, hands
//!    each finished record to the journal and sinks) → backend, config, metrics, record,
//!    schedule, shard, tokens, workload.
//! 8. [`methodology`] (the warnings a report carries) → config, metrics, report, runner;
//!    [`observe`] (the server's `/metrics`, monitoring, the machines, the client's overhead,
//!    live snapshots) → http, metrics, record, report, runner.
//! 9. [`analysis`] (utilisation, speculative decoding, cost, energy) → observe, report;
//!    [`decide`] (sweeps, capacity searches, calibration probes, plans, gates, comparisons)
//!    → the layers below.
//! 10. [`html`] (the report and comparison pages) → decide; [`manifest`] (`run.json`, which
//!     turns a journal back into its report) → config, decide, record, report, shard.
//! 11. [`assemble`] (steps into a report, for live runs, virtual runs and journal rebuilds) →
//!     decide, manifest, methodology, metrics, observe, …; [`merge`] (shards' journals into
//!     one run) → manifest, observe, runner, schedule, shard, ….
//! 12. [`measure`] (in-process measurement of any async call, for `goodput.measure`) → runner,
//!     assemble, ….
#![deny(missing_docs)]

pub mod analysis;
pub mod assemble;
pub mod backend;
pub mod config;
pub mod decide;
pub mod export;
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
