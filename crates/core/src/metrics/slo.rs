//! Service-level objectives: per-request thresholds (`ttft=500ms,tpot=50ms,e2e=2s`) that decide
//! whether a request counts toward goodput, and percentile objectives (`ttft_p99=800ms`) that
//! pass or fail a whole run. Parsed from the command-line syntax; clap-free.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::record::RequestRecord;
use crate::units::{format_duration, parse_duration};

/// A latency a threshold can apply to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LatencyMetric {
    /// Time to first token (from the scheduled send).
    Ttft,
    /// Time per output token after the first.
    Tpot,
    /// Inter-token latency (per token; percentile objectives only).
    Itl,
    /// End-to-end latency (from the scheduled send).
    E2e,
    /// Time to first answer token: the first output that is not reasoning (from the
    /// scheduled send).
    Ttfat,
}

impl LatencyMetric {
    /// The name used in flags and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            LatencyMetric::Ttft => "ttft",
            LatencyMetric::Tpot => "tpot",
            LatencyMetric::Itl => "itl",
            LatencyMetric::E2e => "e2e",
            LatencyMetric::Ttfat => "ttfat",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        match name {
            "ttft" => Some(LatencyMetric::Ttft),
            "tpot" => Some(LatencyMetric::Tpot),
            "itl" => Some(LatencyMetric::Itl),
            "e2e" | "e2el" => Some(LatencyMetric::E2e),
            "ttfat" => Some(LatencyMetric::Ttfat),
            _ => None,
        }
    }
}

/// A per-request threshold: a request complies when its `metric` is ≤ `max`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RequestThreshold {
    /// Which latency.
    pub metric: LatencyMetric,
    /// Largest compliant value.
    #[serde(with = "crate::units::serde_ms")]
    pub max: Duration,
}

/// A run-level objective: the `percentile` of `metric` must be ≤ `max`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PercentileObjective {
    /// Which latency.
    pub metric: LatencyMetric,
    /// Percentile, 0–100.
    pub percentile: f64,
    /// Largest passing value.
    #[serde(with = "crate::units::serde_ms")]
    pub max: Duration,
}

/// A complete SLO.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    /// Per-request thresholds (all must hold for a request to count as good).
    pub thresholds: Vec<RequestThreshold>,
    /// Run-level percentile objectives.
    pub objectives: Vec<PercentileObjective>,
}

/// An SLO string that cannot be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid SLO `{term}`: {reason} (expected e.g. `ttft=500ms,tpot=50ms` or `ttft_p99=800ms`)"
)]
pub struct SloError {
    /// The offending term.
    pub term: String,
    /// What is wrong.
    pub reason: String,
}

impl Slo {
    /// Parses `name=duration[,name=duration…]` where `name` is `ttft`, `ttfat`, `tpot` or `e2e`
    /// (per-request) or `<metric>_p<percentile>` such as `ttft_p99`, `itl_p99.9`.
    pub fn parse(text: &str) -> Result<Slo, SloError> {
        let mut slo = Slo::default();
        for term in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let error = |reason: &str| SloError {
                term: term.to_string(),
                reason: reason.to_string(),
            };
            let (name, value) = term.split_once('=').ok_or_else(|| error("missing `=`"))?;
            let max = parse_duration(value.trim()).map_err(|e| error(&e.to_string()))?;
            let name = name.trim().to_ascii_lowercase();
            if let Some((metric, percentile)) = name.split_once("_p") {
                let metric = LatencyMetric::parse(metric).ok_or_else(|| error("unknown metric"))?;
                let percentile: f64 = percentile.parse().map_err(|_| error("bad percentile"))?;
                if !(percentile > 0.0 && percentile <= 100.0) {
                    return Err(error("percentile must be in (0, 100]"));
                }
                slo.objectives.push(PercentileObjective {
                    metric,
                    percentile,
                    max,
                });
            } else {
                let metric = LatencyMetric::parse(&name).ok_or_else(|| error("unknown metric"))?;
                if metric == LatencyMetric::Itl {
                    return Err(error(
                        "itl is per token; use a percentile objective like itl_p99",
                    ));
                }
                slo.thresholds.push(RequestThreshold { metric, max });
            }
        }
        if slo.thresholds.is_empty() && slo.objectives.is_empty() {
            return Err(SloError {
                term: text.to_string(),
                reason: "no objective given".into(),
            });
        }
        Ok(slo)
    }

    /// Whether a request meets every per-request threshold. Failed requests never do; a
    /// TPOT threshold holds vacuously for answers of fewer than two tokens.
    pub fn request_complies(&self, record: &RequestRecord) -> bool {
        if !record.is_ok() {
            return false;
        }
        self.thresholds.iter().all(|threshold| {
            let value = match threshold.metric {
                LatencyMetric::Ttft => record.ttft(),
                LatencyMetric::Ttfat => record.ttfat(),
                LatencyMetric::E2e => record.e2e(),
                LatencyMetric::Tpot => match record.tpot() {
                    Some(tpot) => Some(tpot),
                    None => return true,
                },
                LatencyMetric::Itl => return true,
            };
            value.is_some_and(|v| v <= threshold.max)
        })
    }
}

impl fmt::Display for Slo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut terms: Vec<String> = self
            .thresholds
            .iter()
            .map(|t| format!("{}={}", t.metric.as_str(), format_duration(t.max)))
            .collect();
        terms.extend(self.objectives.iter().map(|o| {
            format!(
                "{}_p{}={}",
                o.metric.as_str(),
                o.percentile,
                format_duration(o.max)
            )
        }));
        f.write_str(&terms.join(","))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn parses_thresholds_and_objectives() {
        let slo = Slo::parse("ttft=500ms, tpot=50ms,e2e=2s,ttft_p99=0.8s,itl_p99.9=100ms").unwrap();
        let reasoning = Slo::parse("ttfat=2s,ttfat_p99=3s").unwrap();
        assert_eq!(reasoning.thresholds[0].metric, LatencyMetric::Ttfat);
        assert_eq!(reasoning.to_string(), "ttfat=2s,ttfat_p99=3s");
        assert_eq!(slo.thresholds.len(), 3);
        assert_eq!(slo.thresholds[0].max, Duration::from_millis(500));
        assert_eq!(slo.objectives.len(), 2);
        assert_eq!(slo.objectives[0].max, Duration::from_millis(800));
        assert_eq!(slo.objectives[1].percentile, 99.9);
        assert_eq!(
            slo.to_string(),
            "ttft=500ms,tpot=50ms,e2e=2s,ttft_p99=800ms,itl_p99.9=100ms"
        );
    }

    #[test]
    fn rejects_what_it_cannot_use_and_says_why() {
        for (text, needle) in [
            ("ttft", "missing `=`"),
            ("ttft=5", "unit"),
            ("speed=5ms", "unknown metric"),
            ("itl=5ms", "percentile objective"),
            ("ttft_p0=5ms", "percentile must be"),
            ("", "no objective"),
        ] {
            let error = Slo::parse(text).unwrap_err().to_string();
            assert!(error.contains(needle), "{text}: {error}");
        }
    }
}
