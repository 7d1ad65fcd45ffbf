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
//! - [`backend`]: the [`backend::Backend`] seam and the OpenAI-compatible backend (SSE decoder).
//! - [`http`]: a small HTTP/1.1 client over hyper with a connection pool, TLS and pluggable
//!   connectors (TCP, or in-memory for tests).
//! - [`record`]: [`record::Exchange`] (filled while a request runs) and
//!   [`record::RequestRecord`] (the journal line every metric is computed from).
#![deny(missing_docs)]

pub mod backend;
pub mod http;
pub mod record;
