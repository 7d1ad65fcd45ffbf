//! The stability verdict — stable, unstable or inconclusive — from the in-flight count and the
//! latency trend over the measured span (defined in `docs/metrics.md` §6).
//!
//! The span assessed runs from the end of start-up (the later of the first measured completion
//! and a quarter into the measured arrivals) to the last measured arrival, resampled into about
//! twenty intervals (never wider than the report's windows), so a 5-second run is judged as
//! surely as a minute. σ is the arrival count's spread (from the arrival process when known).
//! **Unstable**: fewer than half as many requests ended as arrived; or the server shed load
//! ([`SHED`] of the arrivals turned away with 429/503/504 or timed out); or the in-flight count grew
//! steadily (slope with t > 3, growth above 2, 3 × its residual spread, 3 × √ of the in-flight
//! count at the span's start and 3σ); or completions fell behind arrivals by more than 2σ while
//! E2E rose (t > 3, +10 % over the span). **Inconclusive**: fewer than four intervals or eight
//! arrivals, or too little data to rule out an overload of [`OVERLOAD`]. **Stable** otherwise —
//! and a closed loop is stable by construction unless its completions fell behind or the
//! server shed load (it cannot have more requests in flight than its concurrency, so no queue
//! can build).

use super::flow::{Flow, FlowPoint};
use super::trend::{Fit, LATENCY_RISE, SIGNIFICANT_T, Trend, fit};
pub use crate::report::stability::{Stability, Verdict};

/// Intervals the span is resampled into.
const TARGET_POINTS: u64 = 20;
/// Fewest intervals, and fewest arrivals, a verdict needs.
const MIN_POINTS: usize = 4;
const MIN_ARRIVALS: u64 = 8;

impl Verdict {
    /// `stable`, `unstable` or `inconclusive`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Stable => "stable",
            Verdict::Unstable => "unstable",
            Verdict::Inconclusive => "inconclusive",
        }
    }
}

/// What the assessed span showed.
struct Evidence {
    points: usize,
    arrivals: u64,
    ends: u64,
    /// Arrivals the server shed (HTTP 429/503/504) or that timed out.
    shed: u64,
    start_in_flight: f64,
    /// Standard deviation of the arrival count over the span: from the arrival process when
    /// known (√arrivals for Poisson, 1 for constant), else from the per-interval counts.
    arrival_sd: f64,
    growth: Option<Fit>,
    latency: Option<Fit>,
    /// A closed loop (stable unless its completions fell behind).
    closed: bool,
}

impl Evidence {
    fn ratio(&self) -> Option<f64> {
        (self.arrivals > 0).then(|| self.ends as f64 / self.arrivals as f64)
    }

    fn shed_ratio(&self) -> Option<f64> {
        (self.arrivals > 0).then(|| self.shed as f64 / self.arrivals as f64)
    }

    /// The server shed a material share of the arrivals: at least [`SHED`] of them, and at
    /// least [`MIN_SHED`] requests. A server that caps its queue answers 429/503 past
    /// capacity (and a client gives up on a queue that never moves), so the in-flight count
    /// stays flat and the E2E of the requests it served stops rising: the queue cannot show
    /// this overload, the shed requests do.
    fn shed_load(&self) -> bool {
        self.shed >= MIN_SHED && self.shed as f64 >= SHED * self.arrivals as f64
    }

    fn span(&self) -> f64 {
        self.growth.map_or(0.0, |f| f.span)
    }

    /// In-flight growth over the span (least squares).
    fn growth(&self) -> f64 {
        self.growth.map_or(0.0, |f| f.slope * f.span)
    }

    /// What growth chance alone could produce: 3 × the larger of a stable queue's
    /// fluctuation (its residual spread, at least √ of the in-flight count at the start) and
    /// the arrival count's own spread.
    fn noise(&self) -> f64 {
        let queue = self
            .growth
            .map_or(0.0, |f| f.residual_sd)
            .max(self.start_in_flight.max(1.0).sqrt());
        3.0 * queue.max(self.arrival_sd)
    }

    /// The in-flight count grew steadily and beyond chance.
    fn grew(&self) -> bool {
        self.growth.is_some_and(|f| {
            f.slope > 0.0 && f.t_stat > SIGNIFICANT_T && self.growth() > self.noise().max(2.0)
        })
    }

    fn shortfall(&self) -> f64 {
        self.arrivals as f64 - self.ends as f64
    }

    /// Completions fell behind arrivals by more than the arrivals' own spread allows.
    fn behind(&self) -> bool {
        self.shortfall()
            > (2.0 * self.arrival_sd)
                .max(2.0)
                .max(0.05 * self.arrivals as f64)
    }

    /// E2E rose significantly (t > 3) and materially (+10 % over the span).
    fn latency_rose(&self) -> Option<f64> {
        let fit = self.latency?;
        let rise = if fit.mean > 0.0 {
            fit.slope * fit.span / fit.mean
        } else {
            0.0
        };
        (fit.t_stat > SIGNIFICANT_T && rise > LATENCY_RISE).then_some(rise)
    }

    /// Whether the run rules out an overload of [`OVERLOAD`]: under it a FIFO queue's E2E
    /// rises by at least `OVERLOAD` seconds per second of schedule and in-flight work grows by
    /// `1 − 1/(1 + OVERLOAD)` of the arrivals; the run must put either out of reach (upper
    /// bound at 2 standard errors).
    fn rules_out_overload(&self) -> bool {
        // The slope's error: the fit's own, and at least what the arrival count's spread
        // moves a FIFO queue's wait by over the span (σ arrivals ÷ completions, s per s).
        let arrival_se = 1000.0 * self.arrival_sd / (self.ends.max(1) as f64);
        let latency = self.latency.is_some_and(|f| {
            let fit_se = if f.t_stat.is_finite() && f.t_stat != 0.0 {
                (f.slope / f.t_stat).abs()
            } else {
                0.0
            };
            f.slope + 2.0 * fit_se.max(arrival_se) < OVERLOAD * 1000.0
        });
        let arrivals = self.arrivals as f64;
        let expected = (1.0 - 1.0 / (1.0 + OVERLOAD)) * arrivals;
        let growth = self.growth() + 2.0 * self.arrival_sd.max(1.0) < expected;
        // The offered rate itself must be known to better than the overload: with Poisson
        // arrivals the count's spread is √arrivals, so this needs about 180 arrivals.
        let offered_known = 2.0 * self.arrival_sd < OVERLOAD * arrivals;
        offered_known && (latency || growth)
    }
}

/// The share of arrivals shed (HTTP 429/503/504 or timeouts) that makes a step unstable.
pub const SHED: f64 = 0.05;
/// Fewest shed requests that make a step unstable.
const MIN_SHED: u64 = 3;

/// The smallest overload a stable verdict must rule out: 15 % above capacity.
pub const OVERLOAD: f64 = 0.15;

/// What is known of the arrival process, for the spread of the arrival count over the span.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ArrivalProcess {
    /// Exponential gaps: the count's variance is its mean.
    Poisson,
    /// Evenly spaced (constant arrivals): known to ±1.
    Regular,
    /// A closed loop: each client sends when its previous request ends, so at most the
    /// concurrency is ever in flight — no queue can build. Counted like [`Self::Regular`].
    Closed,
    /// Gamma gaps of this shape: variance = mean ÷ shape.
    Gamma(f64),
    /// Unknown (a trace replay, or no load given): estimated from the per-interval counts.
    Measured,
}

impl ArrivalProcess {
    /// From a step's load description.
    pub fn of(mode: &str, arrival: Option<&str>, burstiness: Option<f64>) -> ArrivalProcess {
        match (mode, arrival) {
            ("closed", _) => ArrivalProcess::Closed,
            (_, Some("constant")) => ArrivalProcess::Regular,
            (_, Some("poisson")) => ArrivalProcess::Poisson,
            (_, Some("gamma")) => burstiness
                .filter(|b| *b > 0.0)
                .map_or(ArrivalProcess::Measured, ArrivalProcess::Gamma),
            _ => ArrivalProcess::Measured,
        }
    }

    /// Standard deviation of `arrivals` counted over a span; `measured` is the estimate from
    /// the per-interval counts, used when nothing better is known.
    fn sd(self, arrivals: u64, measured: f64) -> f64 {
        let n = arrivals as f64;
        match self {
            ArrivalProcess::Poisson => n.sqrt(),
            ArrivalProcess::Regular | ArrivalProcess::Closed => 1.0,
            ArrivalProcess::Gamma(shape) => (n / shape).sqrt(),
            ArrivalProcess::Measured => measured,
        }
    }
}

/// Judges the span `[from_us, to_us)` of `flow`, with intervals no wider than `window_us`,
/// for arrivals from `process`; `trends` are the soak trends of the measured windows, carried
/// into the verdict.
pub fn judge(
    flow: &Flow,
    (from_us, to_us): (u64, u64),
    window_us: u64,
    process: ArrivalProcess,
    trends: Vec<Trend>,
) -> Stability {
    let span = to_us.saturating_sub(from_us);
    let step = (span / TARGET_POINTS).clamp(10_000, window_us.max(10_000));
    let step = step - step % 10_000;
    let n = usize::try_from(span / step.max(1)).unwrap_or(0);
    let points = flow.resample(from_us, step, n);
    let evidence = evidence(flow, from_us, &points, process);
    let (verdict, reason) = verdict(&evidence);
    Stability {
        stable: verdict == Verdict::Stable,
        verdict,
        queue_growth_per_sec: evidence.growth.map(|f| f.slope),
        completion_ratio: evidence.ratio(),
        shed_ratio: evidence.shed_ratio(),
        e2e_growth_ms_per_sec: evidence.latency.map(|f| f.slope),
        windows_assessed: evidence.points,
        assessed_window_secs: step as f64 / 1e6,
        assessed_from_secs: (n > 0).then_some(from_us as f64 / 1e6),
        assessed_to_secs: (n > 0).then_some((from_us + n as u64 * step) as f64 / 1e6),
        reason,
        trends,
    }
}

fn evidence(flow: &Flow, from_us: u64, points: &[FlowPoint], process: ArrivalProcess) -> Evidence {
    let in_flight: Vec<(f64, f64)> = points.iter().map(|p| (p.at_secs, p.in_flight)).collect();
    let latency: Vec<(f64, f64)> = points
        .iter()
        .filter_map(|p| Some((p.at_secs, p.mean_e2e_ms?)))
        .collect();
    let n = points.len() as f64;
    let arrivals: u64 = points.iter().map(|p| p.arrivals).sum();
    let per_point = arrivals as f64 / n.max(1.0);
    let dispersion = points
        .iter()
        .map(|p| (p.arrivals as f64 - per_point).powi(2))
        .sum::<f64>()
        / (n - 1.0).max(1.0);
    Evidence {
        points: points.len(),
        arrivals,
        ends: points.iter().map(|p| p.ends).sum(),
        shed: points.iter().map(|p| p.shed).sum(),
        start_in_flight: flow.in_flight_at(from_us),
        arrival_sd: process.sd(arrivals, (n * dispersion).sqrt()),
        growth: fit(&in_flight),
        latency: fit(&latency),
        closed: process == ArrivalProcess::Closed,
    }
}

/// Why `e` is too little to judge, if it is.
fn too_little(e: &Evidence) -> Option<String> {
    (e.points < MIN_POINTS || e.arrivals < MIN_ARRIVALS).then(|| {
        format!(
            "too few {} to judge ({} intervals, {} arrivals after start-up; needs {MIN_POINTS} and {MIN_ARRIVALS}): run longer",
            if e.points < MIN_POINTS { "intervals" } else { "arrivals" },
            e.points,
            e.arrivals
        )
    })
}

/// Why a step whose server shed load is unstable.
fn shed_reason(e: &Evidence, pace: &str) -> String {
    format!(
        "the server shed load: {} of {} arrivals turned away (HTTP 429/503/504) or timed out ({:.0} %), so its queue cannot grow to show the overload; {pace}",
        e.shed,
        e.arrivals,
        e.shed_ratio().unwrap_or(0.0) * 100.0
    )
}

/// The verdict and a reason built from the same figures.
fn verdict(e: &Evidence) -> (Verdict, String) {
    let pace = format!(
        "{} of {} arrivals ended ({:.0} %)",
        e.ends,
        e.arrivals,
        e.ratio().unwrap_or(1.0) * 100.0
    );
    if let Some(decided) = before_the_trends(e, &pace) {
        return decided;
    }
    let (span, grown, noise) = (e.span(), e.growth(), e.noise());
    if e.grew() {
        return (
            Verdict::Unstable,
            format!(
                "in-flight requests grew steadily by {:.1}/s ({grown:.0} over {span:.1} s, beyond the ±{noise:.0} chance allows); {pace}",
                grown / span.max(1e-9)
            ),
        );
    }
    if let (true, Some(rise)) = (e.behind(), e.latency_rose()) {
        return (
            Verdict::Unstable,
            format!(
                "completions fell behind arrivals ({pace}) while E2E rose {:.0} % over {span:.1} s",
                rise * 100.0
            ),
        );
    }
    if !e.rules_out_overload() {
        return (
            Verdict::Inconclusive,
            format!(
                "no steady growth, but too little data to rule out a {:.0} % overload (in-flight {grown:+.0} over {span:.1} s, ±{noise:.0} by chance; {pace}): run longer",
                OVERLOAD * 100.0
            ),
        );
    }
    let shed = if e.shed > 0 {
        format!("; {} shed (429/503/504 or timed out)", e.shed)
    } else {
        String::new()
    };
    (
        Verdict::Stable,
        format!(
            "in-flight requests did not grow beyond chance (±{noise:.0}) and completions kept pace ({pace}{shed})"
        ),
    )
}

/// What is decided before the trends are read: completions far behind, load shed, a closed
/// loop, or too little to judge.
fn before_the_trends(e: &Evidence, pace: &str) -> Option<(Verdict, String)> {
    if e.arrivals >= 5 && e.ratio().unwrap_or(1.0) < 0.5 {
        return Some((
            Verdict::Unstable,
            format!("completions fell behind: {pace}"),
        ));
    }
    if e.shed_load() {
        return Some((Verdict::Unstable, shed_reason(e, pace)));
    }
    if e.closed {
        return Some((
            Verdict::Stable,
            format!(
                "closed loop: no more requests in flight than the concurrency, so no queue can build ({pace})"
            ),
        ));
    }
    too_little(e).map(|reason| (Verdict::Inconclusive, reason))
}
