//! Metrics: mergeable histograms, per-window time series, SLO evaluation, and the aggregator
//! that folds request records into a step report. Every definition is in `docs/metrics.md`.

pub mod aggregate;
pub mod audio;
pub mod buckets;
pub mod channels;
pub mod dispersion;
mod failure_examples;
pub mod flow;
pub mod histogram;
pub mod lives;
pub mod quantiles;
pub mod recovery;
pub mod sessions;
pub mod slo;
pub mod stability;
pub mod timeline;
pub mod trend;
pub mod windows;

pub use aggregate::StepAggregator;
pub use buckets::LengthBuckets;
pub use histogram::{CountHistogram, LatencyHistogram};
pub use slo::Slo;
