//! The search over load levels: bracket by doubling (or halving) until a probe passes and a
//! higher one does not, then bisect until the bracket is narrower than the tolerance. The
//! answer is the highest *passing* load; the lowest non-passing load above it bounds it.

use serde::{Deserialize, Serialize};

/// How to search.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SearchConfig {
    /// First load probed.
    pub start: f64,
    /// Lowest load worth probing; below it the search gives up.
    pub min: f64,
    /// Highest load probed; above it the search stops with "at least max".
    pub max: f64,
    /// Stop when `(upper − lower) / lower` is at most this.
    pub tolerance: f64,
    /// Stop after this many probes.
    pub max_probes: usize,
    /// Loads are integers (concurrency).
    pub integer: bool,
}

/// Why the search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Conclusion {
    /// The bracket is within the tolerance.
    Converged,
    /// The probe budget ran out before convergence.
    ProbeLimit,
    /// Even the minimum load failed.
    BelowMinimum,
    /// The maximum load passed.
    AboveMaximum,
    /// A probe could not be run (interrupted, or the target failed).
    Aborted,
}

/// Search state: every probe's load and whether it passed.
#[derive(Debug, Clone)]
pub struct Search {
    config: SearchConfig,
    probes: Vec<(f64, bool)>,
}

impl Search {
    /// A search that has probed nothing yet.
    pub fn new(config: SearchConfig) -> Self {
        Search {
            config,
            probes: Vec::new(),
        }
    }

    /// Notes a probe's result.
    pub fn record(&mut self, load: f64, passed: bool) {
        self.probes.push((load, passed));
    }

    /// Highest passing load.
    pub fn lower(&self) -> Option<f64> {
        self.probes
            .iter()
            .filter(|p| p.1)
            .map(|p| p.0)
            .reduce(f64::max)
    }

    /// Lowest non-passing load above the highest passing one.
    pub fn upper(&self) -> Option<f64> {
        let lower = self.lower().unwrap_or(f64::NEG_INFINITY);
        self.probes
            .iter()
            .filter(|p| !p.1 && p.0 > lower)
            .map(|p| p.0)
            .reduce(f64::min)
    }

    fn round(&self, load: f64) -> f64 {
        if self.config.integer {
            load.round().max(1.0)
        } else {
            load
        }
    }

    /// The next load to probe, or why the search is over.
    pub fn next(&self) -> Result<f64, Conclusion> {
        if self.probes.len() >= self.config.max_probes {
            return Err(Conclusion::ProbeLimit);
        }
        let c = &self.config;
        let next = match (self.lower(), self.upper()) {
            (None, None) => c.start,
            (Some(lower), None) if lower >= c.max => return Err(Conclusion::AboveMaximum),
            (Some(lower), None) => (lower * 2.0).min(c.max),
            (None, Some(upper)) if upper <= c.min => return Err(Conclusion::BelowMinimum),
            (None, Some(upper)) => (upper / 2.0).max(c.min),
            (Some(lower), Some(upper)) => {
                if (upper - lower) / lower <= c.tolerance {
                    return Err(Conclusion::Converged);
                }
                (lower + upper) / 2.0
            }
        };
        let next = self.round(next);
        if self.probes.iter().any(|p| p.0 == next) {
            return Err(Conclusion::Converged);
        }
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(config: SearchConfig, capacity: f64) -> (Search, Conclusion) {
        let mut search = Search::new(config);
        loop {
            match search.next() {
                Ok(load) => search.record(load, load <= capacity),
                Err(conclusion) => return (search, conclusion),
            }
        }
    }

    fn rates() -> SearchConfig {
        SearchConfig {
            start: 1.0,
            min: 0.1,
            max: 10_000.0,
            tolerance: 0.05,
            max_probes: 30,
            integer: false,
        }
    }

    #[test]
    fn brackets_then_bisects_to_the_tolerance() {
        let (search, conclusion) = run(rates(), 13.7);
        assert_eq!(conclusion, Conclusion::Converged);
        let (lower, upper) = (search.lower().unwrap(), search.upper().unwrap());
        assert!(lower <= 13.7 && 13.7 < upper, "{lower} {upper}");
        assert!((upper - lower) / lower <= 0.05);
    }

    #[test]
    fn halves_when_the_start_fails_and_stops_at_the_limits() {
        let (search, conclusion) = run(
            SearchConfig {
                start: 64.0,
                ..rates()
            },
            3.0,
        );
        assert_eq!(conclusion, Conclusion::Converged);
        assert!(search.lower().unwrap() <= 3.0);
        assert_eq!(run(rates(), 0.01).1, Conclusion::BelowMinimum);
        assert_eq!(
            run(
                SearchConfig {
                    max: 100.0,
                    ..rates()
                },
                1e9
            )
            .1,
            Conclusion::AboveMaximum
        );
        assert_eq!(
            run(
                SearchConfig {
                    max_probes: 3,
                    ..rates()
                },
                13.7
            )
            .1,
            Conclusion::ProbeLimit
        );
    }

    #[test]
    fn integer_loads_for_concurrency() {
        let config = SearchConfig {
            start: 1.0,
            min: 1.0,
            max: 1024.0,
            tolerance: 0.0,
            max_probes: 40,
            integer: true,
        };
        let (search, conclusion) = run(config, 37.0);
        assert_eq!(conclusion, Conclusion::Converged);
        assert_eq!(search.lower(), Some(37.0));
        assert_eq!(search.upper(), Some(38.0));
    }
}
