//! Recovery after overload, from a phase profile's time series: how big a backlog the
//! overload phase built, how long after it ended the queue took to drain back to its nominal
//! level, and how long until requests met the SLO again.
//!
//! * overload phase: the phase with the highest rate, with a phase before and after it;
//! * baseline: mean in-flight over the second half of the phase before it;
//! * backlog: in-flight at the end of the overload minus the baseline;
//! * drained: the end of the first window after the overload whose in-flight is within
//!   max(1, 10 %) of the baseline;
//! * back within SLO: the start of the first window after the overload from which three
//!   consecutive windows have an SLO attainment (by arrival) of at least min(95 %, the nominal
//!   phase's attainment).

use super::windows::WindowReport;
use crate::report::phases::RatePhase;
pub use crate::report::windows::RecoveryReport;

/// Windows needed in a row to call the SLO recovered.
const CONSECUTIVE: usize = 3;

/// The recovery of `rows` (windows of `width_secs`) under `phases`, when the profile has an
/// overload phase with phases before and after it.
pub fn recovery(
    rows: &[WindowReport],
    width_secs: f64,
    phases: &[RatePhase],
) -> Option<RecoveryReport> {
    let (peak, before_start, overload_start) = overload(phases)?;
    let overload_end = overload_start + phases[peak].duration.as_secs_f64();
    let window_end = |w: &WindowReport| w.start_secs + width_secs;
    let baseline_rows: Vec<&WindowReport> = rows
        .iter()
        .filter(|w| {
            w.start_secs >= (before_start + overload_start) / 2.0 && window_end(w) <= overload_start
        })
        .collect();
    let baseline = mean(baseline_rows.iter().map(|w| w.in_flight as f64))?;
    let at_end = rows
        .iter()
        .rev()
        .find(|w| window_end(w) <= overload_end + 1e-9)?
        .in_flight as f64;
    let after: Vec<&WindowReport> = rows
        .iter()
        .filter(|w| w.start_secs >= overload_end - 1e-9)
        .collect();
    let tolerance = (0.1 * baseline).max(1.0);
    let drain_secs = after
        .iter()
        .find(|w| w.in_flight as f64 <= baseline + tolerance)
        .map(|w| window_end(w) - overload_end);
    let slo_recovery_secs =
        mean(baseline_rows.iter().filter_map(|w| w.slo_attained)).and_then(|nominal| {
            let threshold = nominal.min(0.95);
            after
                .windows(CONSECUTIVE)
                .find(|run| {
                    run.iter()
                        .all(|w| w.slo_attained.is_some_and(|a| a >= threshold))
                })
                .map(|run| run[0].start_secs - overload_end)
        });
    Some(RecoveryReport {
        overload_phase: phases[peak].name.clone(),
        overload_start_secs: overload_start,
        overload_end_secs: overload_end,
        baseline_in_flight: baseline,
        peak_in_flight: rows.iter().map(|w| w.in_flight).max().unwrap_or(0),
        backlog_requests: (at_end - baseline).max(0.0),
        drain_secs,
        slo_recovery_secs,
    })
}

/// The overload phase (the fastest, with phases before and after it), when the phase before
/// it starts and when it starts, seconds into the profile.
fn overload(phases: &[RatePhase]) -> Option<(usize, f64, f64)> {
    let peak = (0..phases.len())
        .max_by(|&a, &b| phases[a].rate_per_sec.total_cmp(&phases[b].rate_per_sec))?;
    if peak == 0 || peak + 1 >= phases.len() {
        return None;
    }
    let starts: Vec<f64> = phases
        .iter()
        .scan(0.0, |at, phase| {
            let start = *at;
            *at += phase.duration.as_secs_f64();
            Some(start)
        })
        .collect();
    Some((peak, starts[peak - 1], starts[peak]))
}

fn mean(values: impl Iterator<Item = f64>) -> Option<f64> {
    let (sum, count) = values.fold((0.0, 0u32), |(sum, count), v| (sum + v, count + 1));
    (count > 0).then(|| sum / f64::from(count))
}
