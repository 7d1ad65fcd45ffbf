//! Watching a live server through its `/metrics`, window by window: arrival vs completion
//! rate (arrivals = completions + change of requests in the system), the queue and its trend,
//! KV usage, tokens per second and input/output length per request (from the token counters)
//! with their drift from the first windows — and flags for a growing queue, a sudden
//! throughput drop and a length drift. Definitions: `docs/metrics.md`, "Monitoring".

use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::time::{Instant, MissedTickBehavior};
use tokio_util::sync::CancellationToken;

use crate::observe::server::concepts::Concept;
use crate::observe::server::{MetricsEndpoint, Scrape, ScrapeLog};

/// How to watch.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MonitorConfig {
    /// Time between scrapes.
    pub interval: Duration,
    /// Width of a row (a whole number of intervals).
    pub window: Duration,
    /// Rows the queue trend is fitted over.
    pub trend_windows: usize,
    /// A window whose token rate falls below `1 − drop_fraction` of the recent median, with
    /// requests still in the system, is a throughput drop.
    pub drop_fraction: f64,
    /// Relative change of the mean input or output length from the baseline that is a drift.
    pub drift_threshold: f64,
}

impl Default for MonitorConfig {
    fn default() -> Self {
        MonitorConfig {
            interval: Duration::from_secs(1),
            window: Duration::from_secs(10),
            trend_windows: 4,
            drop_fraction: 0.5,
            drift_threshold: 0.3,
        }
    }
}

/// Flag: the number of requests in the system grows and arrivals outpace completions.
pub const FLAG_QUEUE_GROWING: &str = "queue_growing";
/// Flag: the token rate fell suddenly while requests were waiting or running.
pub const FLAG_THROUGHPUT_DROP: &str = "throughput_drop";
/// Flag: the mean input or output length moved away from the first windows'.
pub const FLAG_LENGTH_DRIFT: &str = "length_drift";

/// One window of the monitor; one line of its JSONL output.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct MonitorRow {
    /// Window start, seconds since the monitor started.
    pub start_secs: f64,
    /// Window end.
    pub end_secs: f64,
    /// Scrapes that answered in the window.
    pub scrapes: u64,
    /// Scrapes that failed.
    pub failed_scrapes: u64,
    /// Requests arriving per second: completions plus the change of requests in the system.
    pub arrivals_per_sec: Option<f64>,
    /// Requests finishing per second.
    pub completions_per_sec: Option<f64>,
    /// Requests finished in the window.
    pub finished: Option<f64>,
    /// Mean running requests.
    pub running: Option<f64>,
    /// Mean waiting requests.
    pub waiting: Option<f64>,
    /// Running + waiting at the window's end.
    pub in_system: Option<f64>,
    /// Least-squares growth of `in_system` over the last windows, requests per second.
    pub queue_growth_per_sec: Option<f64>,
    /// Mean KV cache usage, 0–1.
    pub kv_cache_usage: Option<f64>,
    /// Tokens generated per second.
    pub generation_tokens_per_sec: Option<f64>,
    /// Prompt tokens per finished request.
    pub input_tokens_per_request: Option<f64>,
    /// Generated tokens per finished request.
    pub output_tokens_per_request: Option<f64>,
    /// Input length relative to the baseline, minus 1.
    pub input_drift: Option<f64>,
    /// Output length relative to the baseline, minus 1.
    pub output_drift: Option<f64>,
    /// Raised flags.
    pub flags: Vec<String>,
}

/// Finished requests the first windows must add up to before their mean lengths become the
/// drift baseline.
const BASELINE_MIN_REQUESTS: f64 = 20.0;
/// Finished requests a window needs for its lengths to be compared with the baseline.
const DRIFT_MIN_REQUESTS: f64 = 5.0;

/// Folds scrapes into rows.
#[derive(Debug, Clone)]
pub struct Monitor {
    config: MonitorConfig,
    current: ScrapeLog,
    window_start_us: u64,
    rows: Vec<MonitorRow>,
    /// Finished requests, input tokens and output tokens of the first windows.
    baseline_sums: (f64, f64, f64),
    baseline: Option<(f64, f64)>,
}

impl Monitor {
    /// An empty monitor.
    pub fn new(config: MonitorConfig) -> Self {
        Monitor {
            config,
            current: ScrapeLog::default(),
            window_start_us: 0,
            rows: Vec::new(),
            baseline_sums: (0.0, 0.0, 0.0),
            baseline: None,
        }
    }

    /// Rows so far.
    pub fn rows(&self) -> &[MonitorRow] {
        &self.rows
    }

    /// Adds a scrape to the current window.
    pub fn push(&mut self, scrape: Scrape) {
        self.current.scrapes.push(scrape);
    }

    /// Closes the current window at `end_us` and returns its row; the window's last usable
    /// scrape opens the next one.
    pub fn close_window(&mut self, end_us: u64) -> MonitorRow {
        let mut row = self.measure(end_us);
        self.judge(&mut row);
        self.rows.push(row.clone());
        let carried = self
            .current
            .scrapes
            .iter()
            .rev()
            .find(|s| s.is_usable())
            .cloned();
        self.current.scrapes = carried.into_iter().collect();
        self.window_start_us = end_us;
        row
    }

    fn measure(&self, end_us: u64) -> MonitorRow {
        let log = &self.current;
        let new_scrapes: Vec<&Scrape> = log
            .scrapes
            .iter()
            .filter(|s| s.at_us > self.window_start_us || self.rows.is_empty())
            .collect();
        let usable: Vec<u64> = log
            .scrapes
            .iter()
            .filter(|s| s.is_usable())
            .map(|s| s.at_us)
            .collect();
        let span_secs = match (usable.first(), usable.last()) {
            (Some(first), Some(last)) if last > first => Some((last - first) as f64 / 1e6),
            _ => None,
        };
        let total = |concept| log.counter(concept).map(|series| series.total());
        let per_sec = |n: Option<f64>| n.zip(span_secs).map(|(n, secs)| n / secs);
        let in_system: Vec<(u64, f64)> = sum_gauges(log, Concept::Running, Concept::Waiting);
        let finished = total(Concept::RequestsFinished);
        let change = match (in_system.first(), in_system.last()) {
            (Some(first), Some(last)) if in_system.len() >= 2 => Some(last.1 - first.1),
            _ => None,
        };
        // Mean length per finished request: the server's length histograms when it has them
        // (exact), else token counters ÷ finished requests (tokens counted as generated).
        let per_request = |histogram: Concept, counter: Concept| match log.histogram(histogram) {
            Some(h) => {
                let count = h.count.total();
                (count > 0.0).then(|| h.sum.total() / count)
            }
            None => total(counter)
                .zip(finished)
                .and_then(|(t, n)| (n > 0.0).then_some(t / n)),
        };
        let mean = |concept| mean_after(log, concept, self.window_start_us, self.rows.is_empty());
        MonitorRow {
            start_secs: self.window_start_us as f64 / 1e6,
            end_secs: end_us as f64 / 1e6,
            scrapes: new_scrapes.iter().filter(|s| s.is_usable()).count() as u64,
            failed_scrapes: new_scrapes.iter().filter(|s| !s.is_usable()).count() as u64,
            arrivals_per_sec: per_sec(finished.zip(change).map(|(n, c)| (n + c).max(0.0))),
            completions_per_sec: per_sec(finished),
            finished,
            running: mean(Concept::Running),
            waiting: mean(Concept::Waiting),
            in_system: in_system.last().map(|(_, v)| *v),
            kv_cache_usage: mean(Concept::KvCacheUsage),
            generation_tokens_per_sec: per_sec(total(Concept::GenerationTokens)),
            input_tokens_per_request: per_request(Concept::PromptLength, Concept::PromptTokens),
            output_tokens_per_request: per_request(
                Concept::OutputLength,
                Concept::GenerationTokens,
            ),
            ..MonitorRow::default()
        }
    }

    fn judge(&mut self, row: &mut MonitorRow) {
        let finished = row.finished.unwrap_or(0.0);
        if let Some((input, output)) = self.baseline {
            if finished >= DRIFT_MIN_REQUESTS {
                row.input_drift = row.input_tokens_per_request.map(|v| v / input - 1.0);
                row.output_drift = row.output_tokens_per_request.map(|v| v / output - 1.0);
            }
        } else if let (Some(input), Some(output)) =
            (row.input_tokens_per_request, row.output_tokens_per_request)
        {
            let sums = &mut self.baseline_sums;
            *sums = (
                sums.0 + finished,
                sums.1 + input * finished,
                sums.2 + output * finished,
            );
            if sums.0 >= BASELINE_MIN_REQUESTS {
                self.baseline = Some((sums.1 / sums.0, sums.2 / sums.0));
            }
        }
        let drifted = [row.input_drift, row.output_drift]
            .iter()
            .flatten()
            .any(|d| d.abs() > self.config.drift_threshold);
        row.queue_growth_per_sec = self.queue_growth(row);
        if self.queue_growing(row) {
            row.flags.push(FLAG_QUEUE_GROWING.into());
        }
        if self.throughput_dropped(row) {
            row.flags.push(FLAG_THROUGHPUT_DROP.into());
        }
        if drifted {
            row.flags.push(FLAG_LENGTH_DRIFT.into());
        }
    }

    /// Least-squares slope of `in_system` at the window ends over the last windows.
    fn queue_growth(&self, row: &MonitorRow) -> Option<f64> {
        let keep = self.config.trend_windows.max(2);
        let history = self.rows.iter().chain(std::iter::once(row));
        let points: Vec<(f64, f64)> = history
            .filter_map(|r| r.in_system.map(|q| (r.end_secs, q)))
            .collect();
        let points = &points[points.len().saturating_sub(keep)..];
        if points.len() < 3 {
            return None;
        }
        let n = points.len() as f64;
        let mean_t = points.iter().map(|p| p.0).sum::<f64>() / n;
        let mean_q = points.iter().map(|p| p.1).sum::<f64>() / n;
        let sxx: f64 = points.iter().map(|p| (p.0 - mean_t).powi(2)).sum();
        let sxy: f64 = points.iter().map(|p| (p.0 - mean_t) * (p.1 - mean_q)).sum();
        (sxx > 0.0).then(|| sxy / sxx)
    }

    fn queue_growing(&self, row: &MonitorRow) -> bool {
        let (Some(slope), Some(arrivals), Some(completions)) = (
            row.queue_growth_per_sec,
            row.arrivals_per_sec,
            row.completions_per_sec,
        ) else {
            return false;
        };
        let keep = self.config.trend_windows.max(2).min(self.rows.len() + 1);
        let span = row.end_secs
            - self.rows[self.rows.len() + 1 - keep..]
                .first()
                .map_or(row.start_secs, |r| r.end_secs);
        let recent: Vec<f64> = self.rows[self.rows.len() + 1 - keep..]
            .iter()
            .chain(std::iter::once(row))
            .filter_map(|r| r.in_system)
            .collect();
        let mean = recent.iter().sum::<f64>() / recent.len().max(1) as f64;
        slope * span > (0.1 * mean).max(2.0) && arrivals > 1.05 * completions
    }

    fn throughput_dropped(&self, row: &MonitorRow) -> bool {
        let Some(rate) = row.generation_tokens_per_sec else {
            return false;
        };
        let mut previous: Vec<f64> = self
            .rows
            .iter()
            .rev()
            .take(5)
            .filter_map(|r| r.generation_tokens_per_sec)
            .collect();
        if previous.len() < 2 {
            return false;
        }
        previous.sort_by(f64::total_cmp);
        let median = previous[previous.len() / 2];
        median > 0.0
            && rate < (1.0 - self.config.drop_fraction) * median
            && row.in_system.unwrap_or(0.0) > 0.0
    }
}

/// `a + b` per scrape exposing both.
fn sum_gauges(log: &ScrapeLog, a: Concept, b: Concept) -> Vec<(u64, f64)> {
    let second = log.gauge(b);
    log.gauge(a)
        .into_iter()
        .filter_map(|(at, x)| {
            let y = second.iter().find(|(t, _)| *t == at)?.1;
            Some((at, x + y))
        })
        .collect()
}

/// Mean of a gauge over the window's own scrapes (the carried-over first one excluded, except
/// in the first window).
fn mean_after(log: &ScrapeLog, concept: Concept, start_us: u64, first_window: bool) -> Option<f64> {
    let values: Vec<f64> = log
        .gauge(concept)
        .into_iter()
        .filter(|(at, _)| first_window || *at > start_us)
        .map(|(_, v)| v)
        .collect();
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// Scrapes `endpoint` every interval, closing a row every window, until `duration` has passed
/// (the last, possibly shorter, window is closed too) or `cancel` fires; `on_row` sees each row
/// as it closes.
pub async fn watch(
    endpoint: &MetricsEndpoint,
    config: &MonitorConfig,
    duration: Option<Duration>,
    cancel: CancellationToken,
    mut on_row: impl FnMut(&MonitorRow),
) -> Vec<MonitorRow> {
    let mut monitor = Monitor::new(*config);
    let start = Instant::now();
    let per_window = (config.window.as_secs_f64() / config.interval.as_secs_f64())
        .round()
        .max(1.0) as u64;
    monitor.push(endpoint.scrape(Some(start)).await);
    let mut tick = tokio::time::interval_at(start + config.interval, config.interval);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let deadline = duration.map(|d| start + d);
    let mut ticks = 0u64;
    loop {
        let sleep_to_deadline = async {
            match deadline {
                Some(deadline) => tokio::time::sleep_until(deadline).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = cancel.cancelled() => break,
            _ = sleep_to_deadline => break,
            _ = tick.tick() => {}
        }
        monitor.push(endpoint.scrape(Some(start)).await);
        ticks += 1;
        if ticks.is_multiple_of(per_window) {
            let row = monitor.close_window(ticks * config.interval.as_micros() as u64);
            on_row(&row);
        }
    }
    if !ticks.is_multiple_of(per_window) {
        let end = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
        let row = monitor.close_window(end);
        on_row(&row);
    }
    monitor.rows
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A vLLM exposition with these cumulative counters and gauges.
    fn body(finished: f64, generated: f64, prompt_sum: f64, running: f64, waiting: f64) -> String {
        format!(
            "vllm:request_success_total{{finished_reason=\"length\"}} {finished}\n\
             vllm:generation_tokens_total {generated}\n\
             vllm:prompt_tokens_total {prompt_sum}\n\
             vllm:request_prompt_tokens_sum {prompt_sum}\n\
             vllm:request_prompt_tokens_count {finished}\n\
             vllm:request_prompt_tokens_bucket{{le=\"+Inf\"}} {finished}\n\
             vllm:num_requests_running {running}\n\
             vllm:num_requests_waiting {waiting}\n"
        )
    }

    /// Feeds windows of 10 s: (finished, generated tokens, prompt tokens per request, in system).
    fn feed(windows: &[(f64, f64, f64, f64)]) -> Vec<MonitorRow> {
        let mut monitor = Monitor::new(MonitorConfig::default());
        let (mut finished, mut generated, mut prompt) = (0.0, 0.0, 0.0);
        monitor.push(Scrape::from_body(
            0,
            body(0.0, 0.0, 0.0, 0.0, 0.0).as_bytes(),
        ));
        for (index, (done, tokens, per_request, in_system)) in windows.iter().enumerate() {
            finished += done;
            generated += tokens;
            prompt += done * per_request;
            let end = (index as u64 + 1) * 10_000_000;
            let text = body(
                finished,
                generated,
                prompt,
                in_system.min(8.0),
                (in_system - 8.0).max(0.0),
            );
            monitor.push(Scrape::from_body(end, text.as_bytes()));
            monitor.close_window(end);
        }
        monitor.rows().to_vec()
    }

    #[test]
    fn a_sudden_throughput_drop_with_work_waiting_is_flagged() {
        let mut windows = vec![(50.0, 10_000.0, 500.0, 8.0); 5];
        windows.push((10.0, 2_000.0, 500.0, 8.0));
        let rows = feed(&windows);
        assert!(rows[..5].iter().all(|r| r.flags.is_empty()), "{rows:#?}");
        assert_eq!(rows[5].flags, vec![FLAG_THROUGHPUT_DROP.to_string()]);
        assert_eq!(rows[5].generation_tokens_per_sec, Some(200.0));
        // With nothing left to do, less throughput is not a drop.
        let mut idle = vec![(50.0, 10_000.0, 500.0, 8.0); 5];
        idle.push((10.0, 2_000.0, 500.0, 0.0));
        assert!(feed(&idle)[5].flags.is_empty());
    }

    #[test]
    fn longer_prompts_than_the_baseline_are_a_drift() {
        let mut windows = vec![(30.0, 6_000.0, 500.0, 4.0); 3];
        windows.push((30.0, 6_000.0, 800.0, 4.0));
        let rows = feed(&windows);
        assert_eq!(rows[1].input_drift, Some(0.0));
        assert!(
            (rows[3].input_drift.unwrap() - 0.6).abs() < 1e-9,
            "{:?}",
            rows[3]
        );
        assert_eq!(rows[3].flags, vec![FLAG_LENGTH_DRIFT.to_string()]);
    }

    #[test]
    fn arrivals_are_completions_plus_the_change_in_the_system() {
        let rows = feed(&[(20.0, 4_000.0, 100.0, 10.0), (20.0, 4_000.0, 100.0, 40.0)]);
        // Window 2: 20 finished and 30 more in the system over 10 s.
        assert_eq!(rows[1].completions_per_sec, Some(2.0));
        assert_eq!(rows[1].arrivals_per_sec, Some(5.0));
        assert_eq!(rows[1].in_system, Some(40.0));
    }
}
