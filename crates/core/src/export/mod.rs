//! Mappings of a finished [`Report`](crate::report::Report) into the formats other tools
//! receive: the headline figures of each step ([`figures`]), the Prometheus text exposition a
//! Pushgateway takes ([`prometheus`]), each step as an llm-d benchmark report ([`llmd`]), the bodies of MLflow's tracking API
//! ([`mlflow`]), an OpenTelemetry metrics export ([`otlp`]). Pure functions of the report: the sending is the
//! binary's.

pub mod figures;
pub mod llmd;
pub mod mlflow;
pub mod otlp;
pub mod prometheus;

pub use figures::{Figure, Unit, headline, run_id};
