//! A run's TTFT, TPOT and E2E medians read from its journal (`requests.jsonl`), each with the
//! range the true median lies in at 95 % confidence (order statistics: no assumption on the
//! latencies' shape, which on a server with slots often has two modes).

use std::path::Path;
use std::time::Duration;

use goodput_core::decide::capacity::early_stopping::quantile_ranks;
use goodput_core::record::{Phase, RequestRecord};

/// Confidence of [`Median::low`]..[`Median::high`].
pub const CONFIDENCE: f64 = 0.95;

/// One latency's median over a run's measured requests, ms, and its 95 % range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Median {
    /// The median as goodput reports it: nearest rank, the smallest value with at least half
    /// the requests at or below it.
    pub value: f64,
    /// The lowest value the true median may take at [`CONFIDENCE`].
    pub low: f64,
    /// The highest.
    pub high: f64,
}

impl Median {
    /// The median of `values` (any order) and its range; `None` for too few to bound it.
    pub fn of(mut values: Vec<f64>) -> Option<Median> {
        values.sort_by(f64::total_cmp);
        let n = values.len() as u64;
        let (lo, hi) = quantile_ranks(n, 0.5, CONFIDENCE)?;
        let at = |rank: u64| values[usize::try_from(rank - 1).unwrap()];
        Some(Median {
            value: at(n.div_ceil(2)),
            low: at(lo),
            high: at(hi),
        })
    }

    /// Whether `predicted` is within `tolerance` (a fraction) of some value the median may
    /// take: `(1 − tolerance) · low ≤ predicted ≤ (1 + tolerance) · high`.
    pub fn admits(&self, predicted: f64, tolerance: f64) -> bool {
        self.admits_range((predicted, predicted), tolerance)
    }

    /// Whether some value of the predictions `low..=high` is within `tolerance` of some value
    /// the median may take.
    pub fn admits_range(&self, (low, high): (f64, f64), tolerance: f64) -> bool {
        (1.0 - tolerance) * self.low <= high && low <= (1.0 + tolerance) * self.high
    }
}

/// The measured (not warm-up), successful requests of the journal at `path`.
pub fn measured_records(path: &Path) -> Vec<RequestRecord> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .map(|line| serde_json::from_str::<RequestRecord>(line).unwrap())
        .filter(|r| r.phase == Phase::Measure && r.is_ok())
        .collect()
}

/// TTFT, TPOT and E2E medians (ms) of the journal at `path`, by goodput's own definitions
/// (`RequestRecord::ttft`, `tpot`, `e2e`).
pub fn medians(path: &Path) -> [Median; 3] {
    let records = measured_records(path);
    let ms = |of: fn(&RequestRecord) -> Option<Duration>| {
        let values: Vec<f64> = records
            .iter()
            .filter_map(of)
            .map(|d| d.as_secs_f64() * 1e3)
            .collect();
        let count = values.len();
        Median::of(values)
            .unwrap_or_else(|| panic!("{count} requests cannot bound a median: {path:?}"))
    };
    [
        ms(RequestRecord::ttft),
        ms(RequestRecord::tpot),
        ms(RequestRecord::e2e),
    ]
}
