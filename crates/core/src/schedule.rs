//! Arrival schedules of open-loop load: absolute send offsets from the run start, precomputed
//! from the seed so a run never drifts below its rate (every offset is measured from the
//! start, not from the previous send) and the same seed always gives the same schedule.
//!
//! Poisson: exponential gaps with mean `1/rate`. Constant: offset `i/rate`. Gamma: gaps with
//! shape `k = burstiness` and scale `1/(rate·k)` (mean `1/rate`, coefficient of variation
//! `1/√k`).

use std::time::Duration;

use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;
use rand_distr::{Distribution, Exp, Gamma};

use crate::config::{Arrival, LoadSpec};
use crate::profile::RatePhase;

/// Arrival offsets from the run start, in target time.
pub type Offsets = Box<dyn Iterator<Item = Duration> + Send>;

/// The arrival offsets and client-side cap of an open-loop load — a rate, a phase profile, or
/// a replay of `replayed` (a trace's offsets; none: nothing to replay) — or `None` for closed
/// loop, whose requests are not scheduled ahead.
pub fn open_loop_arrivals(
    load: &LoadSpec,
    seed: u64,
    replayed: Option<std::sync::Arc<[Duration]>>,
) -> Option<(Offsets, Option<u32>)> {
    match *load {
        LoadSpec::Closed { .. } => None,
        LoadSpec::Open {
            rate_per_sec,
            arrival,
            max_concurrency,
        } => Some((
            Box::new(ArrivalSchedule::new(rate_per_sec, arrival, seed)),
            max_concurrency,
        )),
        LoadSpec::Profile {
            ref phases,
            arrival,
            max_concurrency,
        } => Some((
            Box::new(PhasedSchedule::new(phases.clone(), arrival, seed)),
            max_concurrency,
        )),
        LoadSpec::Replay { max_concurrency } => {
            let offsets = replayed.unwrap_or_else(|| std::sync::Arc::new([]));
            Some((
                Box::new((0..offsets.len()).map(move |i| offsets[i])),
                max_concurrency,
            ))
        }
    }
}

/// Offsets of successive arrivals from the run start.
#[derive(Debug, Clone)]
pub struct ArrivalSchedule {
    rate_per_sec: f64,
    process: Process,
    rng: Xoshiro256PlusPlus,
    index: u64,
    elapsed_secs: f64,
}

#[derive(Debug, Clone)]
enum Process {
    Constant,
    Exponential(Exp<f64>),
    Gamma(Gamma<f64>),
}

impl ArrivalSchedule {
    /// A schedule at `rate_per_sec` (must be positive and finite; gamma shape likewise).
    pub fn new(rate_per_sec: f64, arrival: Arrival, seed: u64) -> Self {
        let rate = if rate_per_sec.is_finite() && rate_per_sec > 0.0 {
            rate_per_sec
        } else {
            1.0
        };
        let process = match arrival {
            Arrival::Constant => Process::Constant,
            Arrival::Poisson => Exp::new(rate).map_or(Process::Constant, Process::Exponential),
            Arrival::Gamma { burstiness } => Gamma::new(burstiness, 1.0 / (rate * burstiness))
                .map_or(Process::Constant, Process::Gamma),
        };
        ArrivalSchedule {
            rate_per_sec: rate,
            process,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed ^ 0xa771_7a15),
            index: 0,
            elapsed_secs: 0.0,
        }
    }
}

impl Iterator for ArrivalSchedule {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let offset = match &self.process {
            Process::Constant => self.index as f64 / self.rate_per_sec,
            Process::Exponential(exp) => {
                let at = self.elapsed_secs;
                self.elapsed_secs += exp.sample(&mut self.rng);
                at
            }
            Process::Gamma(gamma) => {
                let at = self.elapsed_secs;
                self.elapsed_secs += gamma.sample(&mut self.rng);
                at
            }
        };
        self.index += 1;
        Some(Duration::from_secs_f64(offset))
    }
}

/// Offsets of a phase profile: each phase runs its own arrival process at its rate from the
/// phase's start, and the schedule ends with the last phase.
#[derive(Debug, Clone)]
pub struct PhasedSchedule {
    phases: Vec<RatePhase>,
    arrival: Arrival,
    seed: u64,
    current: usize,
    phase_start: Duration,
    inner: ArrivalSchedule,
}

impl PhasedSchedule {
    /// A schedule over `phases` (validated: non-empty, positive rates and lengths).
    pub fn new(phases: Vec<RatePhase>, arrival: Arrival, seed: u64) -> Self {
        let first_rate = phases.first().map_or(1.0, |p| p.rate_per_sec);
        PhasedSchedule {
            inner: ArrivalSchedule::new(first_rate, arrival, seed),
            phases,
            arrival,
            seed,
            current: 0,
            phase_start: Duration::ZERO,
        }
    }
}

impl Iterator for PhasedSchedule {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        loop {
            let phase = self.phases.get(self.current)?;
            let offset = self.inner.next()?;
            if offset < phase.duration {
                return Some(self.phase_start + offset);
            }
            self.phase_start += phase.duration;
            self.current += 1;
            let next = self.phases.get(self.current)?;
            let seed = self.seed ^ (self.current as u64).wrapping_mul(0x9e37_79b9);
            self.inner = ArrivalSchedule::new(next.rate_per_sec, self.arrival, seed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mean_rate(arrival: Arrival, n: usize) -> f64 {
        let offsets: Vec<Duration> = ArrivalSchedule::new(50.0, arrival, 7).take(n).collect();
        (n - 1) as f64 / offsets[n - 1].as_secs_f64()
    }

    #[test]
    fn every_process_holds_its_mean_rate() {
        assert!((mean_rate(Arrival::Constant, 1000) - 50.0).abs() < 1e-6);
        assert!((mean_rate(Arrival::Poisson, 100_000) - 50.0).abs() < 1.0);
        assert!((mean_rate(Arrival::Gamma { burstiness: 0.5 }, 100_000) - 50.0).abs() < 1.5);
    }

    #[test]
    fn first_arrival_is_at_the_start_and_offsets_never_decrease() {
        let offsets: Vec<Duration> = ArrivalSchedule::new(10.0, Arrival::Poisson, 1)
            .take(500)
            .collect();
        assert_eq!(offsets[0], Duration::ZERO);
        assert!(offsets.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn same_seed_same_schedule() {
        let a: Vec<Duration> = ArrivalSchedule::new(5.0, Arrival::Poisson, 3)
            .take(50)
            .collect();
        let b: Vec<Duration> = ArrivalSchedule::new(5.0, Arrival::Poisson, 3)
            .take(50)
            .collect();
        assert_eq!(a, b);
    }

    #[test]
    fn phases_change_the_rate_at_their_boundaries() {
        let phase = |rate: f64, secs: u64| RatePhase {
            name: String::new(),
            rate_per_sec: rate,
            duration: Duration::from_secs(secs),
        };
        let offsets: Vec<Duration> = PhasedSchedule::new(
            vec![phase(2.0, 10), phase(10.0, 5), phase(1.0, 10)],
            Arrival::Constant,
            1,
        )
        .collect();
        let count = |from: u64, to: u64| {
            offsets
                .iter()
                .filter(|o| **o >= Duration::from_secs(from) && **o < Duration::from_secs(to))
                .count()
        };
        assert_eq!(count(0, 10), 20);
        assert_eq!(count(10, 15), 50);
        assert_eq!(count(15, 25), 10);
        assert_eq!(offsets.len(), 80, "the schedule ends with the last phase");
    }

    #[test]
    fn burstier_gamma_has_more_variable_gaps() {
        let cv = |burstiness: f64| {
            let offsets: Vec<f64> = ArrivalSchedule::new(10.0, Arrival::Gamma { burstiness }, 5)
                .take(20_000)
                .map(|d| d.as_secs_f64())
                .collect();
            let gaps: Vec<f64> = offsets.windows(2).map(|w| w[1] - w[0]).collect();
            let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
            let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
            var.sqrt() / mean
        };
        assert!(cv(0.25) > 1.7 && cv(4.0) < 0.6, "{} {}", cv(0.25), cv(4.0));
    }
}
