//! The `capacity` section: the verdict of a capacity search, its bounds and every probe with
//! its checks. Filled by [`crate::decide::capacity`].

use serde::{Deserialize, Serialize};

/// Which load dimension was searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dimension {
    /// Open-loop arrival rate, requests per second.
    Rate,
    /// Closed-loop concurrency.
    Concurrency,
}

/// The capacity verdict (`report.json` → `capacity`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityReport {
    /// What was searched.
    pub dimension: Dimension,
    /// The highest arrival rate that passed (open loop).
    pub max_sustainable_rate_per_sec: Option<f64>,
    /// The highest concurrency that passed (closed loop).
    pub max_sustainable_concurrency: Option<u32>,
    /// Highest passing load (= the capacity figure).
    pub lower_bound: Option<f64>,
    /// Lowest *failing* (refuted or unstable) load above it: the true capacity lies between
    /// the bounds. Never an undecided probe.
    pub upper_bound: Option<f64>,
    /// Loads between the bounds whose probes could not be decided (neither proven nor refuted
    /// within the runs the budget allowed): the capacity may lie above them or below.
    #[serde(default)]
    pub undecided_loads: Vec<f64>,
    /// Target time the search spent probing, seconds.
    #[serde(default)]
    pub spent_secs: f64,
    /// The SLO, in flag syntax.
    pub slo: String,
    /// Attainment target of the per-request thresholds.
    pub attainment_target: f64,
    /// Confidence of every probe verdict.
    pub confidence: f64,
    /// Measured requests a probe's run may take at most (it ends once its targets are
    /// decided): enough for a fixed-sample test to prove a miss rate of half the budget.
    pub requests_per_probe: u64,
    /// Why the search ended.
    pub conclusion: Conclusion,
    /// Every probe, in order.
    pub probes: Vec<Probe>,
    /// Index in the report's `steps` of the first probe (after any calibration step): probe
    /// `i` is step `first_probe_step + i`.
    #[serde(default)]
    pub first_probe_step: usize,
    /// Per-run request goodput of the passing probe at capacity, requests per second.
    pub goodput_at_capacity_per_sec: Option<f64>,
    /// DistServe goodput: the highest probed arrival rate whose attainment of every target was
    /// at least the target (point estimate, stability not required).
    pub distserve_goodput_per_sec: Option<f64>,
    /// Accelerators serving the target, when given.
    pub accelerators: Option<u32>,
    /// Capacity per accelerator.
    pub per_accelerator: Option<f64>,
}

/// One attainment target's verdict in a probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// e.g. `ttft=500ms,tpot=50ms` (thresholds, jointly) or `ttft_p99=500ms`.
    pub name: String,
    /// Fraction that must comply.
    pub target: f64,
    /// Samples judged.
    pub samples: u64,
    /// Samples that missed (failed requests included).
    pub misses: u64,
    /// How much more the misses clustered in time than independent samples would (design
    /// effect, ≥ 1).
    #[serde(default = "one_f64")]
    pub dispersion: f64,
    /// Samples the verdict counts: `samples / dispersion`.
    #[serde(default)]
    pub effective_samples: u64,
    /// `1 − misses / samples`.
    pub attained: Option<f64>,
    /// Sequential verdict at the criteria's confidence (anytime-valid: proven or refuted the
    /// first time its evidence reached `1 / (1 − confidence)`).
    pub verdict: Verdict,
}

/// How a probe came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Stable and every target proven.
    Pass,
    /// Unstable, or a target refuted.
    Fail,
    /// Nothing refuted and not unstable, but not every target proven (or stability not
    /// judged) with the requests measured.
    Inconclusive,
}

/// One probe, as reported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    /// Position in the search (0-based); also the index of its step in the report.
    pub index: usize,
    /// Load level: arrival rate (req/s) or concurrency.
    pub load: f64,
    /// Realised arrival rate.
    pub offered_requests_per_sec: Option<f64>,
    /// Completed requests per second.
    pub requests_per_sec: f64,
    /// Compliant requests per second (per-run request goodput).
    pub goodput_requests_per_sec: Option<f64>,
    /// Measured requests judged (over every run of the probe): in the order they were sent,
    /// up to where the sequential test decided the targets (requests in flight then still
    /// ended, and are in the step's figures), or all of them when it did not.
    pub measured: u64,
    /// Measured requests, in order, after which the sequential test had decided every
    /// attainment target (each proven, or one refuted); absent when it had not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_after: Option<u64>,
    /// The fewest requests any fixed-sample test at this confidence could prove the strictest
    /// target with — all of them compliant (`min_requests(0, p, c)`: 459 at 99 %/99 %).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_sample_minimum: Option<u64>,
    /// Runs at this load whose requests were judged together: 1, or more when an undecided
    /// probe was extended.
    #[serde(default = "one")]
    pub runs: u32,
    /// Whether the queue stayed stable (in the last run).
    pub stable: bool,
    /// Verdict per target.
    pub checks: Vec<Check>,
    /// The probe's outcome.
    pub outcome: Outcome,
    /// Why, in words.
    pub reason: String,
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
    /// The bracket closed on a load whose probe could not be decided (neither proven nor
    /// refuted within the budget): the capacity lies at or above the lower bound, and the
    /// undecided loads are reported apart.
    Undecided,
    /// The time budget was spent before convergence.
    Budget,
}

/// What a run says about an attainment target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The target holds at the confidence asked.
    Proven,
    /// The target fails at the confidence asked.
    Refuted,
    /// Not enough requests to tell.
    Inconclusive,
}

/// Serde default of a probe's runs (older reports lack it).
fn one() -> u32 {
    1
}

/// Serde default of a check's dispersion (older reports lack it): independent samples.
fn one_f64() -> f64 {
    1.0
}
