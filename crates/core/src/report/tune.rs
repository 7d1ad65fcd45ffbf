//! The `tune` section: `goodput tune` measured one server configuration after another (each
//! started from a command template, or simulated in virtual time), and this section gives each
//! configuration's figures at its operating point under the SLO (capacity, goodput and output
//! tokens per accelerator, tokens per second per user, cost, start-up time, failures), the
//! Pareto front of throughput per accelerator against tokens per second per user, and the best
//! configuration with its margin over the runner-up and whether that margin is significant.
//! Filled by `decide::tune`; each configuration's own report is in its directory.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Where the configurations were measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TuneMode {
    /// Each configuration's server started from `--server-cmd` and measured over the wire.
    Live,
    /// Each configuration simulated in virtual time (its figures are predictions).
    Virtual,
}

/// What was measured per configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TuneMeasure {
    /// A capacity search under the SLO; the operating point is the passing probe at capacity.
    Capacity,
    /// A load sweep; the operating point is the level of most goodput among those that were
    /// stable and met the attainment target.
    Sweep,
}

/// A tune (`report.json` → `tune`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneReport {
    /// Live or virtual time.
    pub mode: TuneMode,
    /// Capacity search or load sweep.
    pub measure: TuneMeasure,
    /// The SLO, in flag syntax.
    pub slo: String,
    /// Fraction of requests that had to meet the SLO's per-request thresholds.
    pub attainment_target: f64,
    /// The figure configurations are ranked by (`rank_value`), in words with its unit.
    pub ranked_by: String,
    /// How each configuration's accelerators were counted.
    pub accelerators_basis: String,
    /// Price of one accelerator-hour (`--gpu-hour-cost`), when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_hour_cost: Option<f64>,
    /// Independent measurements of each configuration (`--repeats`, 1 without it).
    pub repeats: u32,
    /// How the servers were started, readied and stopped (live, or the servers
    /// `--verify-top` started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<TuneServer>,
    /// Every configuration, in the order of the grid.
    pub configurations: Vec<TuneConfiguration>,
    /// Indices of the configurations on the Pareto front (no other configuration that met the
    /// SLO has at least as many good output tokens per second per accelerator and as many
    /// tokens per second per user, and more of one), by tokens per second per user, ascending.
    pub pareto_front: Vec<usize>,
    /// The best configuration under the SLO; absent when none was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub best: Option<TuneBest>,
    /// `--verify-top K`: the best predicted configurations measured live, predicted against
    /// measured.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub verification: Vec<TuneVerification>,
    /// The conclusion in one sentence.
    pub conclusion: String,
}

/// How each configuration's server was run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneServer {
    /// The command template (`--server-cmd`), run by `sh -c` in a process group of its own.
    pub command: String,
    /// The target URL template.
    pub target: String,
    /// The URL polled for readiness (`--ready-url`; absent: the target's `/health`, then its
    /// `/v1/models`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_url: Option<String>,
    /// Longest a server could take to become ready, seconds.
    pub ready_timeout_secs: f64,
    /// SIGTERM to SIGKILL, seconds.
    pub stop_grace_secs: f64,
    /// The URL POSTed before every step (`--reset-url`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reset_url: Option<String>,
}

/// One configuration of a tune.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneConfiguration {
    /// Its name (`key=value,…` in grid order, or the name a grid file gave it).
    pub name: String,
    /// Each placeholder's value.
    pub values: BTreeMap<String, String>,
    /// Accelerators serving it (see `accelerators_basis`).
    pub accelerators: u32,
    /// Its measurement (live) or prediction (virtual time).
    pub run: TuneRun,
    /// Its position in the ranking (1 = best), when it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<usize>,
    /// Whether it is on the Pareto front.
    pub on_front: bool,
}

/// One configuration measured (or simulated) once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneRun {
    /// Its output directory, relative to the tune's (its own run.json, journal, report and
    /// server log).
    pub dir: String,
    /// The server command it was started with (live).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The target URL measured (live).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Seconds from starting the server to its first ready answer (live).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_secs: Option<f64>,
    /// Why it failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<TuneFailure>,
    /// Its figures at the operating point; absent when it failed before measuring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub figures: Option<TuneFigures>,
}

/// Why a configuration could not be measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneFailure {
    /// Where it failed: `start` (the command could not run or the port not be bound), `ready`
    /// (not ready in time, or exited before), `measure` (crashed or failed mid-measurement),
    /// `stop` (processes survived SIGKILL), `config` (an invalid simulator configuration).
    pub stage: String,
    /// What happened.
    pub reason: String,
    /// The last lines of the server's log.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub log_tail: Vec<String>,
}

/// A configuration's figures at its operating point.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct TuneFigures {
    /// The highest load that met the SLO (the capacity search's lower bound, or the sweep
    /// level of the operating point), in `load_unit`; absent when none did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<f64>,
    /// `req/s` (arrival rate) or `concurrency`.
    pub load_unit: String,
    /// The lowest load that failed above it (capacity search).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upper_bound: Option<f64>,
    /// How the measurement ended (the search's conclusion, or the sweep's levels).
    pub conclusion: String,
    /// The operating point's step in the configuration's own report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<usize>,
    /// Completed requests per second at the operating point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_per_sec: Option<f64>,
    /// Requests per second that met the SLO at the operating point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_per_sec: Option<f64>,
    /// `goodput_per_sec / accelerators`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_per_accelerator: Option<f64>,
    /// Output tokens per second at the operating point.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens_per_sec: Option<f64>,
    /// `output_tokens_per_sec / accelerators`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens_per_sec_per_accelerator: Option<f64>,
    /// Output tokens per second of the requests that met the SLO, divided by the
    /// accelerators: the front's throughput axis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub good_output_tokens_per_sec_per_accelerator: Option<f64>,
    /// `1000 / TPOT p50 (ms)`: the tokens per second one user sees while streaming, the
    /// front's interactivity axis.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens_per_sec_per_user: Option<f64>,
    /// TTFT p99 at the operating point, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p99_ms: Option<f64>,
    /// TPOT p50 at the operating point, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_p50_ms: Option<f64>,
    /// `accelerators · gpu_hour_cost / 3600 / output_tokens_per_sec · 10^6`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_per_million_output_tokens: Option<f64>,
    /// Measured requests sent over the whole measurement (every step).
    pub requests_sent: u64,
    /// Measured requests that failed over the whole measurement (every step).
    pub requests_failed: u64,
    /// The figure configurations are ranked by (see `ranked_by`); absent when nothing met
    /// the SLO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank_value: Option<f64>,
    /// That figure in each of the repeated measurements (`--repeats`), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rank_runs: Vec<f64>,
}

/// The best configuration and how sure the ranking is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneBest {
    /// Its index in `configurations`.
    pub configuration: usize,
    /// Its name.
    pub name: String,
    /// Its `rank_value`.
    pub rank_value: f64,
    /// The runner-up's index, when another configuration met the SLO.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_up: Option<usize>,
    /// `best / runner-up − 1` of `rank_value`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub margin: Option<f64>,
    /// Welch's two-sided p-value that the two have the same mean `rank_value` across their
    /// repeated measurements (with `--repeats` of at least 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_value: Option<f64>,
    /// Whether the margin is significant at 5 % (absent when not tested).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub significant: Option<bool>,
    /// The significance in words ("not tested: one run each" without repeats).
    pub significance: String,
}

/// A configuration predicted in virtual time and measured live (`--verify-top`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneVerification {
    /// Its index in `configurations` (whose `run` holds the prediction).
    pub configuration: usize,
    /// Its predicted rank.
    pub predicted_rank: usize,
    /// The live measurement.
    pub measured: TuneRun,
    /// `measured / predicted` of `rank_value`, when both are known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
}
