//! The run's headline figures pushed to a metrics receiver: `--otlp URL`, an OpenTelemetry
//! collector (OTLP/HTTP JSON, `goodput_core::export::otlp`); `--push-gateway URL`, a
//! Prometheus Pushgateway in the text exposition format, under `/metrics/job/goodput/run_id@base64/<run id>` (the mapping is
//! `goodput_core::export::prometheus`). PUT replaces the run's group, so pushing a report
//! again (`goodput report --push-gateway`) leaves one copy.

use anyhow::{Context, Result};
use goodput_core::export::{otlp, prometheus};
use goodput_core::report::Report;
use http::Method;

use super::send::Receiver;

/// The content type of the text exposition format.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Sends `report`'s figures to the OpenTelemetry collector at `url` (POST `/v1/metrics`);
/// returns the URL posted to.
pub(crate) fn otlp(url: &str, report: &Report) -> Result<String> {
    let receiver = Receiver::parse("--otlp", url)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    let body = serde_json::to_vec(&otlp::export_request(report, now))
        .context("serializing the OTLP request")?;
    receiver.send(Method::POST, "/v1/metrics", "application/json", body)?;
    Ok(format!("{}/v1/metrics", url.trim().trim_end_matches('/')))
}

/// Pushes `report`'s figures to the Pushgateway at `url`; returns the URL of the group.
pub(crate) fn push(url: &str, report: &Report) -> Result<String> {
    let receiver = Receiver::parse("--push-gateway", url)?;
    let path = prometheus::grouping_path(report);
    let body = prometheus::exposition(report).into_bytes();
    receiver.send(Method::PUT, &path, TEXT_FORMAT, body)?;
    Ok(format!("{}{path}", url.trim().trim_end_matches('/')))
}
