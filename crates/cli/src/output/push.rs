//! `--push-gateway URL`: the run's headline figures PUT to a Prometheus Pushgateway in the
//! text exposition format, under `/metrics/job/goodput/run_id@base64/<run id>` (the mapping is
//! `goodput_core::export::prometheus`). PUT replaces the run's group, so pushing a report
//! again (`goodput report --push-gateway`) leaves one copy.

use anyhow::Result;
use goodput_core::export::prometheus;
use goodput_core::report::Report;
use http::Method;

use super::send::Receiver;

/// The content type of the text exposition format.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Pushes `report`'s figures to the Pushgateway at `url`; returns the URL of the group.
pub(crate) fn push(url: &str, report: &Report) -> Result<String> {
    let receiver = Receiver::parse("--push-gateway", url)?;
    let path = prometheus::grouping_path(report);
    let body = prometheus::exposition(report).into_bytes();
    receiver.send(Method::PUT, &path, TEXT_FORMAT, body)?;
    Ok(format!("{}{path}", url.trim().trim_end_matches('/')))
}
