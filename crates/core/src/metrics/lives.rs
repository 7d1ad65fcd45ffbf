//! [`LifeTimeline`]: each completed request's work spread evenly over its life (scheduled send
//! to end) at 10 ms resolution, so the work done inside any interval can be read back
//! afterwards, whatever order records arrived in.
//!
//! This is the throughput estimator that is unbiased whatever the phase of synchronized waves
//! (`docs/metrics.md`, "Throughput"): a request straddling an edge of the interval counts by
//! the fraction of its life inside it. In a closed loop each client's lives tile time, so the
//! work inside any interval is exactly `concurrency × length ÷ E2E`; in a stable open loop the
//! straddling fractions at both edges cancel in expectation.

use super::timeline::{CompletedWork, RESOLUTION_US, overlap};

/// Completed work per 10 ms bucket, each request spread over its life.
#[derive(Debug, Clone, Default)]
pub struct LifeTimeline {
    /// Work of lives that start or end inside a bucket, added to that bucket directly.
    partial: Vec<CompletedWork>,
    /// Changes of the per-bucket work of lives that cover whole buckets: a prefix sum gives
    /// each bucket's share.
    steps: Vec<CompletedWork>,
}

impl LifeTimeline {
    /// Adds a request that lived over `[start_us, end_us)` and completed `work`.
    pub fn add(&mut self, start_us: u64, end_us: u64, work: CompletedWork) {
        let (Some(first), Some(last)) = (bucket(start_us), bucket(end_us.saturating_sub(1))) else {
            return;
        };
        if end_us <= start_us || first >= last {
            // Within one bucket (or a zero-length life): all of it there.
            let at = bucket(end_us.max(start_us)).unwrap_or(last);
            self.grow(at);
            self.partial[at] += work;
            return;
        }
        self.grow(last);
        let per_us = 1.0 / (end_us - start_us) as f64;
        let first_end = (first as u64 + 1) * RESOLUTION_US;
        let last_start = last as u64 * RESOLUTION_US;
        self.partial[first] += work.scaled((first_end - start_us) as f64 * per_us);
        self.partial[last] += work.scaled((end_us - last_start) as f64 * per_us);
        if last > first + 1 {
            let whole = work.scaled(RESOLUTION_US as f64 * per_us);
            self.steps[first + 1] += whole;
            self.steps[last] += whole.scaled(-1.0);
        }
    }

    fn grow(&mut self, index: usize) {
        if self.partial.len() <= index {
            self.partial.resize(index + 1, CompletedWork::default());
            self.steps.resize(index + 1, CompletedWork::default());
        }
    }

    /// Work done in `[from_us, to_us)`: whole buckets fully, the two edge buckets by overlap.
    pub fn between(&self, from_us: u64, to_us: u64) -> CompletedWork {
        let mut total = CompletedWork::default();
        if to_us <= from_us {
            return total;
        }
        let first = from_us / RESOLUTION_US;
        let last = (to_us - 1) / RESOLUTION_US;
        let mut running = CompletedWork::default();
        for (index, (partial, step)) in self.partial.iter().zip(&self.steps).enumerate() {
            let index = index as u64;
            if index > last {
                break;
            }
            running += *step;
            if index < first {
                continue;
            }
            let mut bucket = running;
            bucket += *partial;
            total += bucket.scaled(overlap(index, from_us, to_us));
        }
        total
    }
}

/// The lives of one step: all of them at 10 ms resolution, and apart, the measured ones' total
/// and the warm-up ones' timeline, so an interval that holds every measured life whole counts
/// them exactly (its edges are the first measured send and the last measured end, which a
/// 10 ms bucket counted by overlap would cut short).
#[derive(Debug, Clone, Default)]
pub struct Lives {
    all: LifeTimeline,
    warmup: LifeTimeline,
    measured: CompletedWork,
}

impl Lives {
    /// Adds a request that lived over `[start_us, end_us)` and completed `work`.
    pub fn add(&mut self, start_us: u64, end_us: u64, work: CompletedWork, measured: bool) {
        self.all.add(start_us, end_us, work);
        if measured {
            self.measured += work;
        } else {
            self.warmup.add(start_us, end_us, work);
        }
    }

    /// Work done in `[from_us, to_us)`, each life by the fraction of it inside.
    pub fn between(&self, from_us: u64, to_us: u64) -> CompletedWork {
        self.all.between(from_us, to_us)
    }

    /// Work done in `[from_us, to_us)` when that interval holds every measured life whole:
    /// the measured lives' whole work, and the warm-up lives by their fraction inside.
    pub fn holding_every_measured(&self, from_us: u64, to_us: u64) -> CompletedWork {
        let mut total = self.measured;
        total += self.warmup.between(from_us, to_us);
        total
    }
}

fn bucket(at_us: u64) -> Option<usize> {
    usize::try_from(at_us / RESOLUTION_US)
        .ok()
        .filter(|i| *i < usize::MAX / 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one() -> CompletedWork {
        CompletedWork {
            requests: 1.0,
            items: 1.0,
            input_tokens: 10.0,
            output_tokens: 100.0,
            compliant_requests: 1.0,
            compliant_output_tokens: 100.0,
        }
    }

    #[test]
    fn a_life_counts_by_the_fraction_inside() {
        let mut lives = LifeTimeline::default();
        lives.add(5_000, 1_005_000, one());
        let all = lives.between(0, 2_000_000);
        assert!((all.requests - 1.0).abs() < 1e-9, "{all:?}");
        let half = lives.between(0, 505_000);
        assert!((half.requests - 0.5).abs() < 1e-9, "{half:?}");
        assert!((half.output_tokens - 50.0).abs() < 1e-6);
        let tail = lives.between(805_000, 3_000_000);
        assert!((tail.requests - 0.2).abs() < 1e-9, "{tail:?}");
    }

    #[test]
    fn tiled_lives_give_concurrency_over_life_for_any_edges() {
        // 3 clients, back-to-back requests of 730 ms each: 3 / 0.73 requests per second.
        let mut lives = LifeTimeline::default();
        for wave in 0..40u64 {
            for _client in 0..3 {
                lives.add(wave * 730_000, (wave + 1) * 730_000, one());
            }
        }
        for (from, to) in [(0, 1_460_000), (123_000, 2_987_000), (5_000_000, 9_010_000)] {
            let rate = lives.between(from, to).requests / ((to - from) as f64 / 1e6);
            assert!((rate - 3.0 / 0.73).abs() < 1e-6, "{from}..{to}: {rate}");
        }
    }

    #[test]
    fn a_point_life_counts_once() {
        let mut lives = LifeTimeline::default();
        lives.add(42_000, 42_000, one());
        assert_eq!(lives.between(40_000, 50_000).requests, 1.0);
        assert_eq!(lives.between(60_000, 70_000).requests, 0.0);
    }

    #[test]
    fn lives_held_whole_count_whole() {
        // Three 15 ms lives, not on bucket edges, and a warm-up life half inside.
        let mut lives = Lives::default();
        for start in [4_913, 5_186, 5_244] {
            lives.add(start, start + 15_000, one(), true);
        }
        lives.add(0, 9_826, one(), false);
        let (from, to) = (4_913, 20_244);
        // The buckets its edges cut count only part of the measured lives.
        let cut = lives.between(from, to).requests;
        assert!(cut < 3.3, "{cut}");
        let whole = lives.holding_every_measured(from, to);
        assert!((whole.requests - 3.5).abs() < 0.02, "{whole:?}");
        assert!((whole.output_tokens - 350.0).abs() < 2.0, "{whole:?}");
    }
}
