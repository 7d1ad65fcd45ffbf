//! Server-side truth: scraping a server's Prometheus `/metrics` during a run and turning the
//! scrapes into the step's `server` section.
//!
//! - [`prometheus`]: a tolerant parser of the text exposition format (never fails).
//! - [`concepts`]: the one table mapping what goodput wants to know to vLLM, SGLang, TGI,
//!   llama.cpp, simulator and DCGM metric names.
//! - [`series`]: scrapes over time; counters made monotonic across resets, interpolated at any
//!   instant; gauges combined; histograms differenced with Prometheus' quantile rule.
//! - [`scrape`]: the metrics URL, one bounded GET, the scraper task, `server_metrics.jsonl`.
//! - [`tally`]: the client's own counts the server's are checked against.
//! - [`summary`]: the step's [`ServerReport`] and the warnings about scraping.
//!
//! The section's types are the report contract's ([`crate::report::server`]), re-exported
//! here as `report`.

pub mod concepts;
#[cfg(test)]
mod disaggregation_tests;
pub mod prometheus;
pub mod replicas;
pub use crate::report::server as report;
pub mod scrape;
pub mod series;
pub mod summary;
pub mod tally;

pub use report::ServerReport;
pub use scrape::{
    MetricsEndpoint, ScrapeHeader, ScrapeJournal, Scraper, default_metrics_url,
    read_scrape_journal, split_metrics_url,
};
pub use series::{Scrape, ScrapeLog};
pub use summary::{ServerInputs, summarise};
pub use tally::ClientTally;
