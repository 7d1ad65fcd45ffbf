//! [`StepAggregator`]: folds [`RequestRecord`]s into histograms, counters and windows, and
//! turns them into a [`StepReport`]. Records arrive in any order; the result depends only on
//! the set of records, so a report rebuilt from the journal equals the live one.
//!
//! The measurement interval runs from the first to the last *scheduled* send of the measured
//! (non-warmup) requests. Throughput is the work completed inside it (warmup requests that
//! finish inside it included, measured requests that finish after it excluded) divided by its
//! length: in steady state that is exactly the sustained rate, with no ramp-up or drain bias.
//! Latency and goodput attainment cover the measured requests.

mod breakdown;

use std::collections::BTreeMap;
use std::time::Duration;

use self::breakdown::Breakdown;
use super::histogram::{CountHistogram, LatencyHistogram};
use super::recovery::recovery;
use super::slo::{LatencyMetric, PercentileObjective, Slo};
use super::timeline::{CompletedWork, CompletionTimeline};
use super::windows::Windows;
use crate::record::{Failure, OutcomeKind, Phase, RequestRecord, TokenSource};
use crate::report::{
    CountStats, GoodputReport, LatencyFromSendReport, LatencyReport, LatencyStats, LoadReport,
    ObjectiveResult, RequestCounts, StepReport, Throughput, TokenReport,
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
    /// Per percentile objective of the SLO: (samples, misses) over measured requests (over
    /// tokens for ITL).
    objective_tallies: Vec<(u64, u64)>,
    completed_work: CompletionTimeline,
    first_scheduled_us: Option<u64>,
    last_scheduled_us: Option<u64>,
    last_end_us: Option<u64>,
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
            objective_tallies: vec![(0, 0); slo.as_ref().map_or(0, |slo| slo.objectives.len())],
            slo,
            counts: RequestCounts::default(),
            latencies: Latencies::default(),
            tokens: Tokens::default(),
            compliant: 0,
            completed_work: CompletionTimeline::default(),
            first_scheduled_us: None,
            last_scheduled_us: None,
            last_end_us: None,
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
        if record.is_ok() {
            let input = record.input_tokens.unwrap_or(0);
            let items = record.items.max(1);
            self.completed_work
                .add(record.end_us, items, input, record.output_tokens, complies);
        }
        if record.phase == Phase::Warmup {
            self.counts.warmup += 1;
            return;
        }
        self.add_measured(record);
        self.sessions.add(record);
        self.tally_objectives(record);
        match &record.failure {
            None => self.add_completed(record),
            Some(failure) => {
                self.add_failed(failure);
                self.failure_examples.add(record.index, failure);
            }
        }
        self.compliant += u64::from(complies);
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

    /// Counts, per percentile objective, the samples and the misses of a measured request:
    /// a failed request misses every request-level objective; an ITL objective counts tokens.
    fn tally_objectives(&mut self, record: &RequestRecord) {
        let Some(slo) = &self.slo else { return };
        for (objective, (samples, misses)) in slo.objectives.iter().zip(&mut self.objective_tallies)
        {
            let (n, missed) = objective_tally(objective, record);
            *samples += n;
            *misses += missed;
        }
    }

    /// Measured requests, compliant requests and the per-objective tallies, for statistical
    /// verdicts on attainment targets.
    pub fn compliance(&self) -> Compliance {
        let objectives = self.slo.as_ref().map_or_else(Vec::new, |slo| {
            slo.objectives
                .iter()
                .zip(&self.objective_tallies)
                .map(|(objective, &(samples, misses))| ObjectiveTally {
                    objective: *objective,
                    samples,
                    misses,
                })
                .collect()
        });
        Compliance {
            measured: self.counts.scheduled,
            compliant: self.compliant,
            objectives,
        }
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

    /// The measurement interval `[start, end)` in µs since the run start and the work
    /// completed in it: first to last measured scheduled send; when that span is empty (one
    /// request, or a closed loop that started everything at once), first measured scheduled
    /// send to just after the last measured end.
    pub fn measurement_interval(&self) -> Option<(u64, u64, CompletedWork)> {
        let (first, last) = (self.first_scheduled_us?, self.last_scheduled_us?);
        if last > first {
            return Some((first, last, self.completed_work.between(first, last)));
        }
        let end = self.last_end_us?.max(first) + 1;
        Some((first, end, self.completed_work.between(first, end)))
    }

    /// The step's report for load level `load`.
    pub fn report(&self, load: LoadReport) -> StepReport {
        let (start_us, end_us, work) =
            self.measurement_interval()
                .unwrap_or((0, 0, CompletedWork::default()));
        let duration_secs = end_us.saturating_sub(start_us) as f64 / 1e6;
        let per_sec = |n: f64| {
            if duration_secs > 0.0 {
                n / duration_secs
            } else {
                0.0
            }
        };
        let throughput = Throughput {
            offered_requests_per_sec: self.offered_rate(),
            requests_per_sec: per_sec(work.requests),
            input_tokens_per_sec: per_sec(work.input_tokens),
            output_tokens_per_sec: per_sec(work.output_tokens),
            total_tokens_per_sec: per_sec(work.input_tokens + work.output_tokens),
            items_per_sec: per_sec(work.items),
        };
        let last_arrival = self.last_scheduled_us.unwrap_or(start_us);
        let windows = self.windows.report();
        let width_secs = self.windows.width().as_secs_f64();
        let recovery = load
            .phases
            .as_deref()
            .and_then(|phases| recovery(&windows, width_secs, phases));
        let (buckets, turns, workload_stats) = self.breakdown_reports(start_us, end_us);
        let (reasoning, tool_calls) = self.channels.report(throughput.output_tokens_per_sec);
        let (sessions, prefix_reuse) = self.sessions.report();
        StepReport {
            load,
            duration_secs,
            window_start_secs: start_us as f64 / 1e6,
            requests: RequestCounts {
                failure_examples: self.failure_examples.messages(),
                ..self.counts.clone()
            },
            throughput,
            tokens: self.token_report(),
            latency_ms: self.latency_report(),
            latency_from_send_ms: self.latency_from_send_report(),
            goodput: self.goodput_report(
                per_sec(work.compliant_requests),
                per_sec(work.compliant_output_tokens),
            ),
            stability: self.windows.stability(start_us, last_arrival),
            windows,
            recovery,
            distributions_ms: super::quantiles::Distributions::from_histograms(
                &self.latencies.ttft,
                &self.latencies.tpot,
                &self.latencies.itl,
                &self.latencies.e2e,
            ),
            server: None,
            utilisation: None,
            speculative_decoding: None,
            cost: None,
            buckets,
            turns,
            workload_stats,
            reasoning,
            tool_calls,
            sessions,
            prefix_reuse,
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

/// How a measured set of requests fared against the SLO.
#[derive(Debug, Clone, PartialEq)]
pub struct Compliance {
    /// Measured requests (failures included).
    pub measured: u64,
    /// Of them, those meeting every per-request threshold.
    pub compliant: u64,
    /// Per percentile objective: samples and misses.
    pub objectives: Vec<ObjectiveTally>,
}

/// Samples and misses of one percentile objective.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ObjectiveTally {
    /// The objective.
    pub objective: PercentileObjective,
    /// Samples judged (requests; tokens for ITL).
    pub samples: u64,
    /// Samples above the objective's maximum (failed requests count as misses).
    pub misses: u64,
}

/// `(samples, misses)` a request contributes to `objective`.
fn objective_tally(objective: &PercentileObjective, record: &RequestRecord) -> (u64, u64) {
    if objective.metric == LatencyMetric::Itl {
        return record
            .itl_samples()
            .fold((0, 0), |(n, missed), (gap, tokens)| {
                (
                    n + tokens,
                    missed + if gap > objective.max { tokens } else { 0 },
                )
            });
    }
    if !record.is_ok() {
        return (1, 1);
    }
    let value = match objective.metric {
        LatencyMetric::Ttft => record.ttft(),
        LatencyMetric::Tpot => record.tpot(),
        LatencyMetric::E2e => record.e2e(),
        LatencyMetric::Itl => None,
        // A streamed answer that never came is a miss.
        LatencyMetric::Ttfat if record.streamed => {
            return (
                1,
                u64::from(record.ttfat().is_none_or(|v| v > objective.max)),
            );
        }
        LatencyMetric::Ttfat => None,
    };
    (1, u64::from(value.is_some_and(|v| v > objective.max)))
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
