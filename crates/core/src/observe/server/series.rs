//! Scrapes over time and the arithmetic on them: which samples a scrape keeps, counters made
//! monotonic across resets and summed over label sets, linear interpolation of counters at any
//! instant of the run, gauges combined per scrape, and histograms differenced between two
//! instants with Prometheus' `histogram_quantile` rule.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::concepts::{Combine, Concept, Kind, Source, is_known};
use super::prometheus::{self, Exposition};

/// One sample kept from a scrape (only names in the concept table are kept).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeptSample {
    /// Exposed metric name.
    pub name: String,
    /// Labels other than `le`, sorted, as `key="value"` joined by commas.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub labels: String,
    /// The `le` label of a histogram bucket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub le: Option<String>,
    /// The value (always finite).
    pub value: f64,
}

/// What went wrong with a scrape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// No answer, an HTTP error, or a timeout: nothing kept.
    Unreachable,
    /// The body exceeded the size bound: nothing kept.
    TooLarge,
    /// The body had no sample goodput knows: nothing kept.
    NoKnownMetric,
    /// Some lines were malformed (or the last line was cut): the valid samples were kept.
    Malformed,
}

/// A scrape's problem.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScrapeProblem {
    /// Class.
    pub kind: ProblemKind,
    /// What happened.
    pub message: String,
}

/// One scrape: when it was taken and what it kept. One line of `server_metrics.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scrape {
    /// When the answer arrived, µs since the run start.
    pub at_us: u64,
    /// Samples of known metrics.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<KeptSample>,
    /// What went wrong, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<ScrapeProblem>,
}

impl Scrape {
    /// A scrape that produced nothing.
    pub fn failed(at_us: u64, kind: ProblemKind, message: impl Into<String>) -> Self {
        Scrape {
            at_us,
            samples: Vec::new(),
            problem: Some(ScrapeProblem {
                kind,
                message: message.into(),
            }),
        }
    }

    /// Parses a body and keeps the samples of known metrics.
    pub fn from_body(at_us: u64, body: &[u8]) -> Self {
        let exposition = prometheus::parse(body);
        let samples = keep_known(&exposition);
        if samples.is_empty() {
            let found = exposition.samples.len();
            let message = match (&exposition.first_problem, found) {
                (Some((line, problem)), 0) => {
                    format!("not Prometheus text (line {line}: {problem})")
                }
                (_, 0) => "no samples".to_string(),
                _ => {
                    format!("{found} samples, none of vLLM, SGLang, TGI, llama.cpp or DCGM metrics")
                }
            };
            return Scrape::failed(at_us, ProblemKind::NoKnownMetric, message);
        }
        Scrape {
            at_us,
            samples,
            problem: partial_problem(&exposition),
        }
    }

    /// Whether the scrape kept anything.
    pub fn is_usable(&self) -> bool {
        !self.samples.is_empty()
    }
}

fn partial_problem(exposition: &Exposition) -> Option<ScrapeProblem> {
    let mut parts = Vec::new();
    if exposition.malformed_lines > 0 {
        let first = exposition
            .first_problem
            .as_ref()
            .map(|(line, problem)| format!(" (first at line {line}: {problem})"))
            .unwrap_or_default();
        parts.push(format!(
            "{} malformed lines skipped{first}",
            exposition.malformed_lines
        ));
    }
    if exposition.missing_final_newline {
        parts.push("the body did not end with a newline; its last line was dropped".into());
    }
    if exposition.too_many_samples {
        parts.push(format!(
            "more than {} samples; the rest was dropped",
            prometheus::MAX_SAMPLES
        ));
    }
    (!parts.is_empty()).then(|| ScrapeProblem {
        kind: ProblemKind::Malformed,
        message: parts.join("; "),
    })
}

fn keep_known(exposition: &Exposition) -> Vec<KeptSample> {
    exposition
        .samples
        .iter()
        .filter(|sample| sample.value.is_finite() && is_known(&sample.name).is_some())
        .map(|sample| {
            let mut labels: Vec<&(String, String)> = sample
                .labels
                .iter()
                .filter(|(key, _)| key != "le")
                .collect();
            labels.sort();
            let labels = labels
                .iter()
                .map(|(key, value)| format!("{key}=\"{}\"", value.replace('"', "\\\"")))
                .collect::<Vec<_>>()
                .join(",");
            KeptSample {
                name: sample.name.clone(),
                labels,
                le: sample.label("le").map(str::to_string),
                value: sample.value,
            }
        })
        .collect()
}

/// A counter over the run: monotonic (resets folded in), summed over label sets, one value
/// per usable scrape.
#[derive(Debug, Clone, PartialEq)]
pub struct CounterSeries {
    /// Scrape times, µs since the run start.
    pub times_us: Vec<u64>,
    /// Values at those times.
    pub values: Vec<f64>,
    /// Resets seen (a value below the previous one).
    pub resets: u64,
}

impl CounterSeries {
    /// The value at `at_us`, interpolated linearly between scrapes and clamped to the span.
    pub fn at(&self, at_us: u64) -> f64 {
        interpolate(&self.times_us, &self.values, at_us)
    }

    /// Increase from `from_us` to `to_us` (both clamped to the scraped span).
    pub fn increase(&self, from_us: u64, to_us: u64) -> f64 {
        (self.at(to_us) - self.at(from_us)).max(0.0)
    }

    /// Increase from the first to the last scrape.
    pub fn total(&self) -> f64 {
        match (self.values.first(), self.values.last()) {
            (Some(first), Some(last)) => last - first,
            _ => 0.0,
        }
    }
}

/// A histogram over the run: cumulative bucket counts per usable scrape.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSeries {
    /// Upper bounds, ascending; the last is `+Inf`.
    pub bounds: Vec<f64>,
    /// Per bound, the cumulative count over time.
    pub buckets: Vec<CounterSeries>,
    /// Sum of observations over time.
    pub sum: CounterSeries,
    /// Observations over time.
    pub count: CounterSeries,
}

/// A histogram's change between two instants.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramDelta {
    /// Upper bounds, ascending (last `+Inf`).
    pub bounds: Vec<f64>,
    /// Cumulative counts per bound.
    pub cumulative: Vec<f64>,
    /// Sum of observations.
    pub sum: f64,
    /// Observations.
    pub count: f64,
}

impl HistogramSeries {
    /// The observations made between `from_us` and `to_us`.
    pub fn delta(&self, from_us: u64, to_us: u64) -> HistogramDelta {
        HistogramDelta {
            bounds: self.bounds.clone(),
            cumulative: self
                .buckets
                .iter()
                .map(|bucket| bucket.increase(from_us, to_us))
                .collect(),
            sum: self.sum.increase(from_us, to_us),
            count: self.count.increase(from_us, to_us),
        }
    }
}

impl HistogramDelta {
    /// Mean observation (`sum / count`), when anything was observed.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0.0).then(|| self.sum / self.count)
    }

    /// The bucket `(lower, upper)` holding the `q`-quantile (rank `⌈q · count⌉`): `upper` is
    /// `None` in the `+Inf` bucket, `lower` is 0 for the first bucket. Prometheus'
    /// `histogram_quantile` interpolates inside the bucket; that invents resolution the
    /// buckets do not have, so goodput reports the bucket.
    pub fn quantile_bucket(&self, q: f64) -> Option<(f64, Option<f64>)> {
        let total = *self.cumulative.last()?;
        if total <= 0.0 {
            return None;
        }
        let rank = (q.clamp(0.0, 1.0) * total).ceil().max(1.0);
        let index = self.cumulative.iter().position(|&c| c >= rank)?;
        let upper = self.bounds[index];
        let lower = match index {
            0 => 0.0_f64.min(upper),
            _ => self.bounds[index - 1],
        };
        Some((lower, upper.is_finite().then_some(upper)))
    }
}

/// All scrapes of a run, in time order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScrapeLog {
    /// Every scrape, failed ones included.
    pub scrapes: Vec<Scrape>,
}

impl ScrapeLog {
    fn usable(&self) -> impl Iterator<Item = &Scrape> {
        self.scrapes.iter().filter(|scrape| scrape.is_usable())
    }

    /// Usable scrapes.
    pub fn usable_count(&self) -> usize {
        self.usable().count()
    }

    /// The first source of `concept` that any scrape exposes.
    pub fn source_of(&self, concept: Concept) -> Option<&'static Source> {
        let names: BTreeSet<&str> = self
            .usable()
            .flat_map(|scrape| scrape.samples.iter().map(|s| s.name.as_str()))
            .collect();
        concept
            .sources()
            .iter()
            .find(|source| match concept.kind() {
                Kind::Histogram => names.contains(format!("{}_count", source.name).as_str()),
                _ => names.contains(source.name),
            })
    }

    /// A gauge's combined value per usable scrape that exposed it: `(at_us, value)`.
    pub fn gauge(&self, concept: Concept) -> Vec<(u64, f64)> {
        let Some(source) = self.source_of(concept) else {
            return Vec::new();
        };
        self.usable()
            .filter_map(|scrape| {
                let values: Vec<f64> = scrape
                    .samples
                    .iter()
                    .filter(|s| s.name == source.name)
                    .map(|s| s.value)
                    .collect();
                if values.is_empty() {
                    return None;
                }
                let sum: f64 = values.iter().sum();
                let value = match concept.combine() {
                    Combine::Sum => sum,
                    Combine::Mean => sum / values.len() as f64,
                };
                Some((scrape.at_us, value))
            })
            .collect()
    }

    /// A counter over the run, or `None` when the server does not expose it.
    pub fn counter(&self, concept: Concept) -> Option<CounterSeries> {
        let source = self.source_of(concept)?;
        Some(self.counter_named(source.name, None))
    }

    /// A histogram over the run, or `None` when the server does not expose it.
    pub fn histogram(&self, concept: Concept) -> Option<HistogramSeries> {
        let source = self.source_of(concept)?;
        let bucket_name = format!("{}_bucket", source.name);
        let mut bounds: Vec<(f64, String)> = self
            .usable()
            .flat_map(|scrape| scrape.samples.iter())
            .filter(|s| s.name == bucket_name)
            .filter_map(|s| {
                let le = s.le.as_ref()?;
                Some((parse_bound(le)?, le.clone()))
            })
            .collect();
        bounds.sort_by(|a, b| a.0.total_cmp(&b.0));
        bounds.dedup_by(|a, b| a.0 == b.0);
        let buckets = bounds
            .iter()
            .map(|(_, le)| self.counter_named(&bucket_name, Some(le)))
            .collect();
        Some(HistogramSeries {
            bounds: bounds.into_iter().map(|(bound, _)| bound).collect(),
            buckets,
            sum: self.counter_named(&format!("{}_sum", source.name), None),
            count: self.counter_named(&format!("{}_count", source.name), None),
        })
    }

    /// The counter `name` (optionally one `le`), each label set made monotonic, then summed.
    /// A label set that appears after the first scrape started at 0 (created during the
    /// run); one that disappears keeps its last value.
    fn counter_named(&self, name: &str, le: Option<&str>) -> CounterSeries {
        let mut times_us = Vec::new();
        let mut tracks: BTreeMap<&str, Track> = BTreeMap::new();
        let mut values = Vec::new();
        let mut resets = 0;
        for scrape in self.usable() {
            times_us.push(scrape.at_us);
            for sample in &scrape.samples {
                if sample.name != name || (le.is_some() && sample.le.as_deref() != le) {
                    continue;
                }
                let track = tracks.entry(&sample.labels).or_default();
                if sample.value < track.last_raw {
                    track.offset += track.last_raw;
                    resets += 1;
                }
                track.last_raw = sample.value;
            }
            values.push(tracks.values().map(|t| t.last_raw + t.offset).sum());
        }
        CounterSeries {
            times_us,
            values,
            resets,
        }
    }

    /// Resets seen over every counter the log holds.
    pub fn counter_resets(&self) -> u64 {
        let counters = Concept::ALL
            .iter()
            .filter(|c| c.kind() == Kind::Counter)
            .filter_map(|c| self.counter(*c))
            .map(|series| series.resets);
        let histograms = Concept::ALL
            .iter()
            .filter(|c| c.kind() == Kind::Histogram)
            .filter_map(|c| self.histogram(*c))
            .map(|h| h.count.resets);
        counters.chain(histograms).sum()
    }
}

#[derive(Debug, Default)]
struct Track {
    last_raw: f64,
    offset: f64,
}

fn parse_bound(le: &str) -> Option<f64> {
    match le {
        "+Inf" | "Inf" | "inf" | "+inf" => Some(f64::INFINITY),
        _ => le.parse::<f64>().ok().filter(|v| !v.is_nan()),
    }
}

/// Linear interpolation of `values` (at `times`, ascending) at `at`, clamped to the ends.
fn interpolate(times: &[u64], values: &[f64], at: u64) -> f64 {
    let (Some(&first), Some(&last)) = (times.first(), times.last()) else {
        return 0.0;
    };
    if at <= first {
        return values[0];
    }
    if at >= last {
        return values[values.len() - 1];
    }
    let after = times.partition_point(|&t| t <= at);
    let (t0, t1) = (times[after - 1], times[after]);
    let (v0, v1) = (values[after - 1], values[after]);
    if t1 == t0 {
        return v1;
    }
    v0 + (v1 - v0) * (at - t0) as f64 / (t1 - t0) as f64
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn scrape(at_us: u64, body: &str) -> Scrape {
        Scrape::from_body(at_us, body.as_bytes())
    }

    #[test]
    fn counters_are_summed_over_labels_and_survive_resets() {
        let log = ScrapeLog {
            scrapes: vec![
                scrape(
                    0,
                    "vllm:generation_tokens_total{engine=\"0\"} 100\nvllm:generation_tokens_total{engine=\"1\"} 50\n",
                ),
                scrape(
                    1_000_000,
                    "vllm:generation_tokens_total{engine=\"0\"} 160\nvllm:generation_tokens_total{engine=\"1\"} 70\n",
                ),
                // engine 0 restarted: counts from 0 again.
                scrape(
                    2_000_000,
                    "vllm:generation_tokens_total{engine=\"0\"} 30\nvllm:generation_tokens_total{engine=\"1\"} 90\n",
                ),
                Scrape::failed(2_500_000, ProblemKind::Unreachable, "refused"),
            ],
        };
        let series = log.counter(Concept::GenerationTokens).unwrap();
        // After the reset engine 0 counts on from 160: 160 + 30 + 90 = 280.
        assert_eq!(series.values, vec![150.0, 230.0, 280.0]);
        assert_eq!(series.resets, 1);
        assert_eq!(series.total(), 130.0);
        // Linear in between (190 → 255), clamped outside.
        assert_eq!(series.increase(500_000, 1_500_000), 65.0);
        assert_eq!(series.increase(0, 9_000_000), 130.0);
    }

    #[test]
    fn a_label_set_created_during_the_run_counts_from_zero() {
        let log = ScrapeLog {
            scrapes: vec![
                scrape(
                    0,
                    "vllm:request_success_total{finished_reason=\"length\"} 5\n",
                ),
                scrape(
                    10,
                    "vllm:request_success_total{finished_reason=\"length\"} 7\nvllm:request_success_total{finished_reason=\"abort\"} 2\n",
                ),
            ],
        };
        assert_eq!(log.counter(Concept::RequestsFinished).unwrap().total(), 4.0);
    }

    #[test]
    fn gauges_combine_by_sum_or_mean() {
        let log = ScrapeLog {
            scrapes: vec![scrape(
                7,
                "vllm:num_requests_running{engine=\"0\"} 3\nvllm:num_requests_running{engine=\"1\"} 5\n\
                 vllm:kv_cache_usage_perc{engine=\"0\"} 0.2\nvllm:kv_cache_usage_perc{engine=\"1\"} 0.4\n",
            )],
        };
        assert_eq!(log.gauge(Concept::Running), vec![(7, 8.0)]);
        let kv = log.gauge(Concept::KvCacheUsage);
        assert!((kv[0].1 - 0.3).abs() < 1e-12);
        assert!(log.gauge(Concept::Waiting).is_empty());
    }

    #[test]
    fn histogram_quantiles_follow_prometheus() {
        let body = |n: [u32; 4], sum: f64| {
            format!(
                "h_ttft_bucket{{le=\"0.1\"}} {}\nh_ttft_bucket{{le=\"0.5\"}} {}\nh_ttft_bucket{{le=\"1.0\"}} {}\nh_ttft_bucket{{le=\"+Inf\"}} {}\nh_ttft_sum {sum}\nh_ttft_count {}\n",
                n[0], n[1], n[2], n[3], n[3]
            )
            .replace("h_ttft", "vllm:time_to_first_token_seconds")
        };
        let log = ScrapeLog {
            scrapes: vec![
                scrape(0, &body([5, 5, 5, 5], 0.2)),
                scrape(1_000, &body([5, 55, 95, 105], 40.2)),
            ],
        };
        let delta = log.histogram(Concept::Ttft).unwrap().delta(0, 1_000);
        assert_eq!(delta.count, 100.0);
        assert_eq!(delta.mean(), Some(0.4));
        // Cumulative [0, 50, 90, 100]: rank 50 and rank 25 lie in (0.1, 0.5] — the bucket,
        // not a value interpolated inside it.
        assert_eq!(delta.quantile_bucket(0.5), Some((0.1, Some(0.5))));
        assert_eq!(delta.quantile_bucket(0.25), Some((0.1, Some(0.5))));
        assert_eq!(delta.quantile_bucket(0.9), Some((0.5, Some(1.0))));
        // rank 99 lies in +Inf: above the highest finite bound, with no upper bound.
        assert_eq!(delta.quantile_bucket(0.99), Some((1.0, None)));
    }

    #[test]
    fn unknown_and_garbage_bodies_keep_nothing_and_say_why() {
        let garbage = scrape(0, "<html>\n");
        assert!(!garbage.is_usable());
        assert_eq!(
            garbage.problem.as_ref().unwrap().kind,
            ProblemKind::NoKnownMetric
        );
        let foreign = scrape(0, "process_cpu_seconds_total 4\n");
        assert!(foreign.problem.unwrap().message.contains("none of vLLM"));
        let partial = scrape(
            0,
            "vllm:num_requests_running 1\n}{\nvllm:num_requests_waiting 2",
        );
        assert_eq!(partial.samples.len(), 1);
        assert_eq!(partial.problem.unwrap().kind, ProblemKind::Malformed);
    }
}
