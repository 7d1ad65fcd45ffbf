//! Turns a run's scrapes into the `server` section of a step (with a disaggregated
//! deployment's queues and KV transfers where exposed): gauges summarised over the
//! measurement interval, counters and histograms differenced over it (interpolated at its
//! edges), whole-run totals checked against the client's counts, a per-window series aligned
//! with the client's, and warnings about the scraping itself.

use std::time::Duration;

use super::concepts::Concept;
use super::report::{
    Disaggregation, GaugeStats, HistogramStats, QuantileBucket, ServerInterval, ServerLatency,
    ServerReport, ServerTotals, ServerWindow, SpecCounters, TokenAgreement,
};
use super::scrape::ScrapeHeader;
use super::series::{ProblemKind, ScrapeLog};
use super::tally::ClientTally;
use crate::report::{StepReport, Warning};

/// Relative difference between the server's and the client's output tokens above which a
/// warning is raised.
pub const TOKEN_MISMATCH_WARNING: f64 = 0.02;

/// What a step's server section is computed from.
#[derive(Debug, Clone, Copy)]
pub struct ServerInputs<'a> {
    /// What was scraped and how often.
    pub header: &'a ScrapeHeader,
    /// Every scrape.
    pub log: &'a ScrapeLog,
    /// The client's step (measurement interval, windows).
    pub step: &'a StepReport,
    /// Width of the client's windows.
    pub window: Duration,
    /// The client's own totals.
    pub tally: &'a ClientTally,
}

/// The step's `server` section and the warnings about scraping.
pub fn summarise(inputs: ServerInputs<'_>) -> (ServerReport, Vec<Warning>) {
    let log = inputs.log;
    let flavour = [Concept::GenerationTokens, Concept::Running, Concept::E2e]
        .iter()
        .find_map(|concept| log.source_of(*concept))
        .map(|source| source.flavour.as_str().to_string());
    let usable = log.usable_count() as u64;
    let report = ServerReport {
        metrics_url: inputs.header.metrics_url.clone(),
        flavour,
        interval_ms: inputs.header.interval_ms,
        scrapes: usable,
        failed_scrapes: log.scrapes.len() as u64 - usable,
        counter_resets: log.counter_resets(),
        measurement: measurement(log, inputs.step),
        run_totals: run_totals(log),
        agreement: agreement(log, inputs.tally),
        series: series(log, inputs.step.windows.len(), inputs.window),
    };
    let warnings = warnings(log, &report);
    (report, warnings)
}

fn secs_to_us(secs: f64) -> u64 {
    (secs * 1e6).round().max(0.0) as u64
}

fn measurement(log: &ScrapeLog, step: &StepReport) -> ServerInterval {
    let start = secs_to_us(step.window_start_secs);
    let end = start + secs_to_us(step.duration_secs);
    let times: Vec<u64> = log
        .scrapes
        .iter()
        .filter(|s| s.is_usable())
        .map(|s| s.at_us)
        .collect();
    let (from, to) = match (times.first(), times.last()) {
        (Some(&first), Some(&last)) => (start.max(first), end.min(last)),
        _ => (start, start),
    };
    let covered_secs = to.saturating_sub(from) as f64 / 1e6;
    let increase = |concept: Concept| {
        let series = log.counter(concept)?;
        (to > from).then(|| series.increase(from, to))
    };
    let rate = |concept| increase(concept).map(|n| n / covered_secs);
    let gauge = |concept| gauge_stats(log, concept, start, end);
    let prefix_cache_hit_rate = match (
        increase(Concept::PrefixCacheHits),
        increase(Concept::PrefixCacheQueries),
    ) {
        (Some(hits), Some(queries)) if queries > 0.0 => Some(hits / queries),
        _ => None,
    };
    let histogram = |concept| histogram_stats(log, concept, from, to);
    ServerInterval {
        start_secs: from as f64 / 1e6,
        end_secs: to.max(from) as f64 / 1e6,
        running: gauge(Concept::Running),
        waiting: gauge(Concept::Waiting),
        kv_cache_usage: gauge(Concept::KvCacheUsage),
        power_watts: gauge(Concept::PowerWatts),
        prompt_tokens_per_sec: rate(Concept::PromptTokens),
        generation_tokens_per_sec: rate(Concept::GenerationTokens),
        requests_finished_per_sec: rate(Concept::RequestsFinished),
        preemptions: increase(Concept::Preemptions),
        prefix_cache_hit_rate,
        speculative: SpecCounters {
            drafts: increase(Concept::SpecDrafts),
            draft_tokens: increase(Concept::SpecDraftTokens),
            accepted_tokens: increase(Concept::SpecAcceptedTokens),
            accept_length_gauge: gauge(Concept::SpecAcceptLength).mean,
            accept_rate_gauge: gauge(Concept::SpecAcceptRate).mean,
        },
        latency_ms: ServerLatency {
            ttft: histogram(Concept::Ttft),
            itl: histogram(Concept::Itl),
            e2e: histogram(Concept::E2e),
            queue: histogram(Concept::QueueTime),
        },
        disaggregation: disaggregation(log, (start, end), (from, to)),
    }
}

/// The prefill and decode queues (gauges over `[start, end]`) and KV transfers (differenced
/// over the scraped `[from, to]`), when the server exposes any of them.
pub(super) fn disaggregation(
    log: &ScrapeLog,
    (start, end): (u64, u64),
    (from, to): (u64, u64),
) -> Option<Disaggregation> {
    use Concept::{
        DecodePreallocQueue, DecodeTransferQueue, KvTransferFailures, KvTransferLatencyGauge,
        KvTransferTime, PrefillInflightQueue, PrefillPreallocQueue,
    };
    let exposed = [
        PrefillPreallocQueue,
        PrefillInflightQueue,
        DecodePreallocQueue,
        DecodeTransferQueue,
        KvTransferTime,
        KvTransferLatencyGauge,
        KvTransferFailures,
    ]
    .iter()
    .any(|concept| log.source_of(*concept).is_some());
    if !exposed {
        return None;
    }
    let gauge = |concept| gauge_stats(log, concept, start, end);
    let failures = log
        .counter(KvTransferFailures)
        .filter(|_| to > from)
        .map(|series| series.increase(from, to));
    Some(Disaggregation {
        prefill_prealloc_queue: gauge(PrefillPreallocQueue),
        prefill_inflight_queue: gauge(PrefillInflightQueue),
        decode_prealloc_queue: gauge(DecodePreallocQueue),
        decode_transfer_queue: gauge(DecodeTransferQueue),
        kv_transfer_ms: histogram_stats(log, KvTransferTime, from, to),
        kv_transfer_latency_ms: gauge(KvTransferLatencyGauge),
        kv_transfer_failures: failures,
    })
}

/// Mean, p95 (nearest rank) and max of a gauge's samples taken in `[from, to]`.
fn gauge_stats(log: &ScrapeLog, concept: Concept, from: u64, to: u64) -> GaugeStats {
    let mut values: Vec<f64> = log
        .gauge(concept)
        .into_iter()
        .filter(|(at, _)| (from..=to).contains(at))
        .map(|(_, value)| value)
        .collect();
    summarise_values(&mut values)
}

/// Mean, p95 (nearest rank) and max of `values`.
pub fn summarise_values(values: &mut [f64]) -> GaugeStats {
    if values.is_empty() {
        return GaugeStats::default();
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let rank = ((0.95 * n as f64).ceil() as usize).clamp(1, n);
    GaugeStats {
        mean: Some(values.iter().sum::<f64>() / n as f64),
        p95: Some(values[rank - 1]),
        max: values.last().copied(),
        samples: n as u64,
    }
}

fn histogram_stats(log: &ScrapeLog, concept: Concept, from: u64, to: u64) -> HistogramStats {
    let Some(histogram) = log.histogram(concept) else {
        return HistogramStats::default();
    };
    if to <= from {
        return HistogramStats::default();
    }
    let delta = histogram.delta(from, to);
    let ms = |secs: Option<f64>| secs.map(|s| s * 1000.0);
    let bucket = |q: f64| {
        delta
            .quantile_bucket(q)
            .map(|(lower, upper)| QuantileBucket {
                above_ms: lower * 1000.0,
                at_most_ms: upper.map(|u| u * 1000.0),
            })
    };
    HistogramStats {
        count: Some(delta.count),
        mean: ms(delta.mean()),
        p50: bucket(0.50),
        p90: bucket(0.90),
        p99: bucket(0.99),
    }
}

fn run_totals(log: &ScrapeLog) -> ServerTotals {
    let total = |concept| log.counter(concept).map(|series| series.total());
    ServerTotals {
        prompt_tokens: total(Concept::PromptTokens),
        generation_tokens: total(Concept::GenerationTokens),
        requests_finished: total(Concept::RequestsFinished),
        requests_rejected: total(Concept::RequestsRejected),
        preemptions: total(Concept::Preemptions),
    }
}

fn agreement(log: &ScrapeLog, tally: &ClientTally) -> TokenAgreement {
    let total = |concept| log.counter(concept).map(|series| series.total());
    let ratio =
        |server: Option<f64>, client: u64| server.filter(|_| client > 0).map(|s| s / client as f64);
    let server_prompt_tokens = total(Concept::PromptTokens);
    let server_generation_tokens = total(Concept::GenerationTokens);
    TokenAgreement {
        client_input_tokens: tally.input_tokens,
        server_prompt_tokens,
        input_ratio: ratio(server_prompt_tokens, tally.input_tokens),
        client_output_tokens: tally.output_tokens,
        server_generation_tokens,
        output_ratio: ratio(server_generation_tokens, tally.output_tokens),
    }
}

fn series(log: &ScrapeLog, windows: usize, width: Duration) -> Vec<ServerWindow> {
    let width_us = u64::try_from(width.as_micros()).unwrap_or(u64::MAX).max(1);
    let gauges = [Concept::Running, Concept::Waiting, Concept::KvCacheUsage].map(|c| log.gauge(c));
    let counters = [
        Concept::PromptTokens,
        Concept::GenerationTokens,
        Concept::RequestsFinished,
        Concept::Preemptions,
    ]
    .map(|c| log.counter(c));
    let span = log
        .scrapes
        .iter()
        .filter(|s| s.is_usable())
        .map(|s| s.at_us);
    let (first, last) = (span.clone().min(), span.max());
    (0..windows as u64)
        .map(|index| {
            let (start, end) = (index * width_us, (index + 1) * width_us);
            let mean = |samples: &Vec<(u64, f64)>| {
                let inside: Vec<f64> = samples
                    .iter()
                    .filter(|(at, _)| (start..end).contains(at))
                    .map(|(_, v)| *v)
                    .collect();
                (!inside.is_empty()).then(|| inside.iter().sum::<f64>() / inside.len() as f64)
            };
            let covered = matches!((first, last), (Some(f), Some(l)) if f < end && l > start);
            let increase = |series: &Option<super::series::CounterSeries>| {
                series
                    .as_ref()
                    .filter(|_| covered)
                    .map(|s| s.increase(start, end))
            };
            ServerWindow {
                start_secs: start as f64 / 1e6,
                running: mean(&gauges[0]),
                waiting: mean(&gauges[1]),
                kv_cache_usage: mean(&gauges[2]),
                prompt_tokens: increase(&counters[0]),
                generation_tokens: increase(&counters[1]),
                requests_finished: increase(&counters[2]),
                preemptions: increase(&counters[3]),
            }
        })
        .collect()
}

fn warnings(log: &ScrapeLog, report: &ServerReport) -> Vec<Warning> {
    let mut warnings = Vec::new();
    let url = &report.metrics_url;
    let first = |kinds: &[ProblemKind]| {
        let mut matching = log
            .scrapes
            .iter()
            .filter_map(|s| s.problem.as_ref())
            .filter(|p| kinds.contains(&p.kind));
        let count = matching.clone().count();
        matching.next().map(|p| (count, p.message.clone()))
    };
    let fatal = [
        ProblemKind::Unreachable,
        ProblemKind::TooLarge,
        ProblemKind::NoKnownMetric,
    ];
    if let Some((count, message)) = first(&fatal) {
        warnings.push(Warning::new(
            "server_metrics_failed",
            format!(
                "{count} of {} scrapes of {url} gave nothing usable (first: {message}); the \
                 server figures cover only the others",
                log.scrapes.len()
            ),
            "check that the server serves Prometheus text at --metrics-url, or raise --metrics-interval",
        ));
    }
    if let Some((count, message)) = first(&[ProblemKind::Malformed]) {
        warnings.push(Warning::new(
            "server_metrics_malformed",
            format!("{count} scrapes of {url} were partly malformed (first: {message})"),
            "check the metrics endpoint (a proxy may be cutting or rewriting it)",
        ));
    }
    if report.counter_resets > 0 {
        warnings.push(Warning::new(
            "server_counter_reset",
            format!(
                "server counters went down {} times during the run (a restart?); increases were \
                 counted from zero after each reset",
                report.counter_resets
            ),
            "check the server's logs for restarts during the run",
        ));
    }
    warnings.extend(mismatch_warning(&report.agreement));
    warnings
}

fn mismatch_warning(agreement: &TokenAgreement) -> Option<Warning> {
    let ratio = agreement.output_ratio?;
    if (ratio - 1.0).abs() <= TOKEN_MISMATCH_WARNING {
        return None;
    }
    Some(Warning::new(
        "server_token_mismatch",
        format!(
            "the server generated {:.0} tokens during the run, the client received {} ({:+.1} %)",
            agreement.server_generation_tokens.unwrap_or(0.0),
            agreement.client_output_tokens,
            (ratio - 1.0) * 100.0
        ),
        "other clients may share the server (use a dedicated one), or it counts tokens differently",
    ))
}
