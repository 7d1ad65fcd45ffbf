//! The calibration before a rate search: a short closed-loop run at
//! [`CALIBRATION_CONCURRENCY`] whose throughput places the first probe (just under it), and
//! the warnings a report drops about that step (a throughput estimate, judged on nothing).

use std::time::Duration;

use super::Dimension;
use crate::config::{LoadSpec, RunConfig, Warmup};
use crate::report::Warning;

/// Concurrency of the calibration run, and the first concurrency probed without a given start.
pub const CALIBRATION_CONCURRENCY: u32 = 16;

/// Requests the calibration sends: five per slot after as many warm-up requests as slots.
pub const CALIBRATION_REQUESTS: u64 = CALIBRATION_CONCURRENCY as u64 * 5;

/// The calibration run around `base`: closed loop at [`CALIBRATION_CONCURRENCY`],
/// [`CALIBRATION_REQUESTS`] requests of which the first [`CALIBRATION_CONCURRENCY`] warm up,
/// ended after `duration` (target time) if given.
pub fn calibration_config(base: &RunConfig, duration: Option<Duration>) -> RunConfig {
    let concurrency = CALIBRATION_CONCURRENCY;
    RunConfig {
        load: LoadSpec::Closed { concurrency },
        max_requests: Some(CALIBRATION_REQUESTS),
        duration,
        warmup: Warmup::Requests(u64::from(concurrency)),
        ..base.clone()
    }
}

/// Where a capacity search starts, live or in virtual time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SearchStart {
    /// At this load: the one the user gave, or, searching concurrency,
    /// [`CALIBRATION_CONCURRENCY`].
    At(f64),
    /// Just under the throughput of a calibration run ([`calibration_config`], then
    /// [`calibrated_start`]): a rate search without a given start.
    Calibrate,
}

impl SearchStart {
    /// The start of a search over `dimension` from `given` (`--start`).
    pub fn choose(given: Option<f64>, dimension: Dimension) -> SearchStart {
        match (given, dimension) {
            (Some(start), _) => SearchStart::At(start),
            (None, Dimension::Concurrency) => SearchStart::At(f64::from(CALIBRATION_CONCURRENCY)),
            (None, Dimension::Rate) => SearchStart::Calibrate,
        }
    }
}

/// The fraction of the calibration's throughput a rate search starts at.
///
/// **Why just under it.** No open loop is stable above the rate the server completes flat
/// out, so the calibration's throughput is (within its own measurement) the ceiling of every
/// capacity. Proving a load passes costs hundreds of requests (693 at 99 %/99 %, however far
/// below the capacity the load is), refuting one a few dozen: a probe that passes is paid for
/// in time inversely to its load, so the cheapest search passes as few loads, as high, as it
/// can. Starting at half the throughput (before 2026-12-06) spent a pass at half the capacity
/// — 139 s of a 290 s search against 4 slots × 0.4 s — and bracketed upwards through the
/// capacity itself; starting 5 % under the ceiling (the search's default tolerance, and more
/// than a closed loop's throughput is off by) passes once near the capacity when the server
/// is throughput-bound and fails cheaply, then halves, when the latency target binds first.
pub const CALIBRATED_START_FRACTION: f64 = 0.95;

/// Where a rate search starts after a calibration that completed `requests_per_sec`:
/// [`CALIBRATED_START_FRACTION`] of it; `None` when the calibration completed nothing.
pub fn calibrated_start(requests_per_sec: f64) -> Option<f64> {
    (requests_per_sec > 0.0).then_some(requests_per_sec * CALIBRATED_START_FRACTION)
}

/// Drops the warnings about the calibration step (a throughput estimate, judged on nothing):
/// its sample size, its closed loop in a rate search.
pub fn drop_calibration_warnings(
    warnings: &mut Vec<Warning>,
    dimension: Dimension,
    first_probe_step: usize,
) {
    warnings.retain(|w| {
        let about_probes = w.step.is_none_or(|step| step >= first_probe_step);
        about_probes && !(dimension == Dimension::Rate && w.code == "slo_in_closed_loop")
    });
}

/// [`drop_calibration_warnings`] for several searches in one report (`goodput capacity
/// --repeats`): `searches` gives each search's first step and first probe step, the steps
/// between them its calibration.
pub fn drop_searches_calibration_warnings(
    warnings: &mut Vec<Warning>,
    dimension: Dimension,
    searches: &[(usize, usize)],
) {
    warnings.retain(|w| {
        let calibration = w.step.is_some_and(|step| {
            searches
                .iter()
                .any(|(first, probes)| (*first..*probes).contains(&step))
        });
        let closed_loop = dimension == Dimension::Rate && w.code == "slo_in_closed_loop";
        !(calibration || closed_loop)
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_given_start_wins_and_only_a_rate_search_calibrates() {
        use SearchStart::{At, Calibrate};
        assert_eq!(SearchStart::choose(Some(3.0), Dimension::Rate), At(3.0));
        assert_eq!(
            SearchStart::choose(Some(5.0), Dimension::Concurrency),
            At(5.0)
        );
        assert_eq!(SearchStart::choose(None, Dimension::Concurrency), At(16.0));
        assert_eq!(SearchStart::choose(None, Dimension::Rate), Calibrate);
    }

    #[test]
    fn calibration_is_closed_loop_and_starts_just_under_its_throughput() {
        let base = RunConfig::default();
        let config = calibration_config(&base, None);
        assert_eq!(config.load, LoadSpec::Closed { concurrency: 16 });
        assert_eq!(config.max_requests, Some(80));
        assert_eq!(config.warmup, Warmup::Requests(16));
        assert_eq!(calibrated_start(20.0), Some(19.0));
        assert_eq!(calibrated_start(0.0), None);
    }
}
