//! The search over load levels: bracket by doubling (or halving) until a probe passes and a
//! higher one does not, then bisect until the bracket is narrower than the tolerance. The
//! answer is the highest *passing* load; only a *failing* (refuted or unstable) load above it
//! bounds it from above — a probe that could not be decided steers the search down but is
//! never reported as a bound.

use serde::{Deserialize, Serialize};

use super::probe::Outcome;
pub use crate::report::capacity::Conclusion;

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
    /// Stop after probing this many loads (an undecided probe's extensions count with it).
    pub max_probes: usize,
    /// Stop before a probe (or an extension) once this much target time has been spent,
    /// seconds.
    #[serde(default)]
    pub budget_secs: Option<f64>,
    /// Loads are integers (concurrency).
    pub integer: bool,
    /// A load the server cannot sustain however the search goes: a calibration run's
    /// throughput, flat out (no open loop is stable above it). Until a load above it passes,
    /// bracketing up from a pass stops just over it (`1 + 2 × tolerance` times it) instead of
    /// doubling, where a throughput-bound server fails in a few dozen requests.
    #[serde(default)]
    pub ceiling: Option<f64>,
}

impl SearchConfig {
    /// The rate search of a capacity plan, which knows no bounds of its own (`plan
    /// --simulate`): from `start` over three orders of magnitude either way, to 2 %, in at most
    /// 30 probes.
    pub fn around(start: f64) -> SearchConfig {
        SearchConfig {
            start,
            min: start / 1000.0,
            max: start * 1000.0,
            tolerance: 0.02,
            max_probes: 30,
            integer: false,
            budget_secs: None,
            ceiling: None,
        }
    }
}

/// Search state: every probe's load and outcome.
#[derive(Debug, Clone)]
pub struct Search {
    config: SearchConfig,
    probes: Vec<(f64, Outcome)>,
}

impl Search {
    /// A search that has probed nothing yet.
    pub fn new(config: SearchConfig) -> Self {
        Search {
            config,
            probes: Vec::new(),
        }
    }

    /// Notes a probe's outcome (an extension of the probe before it replaces its outcome).
    pub fn record(&mut self, load: f64, outcome: Outcome) {
        match self.probes.last_mut() {
            Some(last) if last.0 == load => last.1 = outcome,
            _ => self.probes.push((load, outcome)),
        }
    }

    /// Highest passing load.
    pub fn lower(&self) -> Option<f64> {
        self.probes
            .iter()
            .filter(|p| p.1 == Outcome::Pass)
            .map(|p| p.0)
            .reduce(f64::max)
    }

    /// Lowest load above the highest passing one whose outcome is one of `outcomes`.
    fn lowest_above_lower(&self, failed_only: bool) -> Option<f64> {
        let lower = self.lower().unwrap_or(f64::NEG_INFINITY);
        self.probes
            .iter()
            .filter(|p| p.0 > lower)
            .filter(|p| p.1 == Outcome::Fail || (!failed_only && p.1 == Outcome::Inconclusive))
            .map(|p| p.0)
            .reduce(f64::min)
    }

    /// Lowest *failing* load above the highest passing one: the upper bound.
    pub fn upper(&self) -> Option<f64> {
        self.lowest_above_lower(true)
    }

    /// Lowest load above the highest passing one that did not pass (failed or undecided):
    /// where the search bisects towards.
    pub fn ceiling(&self) -> Option<f64> {
        self.lowest_above_lower(false)
    }

    /// Loads above the highest passing one whose probes could not be decided, below the upper
    /// bound, ascending.
    pub fn undecided(&self) -> Vec<f64> {
        let lower = self.lower().unwrap_or(f64::NEG_INFINITY);
        let upper = self.upper().unwrap_or(f64::INFINITY);
        let mut loads: Vec<f64> = self
            .probes
            .iter()
            .filter(|p| p.1 == Outcome::Inconclusive && p.0 > lower && p.0 < upper)
            .map(|p| p.0)
            .collect();
        loads.sort_by(f64::total_cmp);
        loads
    }

    /// Probes recorded (an extension counts with the probe it extends).
    pub fn probes(&self) -> usize {
        self.probes.len()
    }

    /// `conclusion`, unless the bracket closed on an undecided probe rather than a failing one.
    fn closed(&self, conclusion: Conclusion) -> Conclusion {
        if self.ceiling() != self.upper() {
            Conclusion::Undecided
        } else {
            conclusion
        }
    }

    fn round(&self, load: f64) -> f64 {
        if self.config.integer {
            load.round().max(1.0)
        } else {
            load
        }
    }

    /// The load to bracket up to from the highest pass `lower` when nothing above it failed:
    /// twice it, or, below the [`SearchConfig::ceiling`], just over the ceiling.
    fn above(&self, lower: f64) -> f64 {
        let c = &self.config;
        let doubled = lower * 2.0;
        let next = match c.ceiling {
            Some(ceiling) if lower < ceiling => doubled.min(ceiling * (1.0 + 2.0 * c.tolerance)),
            _ => doubled,
        };
        next.min(c.max)
    }

    /// The next load to probe, or why the search is over.
    pub fn next(&self) -> Result<f64, Conclusion> {
        if self.probes.len() >= self.config.max_probes {
            return Err(Conclusion::ProbeLimit);
        }
        let c = &self.config;
        let next = match (self.lower(), self.ceiling()) {
            (None, None) => c.start,
            (Some(lower), None) if lower >= c.max => return Err(Conclusion::AboveMaximum),
            (Some(lower), None) => self.above(lower),
            (None, Some(upper)) if upper <= c.min => {
                return Err(self.closed(Conclusion::BelowMinimum));
            }
            (None, Some(upper)) => (upper / 2.0).max(c.min),
            (Some(lower), Some(upper)) => {
                if (upper - lower) / lower <= c.tolerance {
                    return Err(self.closed(Conclusion::Converged));
                }
                (lower + upper) / 2.0
            }
        };
        let next = self.round(next);
        if self.probes.iter().any(|p| p.0 == next) {
            return Err(self.closed(Conclusion::Converged));
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
                Ok(load) => search.record(
                    load,
                    if load <= capacity {
                        Outcome::Pass
                    } else {
                        Outcome::Fail
                    },
                ),
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
            budget_secs: None,
            ceiling: None,
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
    fn below_a_ceiling_it_brackets_just_over_it_then_doubles_again() {
        // Started just under a calibration's 10 req/s: a throughput-bound server (capacity
        // 10) is bracketed by one step to 11, not 19; a server that passes 11 (the
        // calibration underestimated it) is doubled from there.
        let ceiling = SearchConfig {
            start: 9.5,
            ceiling: Some(10.0),
            ..rates()
        };
        let (search, conclusion) = run(ceiling, 10.0);
        assert_eq!(conclusion, Conclusion::Converged);
        let loads: Vec<f64> = search.probes.iter().map(|p| p.0).collect();
        assert_eq!(loads[..2], [9.5, 11.0]);
        assert!(search.lower().unwrap() <= 10.0 && search.upper().unwrap() > 10.0);
        let (search, _) = run(ceiling, 50.0);
        let loads: Vec<f64> = search.probes.iter().map(|p| p.0).collect();
        assert_eq!(loads[..4], [9.5, 11.0, 22.0, 44.0]);
        assert!(search.lower().unwrap() <= 50.0 && search.upper().unwrap() > 50.0);
    }

    #[test]
    fn an_undecided_probe_steers_down_but_never_bounds() {
        // Capacity 13.7, but every probe in (13.7, 20] is undecided.
        let mut search = Search::new(rates());
        let conclusion = loop {
            match search.next() {
                Ok(load) => search.record(
                    load,
                    match load {
                        l if l <= 13.7 => Outcome::Pass,
                        l if l <= 20.0 => Outcome::Inconclusive,
                        _ => Outcome::Fail,
                    },
                ),
                Err(conclusion) => break conclusion,
            }
        };
        assert_eq!(conclusion, Conclusion::Undecided);
        // Nothing was refuted: no upper bound, however close the undecided probes came.
        let lower = search.lower().unwrap();
        assert!(
            lower <= 13.7 && search.upper().is_none(),
            "{lower} {:?}",
            search.upper()
        );
        assert!(!search.undecided().is_empty());
        assert!(search.undecided().iter().all(|l| *l > 13.7 && *l <= 20.0));
    }

    #[test]
    fn an_extension_replaces_the_outcome_it_extends() {
        let mut search = Search::new(rates());
        search.record(4.0, Outcome::Inconclusive);
        search.record(4.0, Outcome::Fail);
        assert_eq!(search.upper(), Some(4.0));
        assert_eq!(search.probes(), 1);
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
            budget_secs: None,
            ceiling: None,
        };
        let (search, conclusion) = run(config, 37.0);
        assert_eq!(conclusion, Conclusion::Converged);
        assert_eq!(search.lower(), Some(37.0));
        assert_eq!(search.upper(), Some(38.0));
    }
}
