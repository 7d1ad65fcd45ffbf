//! [`StepAggregator`]: folds [`RequestRecord`]s into histograms, counters and windows, and
//! turns them into a [`StepReport`]. Records arrive in any order; the result depends only on
//! the set of records, so a report rebuilt from the journal equals the live one.
//!
//! Throughput is the work done inside the throughput interval — from the end of start-up to
//! the last measured *scheduled* send — divided by its length, each request counted by the
//! fraction of its life inside it (completions, when the queue grew): see its `interval` module and
//! `docs/metrics.md`. Latency and goodput attainment cover the measured requests.

mod breakdown;
mod compliance;
mod interval;
mod labels;

pub use self::compliance::{Compliance, ObjectiveTally};

use std::collections::BTreeMap;
use std::time::Duration;

use self::breakdown::Breakdown;
use self::compliance::Tallies;
use self::interval::{Edges, Interval};
use super::flow::Flow;
use super::histogram::{CountHistogram, LatencyHistogram};
use super::lives::Lives;
use super::recovery::recovery;
use super::slo::{LatencyMetric, Slo};
use super::stability::{ArrivalProcess, Stability, judge};
use super::timeline::{CompletedWork, CompletionTimeline};
use super::windows::Windows;
use crate::record::{Failure, OutcomeKind, Phase, RequestRecord, TokenSource};
use crate::report::{
    CountStats, GoodputReport, IntervalReport, LatencyFromSendReport, LatencyReport, LatencyStats,
    LoadReport, ObjectiveResult, RequestCounts, StepReport, TokenReport,
};
use crate::units::to_ms;

#[derive(Debug, Clone, Default)]
struct Latencies {
    ttft: LatencyHistogram,
    ttft_from_send: LatencyHistogram,
    tpot: LatencyHistogram,
    itl: LatencyHistogram,
    e2e: LatencyHistogram,
    e2e_from_send: LatencyHistogram,
    e2e_per_item: LatencyHistogram,
    dispatch_lag: LatencyHistogram,
    client_queue_wait: LatencyHistogram,
}

#[derive(Debug, Clone, Default)]
struct Tokens {
    input_total: u64,
    output_total: u64,
    items: u64,
    input: CountHistogram,
    output: CountHistogram,
    output_from_usage: u64,
    output_from_tokenizer: u64,
    length_mismatches: u64,
    tokenizer_disagreements: u64,
}

/// Accumulates one step's records.
#[derive(Debug, Clone)]
pub struct StepAggregator {
    slo: Option<Slo>,
    counts: RequestCounts,
    latencies: Latencies,
    tokens: Tokens,
    compliant: u64,
    /// Per check of the SLO: samples and misses over measured requests, by scheduled time.
    tallies: Tallies,
    /// Successful completions by end time (the `completions` method).
    completed_work: CompletionTimeline,
    /// The same work spread over each request's life (the `life_fraction` method).
    lives: Lives,
    /// Arrivals, ends and E2E at 10 ms, for the stability verdict.
    flow: Flow,
    first_scheduled_us: Option<u64>,
    last_scheduled_us: Option<u64>,
    last_end_us: Option<u64>,
    /// First successful completion of a measured request: start-up ends there.
    first_completion_us: Option<u64>,
    /// First successful completion of any request (warm-up included).
    first_any_completion_us: Option<u64>,
    windows: Windows,
    /// Per-bucket, per-turn and workload figures (`None` inside a breakdown itself).
    breakdown: Option<Box<Breakdown>>,
    failure_examples: super::failure_examples::FailureExamples,
    /// Reasoning and tool-call figures.
    channels: super::channels::ChannelAggregator,
    /// Sessions and prefix reuse.
    sessions: super::sessions::SessionAggregator,
}

impl StepAggregator {
    /// An empty aggregator judging requests against `slo`, with time-series windows of `window`
    /// (and the default input-length buckets; see [`StepAggregator::with_length_buckets`]).
    pub fn new(slo: Option<Slo>, window: Duration) -> Self {
        let mut aggregator = Self::bare(slo.clone(), window);
        aggregator.breakdown = Some(Box::new(Breakdown::new(Default::default(), slo, window)));
        aggregator
    }

    /// An aggregator without a breakdown.
    fn bare(slo: Option<Slo>, window: Duration) -> Self {
        StepAggregator {
            tallies: Tallies::new(slo.as_ref().map_or(0, |slo| slo.objectives.len())),
            slo,
            counts: RequestCounts::default(),
            latencies: Latencies::default(),
            tokens: Tokens::default(),
            compliant: 0,
            completed_work: CompletionTimeline::default(),
            lives: Lives::default(),
            flow: Flow::default(),
            first_scheduled_us: None,
            last_scheduled_us: None,
            last_end_us: None,
            first_completion_us: None,
            first_any_completion_us: None,
            windows: Windows::new(window),
            breakdown: None,
            failure_examples: Default::default(),
            channels: Default::default(),
            sessions: Default::default(),
        }
    }

    /// Folds in one finished request.
    pub fn add(&mut self, record: &RequestRecord) {
        if let Some(breakdown) = &mut self.breakdown {
            breakdown.add(record);
        }
        let complies = self
            .slo
            .as_ref()
            .is_some_and(|slo| slo.request_complies(record));
        self.add_to_windows(record, self.slo.is_some().then_some(complies));
        self.add_work(record, complies);
        if record.phase == Phase::Warmup {
            self.counts.warmup += 1;
            return;
        }
        self.add_measured(record);
        self.sessions.add(record);
        self.tally_objectives(record, complies);
        match &record.failure {
            None => self.add_completed(record),
            Some(failure) => {
                self.add_failed(failure);
                self.failure_examples.add(record.index, failure);
            }
        }
        self.compliant += u64::from(complies);
    }

    /// The work of a successful request, by its end and over its life; its flow either way.
    fn add_work(&mut self, record: &RequestRecord, complies: bool) {
        let e2e = record.e2e().filter(|_| record.is_ok());
        let e2e_us = e2e.map(|d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
        let shed = record.failure.as_ref().is_some_and(|f| f.is_shed());
        self.flow
            .add(record.scheduled_us, record.end_us, e2e_us, shed);
        if !record.is_ok() {
            return;
        }
        let input = record.input_tokens.unwrap_or(0);
        let items = record.items.max(1);
        self.completed_work
            .add(record.end_us, items, input, record.output_tokens, complies);
        let work = CompletedWork::of(items, input, record.output_tokens, complies);
        let measured = record.phase == Phase::Measure;
        self.lives
            .add(record.scheduled_us, record.end_us, work, measured);
        let earliest = |t: Option<u64>| Some(t.map_or(record.end_us, |t| t.min(record.end_us)));
        self.first_any_completion_us = earliest(self.first_any_completion_us);
        if record.phase == Phase::Measure {
            self.first_completion_us = earliest(self.first_completion_us);
        }
    }

    /// Counts and spans of a measured request, whatever its outcome.
    fn add_measured(&mut self, record: &RequestRecord) {
        self.counts.scheduled += 1;
        self.counts.sent += u64::from(record.sent_us.is_some());
        self.counts.retries += u64::from(record.retries);
        let (scheduled, end) = (record.scheduled_us, record.end_us);
        self.first_scheduled_us = Some(
            self.first_scheduled_us
                .map_or(scheduled, |t| t.min(scheduled)),
        );
        self.last_scheduled_us = Some(
            self.last_scheduled_us
                .map_or(scheduled, |t| t.max(scheduled)),
        );
        self.last_end_us = Some(self.last_end_us.map_or(end, |t| t.max(end)));
        if let Some(lag) = record.dispatch_lag() {
            self.latencies.dispatch_lag.record(lag);
        }
        self.latencies
            .client_queue_wait
            .record(record.client_queue_wait());
    }

    /// Tallies a measured request against the SLO's thresholds and percentile objectives.
    fn tally_objectives(&mut self, record: &RequestRecord, complies: bool) {
        if let Some(slo) = &self.slo {
            self.tallies.add(slo, record, complies);
        }
    }

    /// Measured requests, compliant requests and the per-objective tallies (with their
    /// overdispersion), for statistical verdicts on attainment targets.
    pub fn compliance(&self) -> Compliance {
        let objectives = self.slo.as_ref().map_or(&[][..], |slo| &slo.objectives[..]);
        self.tallies
            .compliance(objectives, self.counts.scheduled, self.compliant)
    }

    fn add_failed(&mut self, failure: &Failure) {
        self.counts.failed += 1;
        *self
            .counts
            .failed_by_kind
            .entry(failure.kind.as_str().to_string())
            .or_insert(0) += 1;
        if let Some(status) = failure.status {
            *self
                .counts
                .failed_by_status
                .entry(status.to_string())
                .or_insert(0) += 1;
        }
    }

    fn add_to_windows(&mut self, record: &RequestRecord, complies: Option<bool>) {
        self.windows.add_arrival(record.scheduled_us);
        let (ttft, e2e) = if record.is_ok() {
            (record.ttft(), record.e2e())
        } else {
            (None, None)
        };
        self.windows
            .add_outcome(record.scheduled_us, ttft, e2e, complies);
        if let Some(sent) = record.sent_us {
            self.windows.add_sent(sent);
        }
        self.windows.add_end(record.end_us, record.is_ok());
        for &[at, tokens] in &record.chunks {
            self.windows.add_output_tokens(at, tokens);
        }
    }

    fn add_completed(&mut self, record: &RequestRecord) {
        self.counts.completed += 1;
        self.channels.add(record);
        let l = &mut self.latencies;
        let pairs = [
            (&mut l.ttft, record.ttft()),
            (&mut l.ttft_from_send, record.ttft_from_send()),
            (&mut l.tpot, record.tpot()),
            (&mut l.e2e, record.e2e()),
            (&mut l.e2e_from_send, record.e2e_from_send()),
            (&mut l.e2e_per_item, record.e2e_per_item()),
        ];
        for (histogram, value) in pairs {
            if let Some(value) = value {
                histogram.record(value);
            }
        }
        for (gap, tokens) in record.itl_samples() {
            l.itl.record_n(gap, tokens);
        }
        let t = &mut self.tokens;
        let input = record.input_tokens.unwrap_or(0);
        t.input_total += input;
        t.output_total += record.output_tokens;
        t.items += u64::from(record.items.max(1));
        t.input.record(input);
        t.output.record(record.output_tokens);
        match record.output_tokens_source {
            TokenSource::Usage => t.output_from_usage += 1,
            TokenSource::Tokenizer => t.output_from_tokenizer += 1,
            TokenSource::Workload | TokenSource::None => {}
        }
        if record
            .requested_output_tokens
            .is_some_and(|asked| asked != record.output_tokens)
            && record.finish_reason.as_deref() != Some("stop")
        {
            t.length_mismatches += 1;
        }
        if let (TokenSource::Usage, Some(counted)) =
            (record.output_tokens_source, record.tokenizer_output_tokens)
        {
            let usage = record.output_tokens as f64;
            if (usage - counted as f64).abs() > 0.1 * usage.max(1.0) {
                t.tokenizer_disagreements += 1;
            }
        }
    }

    fn edges(&self) -> Option<Edges> {
        let (first, last) = (self.first_scheduled_us?, self.last_scheduled_us?);
        Some(Edges {
            first_arrival_us: first,
            last_arrival_us: last,
            first_completion_us: self.first_completion_us,
            first_any_completion_us: self.first_any_completion_us,
            last_end_us: self.last_end_us.unwrap_or(last),
        })
    }

    /// The stability verdict over the measured arrivals after start-up (the later of the first
    /// completion and a quarter into the arrival span), with the soak trends.
    fn stability(&self, edges: &Edges, process: ArrivalProcess) -> Stability {
        let (first, last) = (edges.first_arrival_us, edges.last_arrival_us);
        let from = edges
            .startup_end_us()
            .max(first + (last.saturating_sub(first)) / 4);
        let width_us = u64::try_from(self.windows.width().as_micros()).unwrap_or(u64::MAX);
        let trends = self.windows.trends(first, last);
        judge(&self.flow, (from, last), width_us, process, trends)
    }

    /// The throughput interval `[start, end)` in µs since the run start and the work done in
    /// it (`docs/metrics.md`, "Throughput").
    pub fn measurement_interval(&self) -> Option<(u64, u64, CompletedWork)> {
        let edges = self.edges()?;
        let interval = edges.interval(self.stability(&edges, ArrivalProcess::Measured).verdict);
        let work = interval.work(&self.lives, &self.completed_work);
        Some((interval.start_us, interval.end_us, work))
    }

    /// The step's report for load level `load`.
    pub fn report(&self, load: LoadReport) -> StepReport {
        let edges = self.edges();
        let process = ArrivalProcess::of(&load.mode, load.arrival.as_deref(), load.burstiness);
        let stability = edges.map_or_else(
            || judge(&self.flow, (0, 0), 1, process, Vec::new()),
            |e| self.stability(&e, process),
        );
        let interval = edges.map_or(Interval::EMPTY, |e| e.interval(stability.verdict));
        let work = interval.work(&self.lives, &self.completed_work);
        let throughput = interval.throughput(&work, self.offered_rate());
        let windows = self.windows.report();
        let recovery = load
            .phases
            .as_deref()
            .and_then(|phases| recovery(&windows, self.windows.width().as_secs_f64(), phases));
        let breakdown = self.breakdown_reports(&interval);
        let (reasoning, tool_calls) = self.channels.report(throughput.output_tokens_per_sec);
        let (sessions, prefix_reuse) = self.sessions.report();
        StepReport {
            load,
            duration_secs: interval.secs(),
            window_start_secs: interval.start_us as f64 / 1e6,
            interval: self.interval_report(edges.as_ref(), &interval),
            requests: RequestCounts {
                failure_examples: self.failure_examples.messages(),
                ..self.counts.clone()
            },
            audio: self.channels.audio(throughput.requests_per_sec),
            throughput,
            tokens: self.token_report(),
            latency_ms: self.latency_report(),
            latency_from_send_ms: self.latency_from_send_report(),
            goodput: self.goodput_report(
                interval.per_sec(work.compliant_requests),
                interval.per_sec(work.compliant_output_tokens),
            ),
            stability,
            windows,
            recovery,
            distributions_ms: self.distributions(),
            server: None,
            utilisation: None,
            speculative_decoding: None,
            cost: None,
            buckets: breakdown.buckets,
            turns: breakdown.turns,
            image_buckets: breakdown.images,
            image_settings: breakdown.generation,
            models: breakdown.labels.models,
            adapters: breakdown.labels.adapters,
            classes: breakdown.labels.classes,
            targets: breakdown.labels.targets,
            replicas: breakdown.labels.replicas,
            workload_stats: breakdown.stats,
            reasoning,
            tool_calls,
            sessions,
            prefix_reuse,
        }
    }

    /// Quantile points of the TTFT, TPOT, ITL and E2E distributions.
    fn distributions(&self) -> super::quantiles::Distributions {
        super::quantiles::Distributions::from_histograms(
            &self.latencies.ttft,
            &self.latencies.tpot,
            &self.latencies.itl,
            &self.latencies.e2e,
        )
    }

    /// The interval with start-up and drain apart.
    fn interval_report(&self, edges: Option<&Edges>, interval: &Interval) -> IntervalReport {
        let Some(edges) = edges else {
            return IntervalReport::default();
        };
        let secs = |us: u64| us as f64 / 1e6;
        let after = self
            .completed_work
            .between(interval.end_us, edges.last_end_us.max(interval.end_us) + 1);
        IntervalReport {
            method: interval.method,
            first_arrival_secs: secs(edges.first_arrival_us),
            last_arrival_secs: secs(edges.last_arrival_us),
            startup_secs: secs(interval.start_us.saturating_sub(edges.first_arrival_us)),
            drain_secs: secs(edges.last_end_us.saturating_sub(interval.end_us)),
            completed_after: after.requests.round() as u64,
            last_end_secs: secs(edges.last_end_us),
        }
    }

    /// Realised arrival rate: `(n − 1) / (last scheduled − first scheduled)`.
    fn offered_rate(&self) -> Option<f64> {
        let span_us = self
            .last_scheduled_us?
            .checked_sub(self.first_scheduled_us?)?;
        (self.counts.scheduled >= 2 && span_us > 0)
            .then(|| (self.counts.scheduled - 1) as f64 / (span_us as f64 / 1e6))
    }

    fn latency_from_send_report(&self) -> LatencyFromSendReport {
        LatencyFromSendReport {
            ttft: latency_stats(&self.latencies.ttft_from_send),
            e2e: latency_stats(&self.latencies.e2e_from_send),
        }
    }

    fn latency_report(&self) -> LatencyReport {
        let l = &self.latencies;
        LatencyReport {
            ttft: latency_stats(&l.ttft),
            tpot: latency_stats(&l.tpot),
            itl: latency_stats(&l.itl),
            e2e: latency_stats(&l.e2e),
            e2e_per_item: latency_stats(&l.e2e_per_item),
            dispatch_lag: latency_stats(&l.dispatch_lag),
            client_queue_wait: latency_stats(&l.client_queue_wait),
        }
    }

    fn token_report(&self) -> TokenReport {
        let t = &self.tokens;
        TokenReport {
            input_total: t.input_total,
            output_total: t.output_total,
            input_per_request: count_stats(&t.input),
            output_per_request: count_stats(&t.output),
            output_from_usage: t.output_from_usage,
            output_from_tokenizer: t.output_from_tokenizer,
            output_length_mismatches: t.length_mismatches,
            usage_tokenizer_disagreements: t.tokenizer_disagreements,
        }
    }

    fn goodput_report(&self, requests_per_sec: f64, output_tokens_per_sec: f64) -> GoodputReport {
        let Some(slo) = &self.slo else {
            return GoodputReport::default();
        };
        let measured = self.counts.scheduled;
        let objectives: Vec<ObjectiveResult> = slo
            .objectives
            .iter()
            .map(|objective| {
                let histogram = self.histogram_for(objective.metric);
                // A completed request that never answered is as late as a failure for TTFAT.
                let never = match objective.metric {
                    LatencyMetric::Ttfat => self.channels.no_answer(),
                    _ => 0,
                };
                let measured = censored_percentile(
                    histogram,
                    self.counts.failed + never,
                    objective.percentile,
                );
                let name = format!("{}_p{}", objective.metric.as_str(), objective.percentile);
                let pass = measured.is_some_and(|value| value <= objective.max);
                ObjectiveResult {
                    name,
                    max_ms: to_ms(objective.max),
                    measured_ms: measured.map(to_ms),
                    pass,
                }
            })
            .collect();
        let has_thresholds = !slo.thresholds.is_empty();
        GoodputReport {
            slo: Some(slo.to_string()),
            attained_fraction: (has_thresholds && measured > 0)
                .then(|| self.compliant as f64 / measured as f64),
            requests_per_sec: has_thresholds.then_some(requests_per_sec),
            output_tokens_per_sec: has_thresholds.then_some(output_tokens_per_sec),
            compliant: has_thresholds.then_some(self.compliant),
            objectives_passed: (!objectives.is_empty()).then(|| objectives.iter().all(|o| o.pass)),
            objectives,
        }
    }

    fn histogram_for(&self, metric: LatencyMetric) -> &LatencyHistogram {
        match metric {
            LatencyMetric::Ttft => &self.latencies.ttft,
            LatencyMetric::Tpot => &self.latencies.tpot,
            LatencyMetric::Itl => &self.latencies.itl,
            LatencyMetric::E2e => &self.latencies.e2e,
            LatencyMetric::Ttfat => self.channels.ttfat(),
        }
    }

    /// Requests that ended in `kind` so far (measured only).
    pub fn failed_of_kind(&self, kind: OutcomeKind) -> u64 {
        self.counts
            .failed_by_kind
            .get(kind.as_str())
            .copied()
            .unwrap_or(0)
    }
}

/// The `percentile` of successful samples with `failed` requests counted as infinitely late;
/// `None` when the percentile falls among the failures.
fn censored_percentile(
    histogram: &LatencyHistogram,
    failed: u64,
    percentile: f64,
) -> Option<Duration> {
    let ok = histogram.count();
    let total = ok + failed;
    if total == 0 {
        return None;
    }
    let rank = ((percentile / 100.0) * total as f64).ceil().max(1.0) as u64;
    if rank > ok {
        return None;
    }
    let within_ok = 100.0 * rank as f64 / ok as f64;
    histogram
        .percentile_us(within_ok.min(100.0))
        .map(Duration::from_micros)
}

/// The report form of a latency histogram: mean, min, percentiles and max in milliseconds.
pub(crate) fn latency_stats(histogram: &LatencyHistogram) -> LatencyStats {
    let ms = |us: Option<u64>| us.map(|v| v as f64 / 1000.0);
    LatencyStats {
        mean: histogram.mean_us().map(|v| v / 1000.0),
        min: ms(histogram.min_us()),
        p50: ms(histogram.percentile_us(50.0)),
        p90: ms(histogram.percentile_us(90.0)),
        p95: ms(histogram.percentile_us(95.0)),
        p99: ms(histogram.percentile_us(99.0)),
        p999: ms(histogram.percentile_us(99.9)),
        max: ms(histogram.max_us()),
        count: histogram.count(),
    }
}

pub(crate) fn count_stats(histogram: &CountHistogram) -> CountStats {
    CountStats {
        mean: histogram.mean(),
        p50: histogram.percentile(50.0),
        p99: histogram.percentile(99.0),
        min: histogram.min(),
        max: histogram.max(),
    }
}

/// Failures by kind as an ordered map, every kind present (zero when none).
pub fn failures_by_kind(counts: &RequestCounts) -> BTreeMap<&'static str, u64> {
    OutcomeKind::ALL
        .iter()
        .filter(|kind| **kind != OutcomeKind::Ok)
        .map(|kind| {
            (
                kind.as_str(),
                counts
                    .failed_by_kind
                    .get(kind.as_str())
                    .copied()
                    .unwrap_or(0),
            )
        })
        .collect()
}
