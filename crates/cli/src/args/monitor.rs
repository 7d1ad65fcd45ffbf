//! `goodput monitor` arguments and their conversion into [`MonitorOptions`] (core's
//! [`MonitorConfig`] and the URL watched).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use goodput_core::http::Target;
use goodput_core::observe::monitor::MonitorConfig;
use goodput_core::observe::server::default_metrics_url;
use goodput_core::units::parse_duration;

use crate::options::monitor::MonitorOptions;

/// Watch a live server's metrics.
#[derive(Debug, clap::Args)]
pub(crate) struct MonitorArgs {
    /// Prometheus metrics URL, e.g. http://localhost:8000/metrics.
    #[arg(long, value_name = "URL", required_unless_present = "target")]
    pub(crate) metrics_url: Option<String>,
    /// The server's base URL; its /metrics is watched (--metrics-url wins when both are given).
    #[arg(long, value_name = "URL", env = "GOODPUT_TARGET")]
    pub(crate) target: Option<String>,
    /// Time between scrapes.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub(crate) interval: Duration,
    /// Width of one row (a whole number of intervals).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub(crate) window: Duration,
    /// Stop after this long (default: until Ctrl-C).
    #[arg(long, value_parser = parse_duration)]
    pub(crate) duration: Option<Duration>,
    /// Rows the queue trend is fitted over.
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub(crate) trend_windows: usize,
    /// Append every row as a JSON line to this file.
    #[arg(long, value_name = "FILE")]
    pub(crate) jsonl: Option<PathBuf>,
    /// Print rows as JSON lines instead of the table.
    #[arg(long)]
    pub(crate) json: bool,
}

impl MonitorArgs {
    /// `goodput monitor`'s configuration.
    pub(crate) fn into_options(self) -> Result<MonitorOptions> {
        let config = self.config()?;
        let url = match (&self.metrics_url, &self.target) {
            (Some(url), _) => url.clone(),
            (None, Some(target)) => {
                default_metrics_url(&Target::parse(target).context("--target")?)
            }
            (None, None) => bail!("give --metrics-url or --target"),
        };
        Ok(MonitorOptions {
            url,
            config,
            duration: self.duration,
            jsonl: self.jsonl,
            json: self.json,
        })
    }

    /// The validated monitor settings.
    fn config(&self) -> Result<MonitorConfig> {
        if self.interval < Duration::from_millis(10) {
            bail!("--interval: at least 10ms");
        }
        if self.window < self.interval {
            bail!("--window: must be at least --interval");
        }
        if self.trend_windows < 3 {
            bail!("--trend-windows: at least 3");
        }
        Ok(MonitorConfig {
            interval: self.interval,
            window: self.window,
            trend_windows: self.trend_windows,
            ..MonitorConfig::default()
        })
    }
}
