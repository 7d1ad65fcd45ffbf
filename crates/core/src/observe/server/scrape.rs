//! Fetching `/metrics` during a run: where the metrics live (`--metrics-url`, or the target's
//! server root + `/metrics`), one bounded GET per scrape, a task that scrapes every interval
//! until told to stop and then takes a final scrape, and the `server_metrics.jsonl` journal
//! (a header line, then one line per scrape, flushed as it is taken) that `goodput report`
//! rebuilds the server figures from.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::time::Duration;

use bytes::Bytes;
use http::Uri;
use http_body_util::Full;
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use super::series::{ProblemKind, Scrape, ScrapeLog};
use crate::http::{HttpClient, Target, TargetError};
use crate::record::Exchange;

/// Largest `/metrics` body read; a larger one is abandoned (and the scrape counted failed).
pub const MAX_METRICS_BODY: usize = 16 << 20;

/// The metrics URL of a target: its server root (the API root without its `/vN`) + `/metrics`,
/// e.g. `http://host:8000/v1` → `http://host:8000/metrics`.
pub fn default_metrics_url(target: &Target) -> String {
    let root = target.api_root();
    let root = match root.rsplit_once('/') {
        Some((parent, last))
            if last.len() > 1
                && last.starts_with('v')
                && last[1..].bytes().all(|b| b.is_ascii_digit()) =>
        {
            parent
        }
        _ => root,
    };
    let scheme = if target.is_https() { "https" } else { "http" };
    format!("{scheme}://{}{root}/metrics", target.authority())
}

/// Splits a metrics URL into the server to connect to and the path to GET (`/metrics` when the
/// URL has no path).
pub fn split_metrics_url(url: &str) -> Result<(Target, String), TargetError> {
    let target = Target::parse(url)?;
    let uri: Uri = url
        .trim()
        .parse()
        .map_err(|e: http::uri::InvalidUri| TargetError::Invalid {
            url: url.to_string(),
            reason: e.to_string(),
        })?;
    let path = match uri.path_and_query().map(|p| p.as_str()) {
        None | Some("") | Some("/") => "/metrics".to_string(),
        Some(path) => path.to_string(),
    };
    Ok((target, path))
}

/// Where a server's metrics are and how to get them.
#[derive(Debug, Clone)]
pub struct MetricsEndpoint {
    client: HttpClient,
    path: String,
    url: String,
    timeout: Duration,
    time_scale: f64,
}

impl MetricsEndpoint {
    /// Scrapes `path` through `client` (its own pool: scraping must not take the benchmark's
    /// connections), each scrape bounded by `timeout`. `url` is what reports show.
    pub fn new(client: HttpClient, path: &str, url: &str, timeout: Duration) -> Self {
        MetricsEndpoint {
            client,
            path: path.to_string(),
            url: url.to_string(),
            timeout,
            time_scale: 1.0,
        }
    }

    /// Stamps scrapes in target time: real elapsed time × `time_scale` (the run's clock when
    /// the target runs faster than real time). Non-positive or non-finite scales are ignored.
    pub fn with_time_scale(mut self, time_scale: f64) -> Self {
        if time_scale.is_finite() && time_scale > 0.0 {
            self.time_scale = time_scale;
        }
        self
    }

    /// The URL, for people.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// One scrape, stamped `at_us` = when the response head arrived, relative to `start`
    /// (`None`: stamped 0, for the probe taken before the run starts).
    pub async fn scrape(&self, start: Option<Instant>) -> Scrape {
        let stamp = |at: Instant| {
            start.map_or(0, |start| {
                let real = at.saturating_duration_since(start);
                goodput_protocol::time_scale::to_target_micros(real, self.time_scale)
            })
        };
        let fetched = tokio::time::timeout(self.timeout, self.fetch()).await;
        let now = stamp(Instant::now());
        match fetched {
            Err(_) => Scrape::failed(
                now,
                ProblemKind::Unreachable,
                format!("no answer within {:?}", self.timeout),
            ),
            Ok(Err((kind, message))) => Scrape::failed(now, kind, message),
            Ok(Ok((head_at, body))) => Scrape::from_body(stamp(head_at), &body),
        }
    }

    async fn fetch(&self) -> Result<(Instant, Vec<u8>), (ProblemKind, String)> {
        let unreachable = |message: String| (ProblemKind::Unreachable, message);
        let request = http::Request::get(self.path.as_str())
            .header(http::header::ACCEPT, "text/plain")
            .body(Full::new(Bytes::new()))
            .map_err(|e| unreachable(e.to_string()))?;
        let mut exchange = Exchange::default();
        let mut response = self
            .client
            .send(request, &mut exchange)
            .await
            .map_err(|failure| unreachable(failure.message))?;
        let head_at = exchange.response_at.unwrap_or_else(Instant::now);
        let status = response.status();
        let mut body = Vec::new();
        while let Some(frame) = response.body_mut().data().await {
            let frame = frame.map_err(|e| unreachable(format!("reading the body: {e}")))?;
            if body.len() + frame.len() > MAX_METRICS_BODY {
                return Err((
                    ProblemKind::TooLarge,
                    format!("the body is larger than {} MiB", MAX_METRICS_BODY >> 20),
                ));
            }
            body.extend_from_slice(&frame);
        }
        if !status.is_success() {
            return Err(unreachable(format!("HTTP {status}")));
        }
        Ok((head_at, body))
    }
}

/// What the scraper was told, recorded as the first line of `server_metrics.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScrapeHeader {
    /// The metrics URL.
    pub metrics_url: String,
    /// Time between scrapes, ms.
    pub interval_ms: f64,
}

/// Appends scrapes to `server_metrics.jsonl`, one flushed line each.
#[derive(Debug)]
pub struct ScrapeJournal {
    out: BufWriter<File>,
}

impl ScrapeJournal {
    /// Creates the file and writes the header.
    pub fn create(path: &Path, header: &ScrapeHeader) -> io::Result<Self> {
        let mut journal = ScrapeJournal {
            out: BufWriter::new(File::create(path)?),
        };
        journal.line(header)?;
        Ok(journal)
    }

    fn line<T: Serialize>(&mut self, value: &T) -> io::Result<()> {
        serde_json::to_writer(&mut self.out, value)?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }

    /// Appends one scrape.
    pub fn append(&mut self, scrape: &Scrape) -> io::Result<()> {
        self.line(scrape)
    }
}

/// Reads `server_metrics.jsonl`; a last line cut short (a killed run) is skipped.
pub fn read_scrape_journal(path: &Path) -> io::Result<(ScrapeHeader, ScrapeLog)> {
    let mut lines = BufReader::new(File::open(path)?).lines();
    let invalid = |what: String| io::Error::new(io::ErrorKind::InvalidData, what);
    let header: ScrapeHeader = match lines.next() {
        Some(line) => serde_json::from_str(&line?)
            .map_err(|e| invalid(format!("{}: bad header line: {e}", path.display())))?,
        None => return Err(invalid(format!("{} is empty", path.display()))),
    };
    let mut log = ScrapeLog::default();
    let lines: Vec<String> = lines.collect::<io::Result<_>>()?;
    let count = lines.len();
    for (index, line) in lines.iter().enumerate() {
        match serde_json::from_str::<Scrape>(line) {
            Ok(scrape) => log.scrapes.push(scrape),
            Err(_) if index + 1 == count => {}
            Err(e) => {
                return Err(invalid(format!(
                    "{} line {}: {e}",
                    path.display(),
                    index + 2
                )));
            }
        }
    }
    Ok((header, log))
}

/// A scraper running beside a run.
#[derive(Debug)]
pub struct Scraper {
    handle: JoinHandle<ScrapeLog>,
    stop: CancellationToken,
}

impl Scraper {
    /// Starts scraping `endpoint` every `interval` on the clock that started at `start` (the
    /// run's), beginning with the scrapes already taken (`initial`, e.g. the probe), journaling
    /// each scrape when `journal` is given. A failing journal stops journaling, not scraping.
    pub fn spawn(
        endpoint: MetricsEndpoint,
        interval: Duration,
        start: Instant,
        initial: Vec<Scrape>,
        mut journal: Option<ScrapeJournal>,
    ) -> Scraper {
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        let handle = tokio::spawn(async move {
            let mut log = ScrapeLog::default();
            let mut keep = |scrape: Scrape, log: &mut ScrapeLog| {
                if let Some(writer) = journal.as_mut()
                    && writer.append(&scrape).is_err()
                {
                    journal = None;
                }
                log.scrapes.push(scrape);
            };
            for scrape in initial {
                keep(scrape, &mut log);
            }
            let mut tick = tokio::time::interval_at(start + interval, interval);
            tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stopped.cancelled() => break,
                    _ = tick.tick() => {
                        let scrape = endpoint.scrape(Some(start)).await;
                        keep(scrape, &mut log);
                    }
                }
            }
            let last = endpoint.scrape(Some(start)).await;
            keep(last, &mut log);
            log
        });
        Scraper { handle, stop }
    }

    /// Stops scraping after one final scrape and returns every scrape taken.
    pub async fn finish(self) -> ScrapeLog {
        self.stop.cancel();
        self.handle.await.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_default_url_is_the_server_root() {
        for (target, metrics) in [
            ("http://localhost:8000/v1", "http://localhost:8000/metrics"),
            ("http://localhost:8000", "http://localhost:8000/metrics"),
            (
                "https://gw.example/proxy/v1",
                "https://gw.example/proxy/metrics",
            ),
        ] {
            let target = Target::parse(target).unwrap();
            assert_eq!(default_metrics_url(&target), metrics);
        }
    }

    #[test]
    fn explicit_urls_keep_their_path() {
        let (target, path) = split_metrics_url("http://h:9000/custom/metrics?x=1").unwrap();
        assert_eq!(target.authority(), "h:9000");
        assert_eq!(path, "/custom/metrics?x=1");
        assert_eq!(split_metrics_url("http://h:9000").unwrap().1, "/metrics");
        assert!(split_metrics_url("h:9000/metrics").is_err());
    }

    #[test]
    fn the_journal_round_trips_and_tolerates_a_torn_last_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server_metrics.jsonl");
        let header = ScrapeHeader {
            metrics_url: "http://h/metrics".into(),
            interval_ms: 1000.0,
        };
        let mut journal = ScrapeJournal::create(&path, &header).unwrap();
        let scrapes = [
            Scrape::from_body(0, b"vllm:num_requests_running{a=\"x\"} 1\n"),
            Scrape::failed(5, ProblemKind::Unreachable, "refused"),
        ];
        for scrape in &scrapes {
            journal.append(scrape).unwrap();
        }
        drop(journal);
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("{\"at_us\": 9, \"samp");
        std::fs::write(&path, text).unwrap();
        let (read_header, log) = read_scrape_journal(&path).unwrap();
        assert_eq!(read_header, header);
        assert_eq!(log.scrapes, scrapes);
    }
}
