//! The fit: Levenberg–Marquardt over the logarithms of the constants (the small-batch factors
//! held falling with the batch: `coordinates`), each residual the log-ratio of a probe's
//! median TTFT or TPOT predicted in virtual time to the one measured, through a robust loss.
//! The simulator itself is the model function, so whatever the engine does (chunked prompts,
//! weight streaming against arithmetic, queueing for slots) is part of the fit. Uncertainties
//! come from the Jacobian of the plain log-ratios at the optimum: `cov = s² (JᵀJ)⁻¹`.

use serde::{Deserialize, Serialize};

use super::coordinates::{robust, squares, to_fit, to_natural};
use super::linalg::{Matrix, inverse, normal_equations, solve};
use super::verdict::{is_poor, problems};
use super::{BatchFactor, Constants, Facts, ProbeShape, batch_layout, calibrated_config, predict};

/// A probe as measured on the server: medians in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MeasuredProbe {
    /// What was sent.
    pub shape: ProbeShape,
    /// Median time to first token.
    pub ttft: f64,
    /// Median time per output token after the first.
    pub tpot: f64,
}

/// One fitted constant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConstantFit {
    /// Name (see [`Constants::names`]).
    pub name: String,
    /// Unit.
    pub unit: String,
    /// Fitted value.
    pub value: f64,
    /// One standard error as a fraction of the value; `None` when the probes do not
    /// determine it.
    pub relative_uncertainty: Option<f64>,
}

/// One measured figure against the fitted model's prediction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Residual {
    /// The probe.
    pub shape: ProbeShape,
    /// `ttft` or `tpot`.
    pub metric: String,
    /// Measured, seconds.
    pub measured: f64,
    /// Predicted, seconds.
    pub predicted: f64,
    /// `predicted / measured − 1`.
    pub relative_error: f64,
}

/// The result of a fit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fit {
    /// The constants.
    pub constants: Constants,
    /// Each constant with its uncertainty.
    pub table: Vec<ConstantFit>,
    /// Every residual.
    pub residuals: Vec<Residual>,
    /// Root mean square of the relative errors.
    pub rms_relative_error: f64,
    /// Whether the fit is poor (RMS relative error above [`POOR_RMS`]).
    pub poor: bool,
    /// What is wrong with the fit: why it is poor, which constants the probes leave
    /// undetermined, how much of its error the server's own noise explains.
    pub problems: Vec<String>,
    /// How much one measurement of a probe's TTFT or TPOT varies on this server (relative
    /// standard deviation, from probes measured in several passes; see
    /// [`Fit::with_server_noise`]). `None`: every probe was measured once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_noise: Option<f64>,
}

impl Fit {
    /// The fit judged against the server's own noise (`noise`: the relative standard
    /// deviation of one measurement of a fitted figure): a poor fit is put down to noise
    /// when that noise is at least its RMS error (noise alone would leave residuals of about
    /// half that noise in a fit of nine constants to two passes' means of eighteen figures)
    /// and to the engine's form otherwise; a good fit on a server noisier than [`NOISY`]
    /// says that predictions can be no closer.
    pub fn with_server_noise(mut self, noise: f64) -> Fit {
        self.server_noise = Some(noise);
        self.problems = problems(
            &self.table,
            &self.residuals,
            self.rms_relative_error,
            Some(noise),
        );
        self
    }
}

/// Measurements a fit cannot use.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FitError {
    /// Too few figures to fit anything.
    #[error("{0} measured figures cannot be fitted; probe more shapes (a longer --budget?)")]
    TooFew(usize),
    /// A probe's figures are not numbers of seconds.
    #[error("probe {0:?}: its TTFT must be a positive number of seconds, its TPOT 0 or more")]
    Invalid(ProbeShape),
}

/// A fit whose RMS relative error exceeds this is poor.
pub const POOR_RMS: f64 = 0.10;
/// A server whose figures vary more than this from one measurement to the next is noisy.
pub const NOISY: f64 = 0.05;
/// A constant known to worse than this (relative standard error) is undetermined.
const UNDETERMINED: f64 = 1.0;
const ITERATIONS: usize = 60;
/// Every constant stays within `[1e-6, 1e9]` of its unit (GB/s, GFLOP/s, µs), so no step
/// of the simulated engine becomes infinite or zero.
const LOG_BOUNDS: (f64, f64) = (-13.815_510_557_964_274, 20.723_265_836_946_41);
const DIFF_STEP: f64 = 0.01;
/// A fitted value below this (in its unit) is reported as 0.
pub(super) const NEGLIGIBLE: f64 = 1e-3;
/// A fitted rate above this (in its unit: GB/s, GFLOP/s) is reported as unbounded.
pub(super) const UNBOUNDED: f64 = 1e6;

/// The figures one probe contributes: `(metric, measured)` pairs. A TPOT of 0 (every token
/// of the answer arrived at once) measures nothing and is left out.
fn figures(probe: &MeasuredProbe) -> Vec<(&'static str, f64)> {
    let mut out = vec![("ttft", probe.ttft)];
    if probe.shape.output_tokens > 1 && probe.tpot > 0.0 {
        out.push(("tpot", probe.tpot));
    }
    out
}

struct Problem<'a> {
    facts: &'a Facts,
    probes: &'a [MeasuredProbe],
    /// The constants' layout (which batch points); values replaced by each trial's.
    layout: Constants,
}

impl Problem<'_> {
    fn constants(&self, log: &[f64]) -> Constants {
        let values: Vec<f64> = log.iter().map(|v| v.exp()).collect();
        self.layout.with_values(&values)
    }

    /// The log-ratios at `log`, each through `loss`.
    fn residuals_by(&self, log: &[f64], loss: fn(f64) -> f64) -> Vec<f64> {
        self.residuals(log).0.into_iter().map(loss).collect()
    }

    /// Log-ratios predicted / measured, and the predictions.
    fn residuals(&self, log: &[f64]) -> (Vec<f64>, Vec<f64>) {
        let config = calibrated_config(self.facts, &self.constants(log));
        let mut residuals = Vec::new();
        let mut predicted = Vec::new();
        for probe in self.probes {
            let p = predict(&config, &probe.shape);
            for (metric, measured) in figures(probe) {
                let value = if metric == "ttft" { p.ttft } else { p.tpot };
                residuals.push((value.max(1e-12) / measured).ln());
                predicted.push(value);
            }
        }
        (residuals, predicted)
    }
}

/// Forward differences of `eval` at `log` (where it is `base`), one replay of every probe per
/// coordinate: the columns are spread over the machine's cores (each replay is independent;
/// the result is the same).
fn jacobian(
    log: &[f64],
    base: &[f64],
    eval: &(dyn Fn(&[f64]) -> Vec<f64> + Sync),
) -> Vec<Vec<f64>> {
    let column = |i: usize| {
        let mut moved = log.to_vec();
        moved[i] += DIFF_STEP;
        let shifted = eval(&moved);
        let derivative = shifted.iter().zip(base).map(|(s, b)| (s - b) / DIFF_STEP);
        (i, derivative.collect::<Vec<f64>>())
    };
    let workers = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .clamp(1, log.len().max(1));
    let columns: Vec<(usize, Vec<f64>)> = std::thread::scope(|scope| {
        let column = &column;
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                scope.spawn(move || {
                    (w..log.len())
                        .step_by(workers)
                        .map(column)
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    let mut rows = vec![vec![0.0; log.len()]; base.len()];
    for (i, derivative) in columns {
        for (row, d) in rows.iter_mut().zip(derivative) {
            row[i] = d;
        }
    }
    rows
}

fn sum_sq(r: &[f64]) -> f64 {
    r.iter().map(|v| v * v).sum()
}

/// The smallest positive `figure` over the probes (infinite for none).
fn fastest(probes: &[MeasuredProbe], figure: fn(&MeasuredProbe) -> f64) -> f64 {
    probes
        .iter()
        .map(figure)
        .filter(|v| *v > 0.0)
        .fold(f64::INFINITY, f64::min)
}

/// A starting point from the measurements alone: weights streamed in half the fastest
/// batch-1 TPOT, the longest prompt's GEMMs in its TTFT, no small-batch slowdown.
fn initial(facts: &Facts, probes: &[MeasuredProbe]) -> Constants {
    let model = facts.model();
    let tpot = fastest(probes, |p| p.tpot);
    let tpot = if tpot.is_finite() { tpot } else { 0.01 };
    let longest = probes.iter().max_by_key(|p| p.shape.prompt_tokens);
    let gemm = longest.map_or(1e3, |p| {
        model.linear_flops(f64::from(p.shape.prompt_tokens)) / p.ttft / 1e9
    });
    let bandwidth = model.streamed_weight_bytes() / (0.5 * tpot).max(1e-6) / 1e9;
    let ttft = fastest(probes, |p| p.ttft);
    let shapes: Vec<ProbeShape> = probes.iter().map(|p| p.shape).collect();
    let (points, full_rate_tokens) = batch_layout(facts, &shapes);
    let sane = |v: f64| {
        let v = if v.is_finite() { v } else { 1.0 };
        v.ln().clamp(LOG_BOUNDS.0, LOG_BOUNDS.1).exp()
    };
    Constants {
        weight_gb_per_sec: sane(bandwidth),
        gemm_gflops: sane(gemm),
        attention_gflops: sane(gemm),
        kv_gb_per_sec: sane(bandwidth),
        batch_factors: points
            .into_iter()
            .map(|tokens| BatchFactor {
                tokens,
                factor: 1.0,
            })
            .collect(),
        full_rate_tokens,
        // A hundredth of the fastest TTFT, in ms: small enough to leave a server with none
        // near none, large enough (in log space) to grow where the probes need it.
        latency_ms: sane(ttft * 10.0),
        latency_holds_slot: false,
    }
}

/// Fits the constants of a server with `facts` to `probes`.
pub fn fit(facts: &Facts, probes: &[MeasuredProbe]) -> Result<Fit, FitError> {
    for probe in probes {
        let ok = |v: f64| v.is_finite() && v > 0.0;
        if !(ok(probe.ttft) && probe.tpot.is_finite() && probe.tpot >= 0.0) {
            return Err(FitError::Invalid(probe.shape));
        }
    }
    let count: usize = probes.iter().map(|p| figures(p).len()).sum();
    if count < 2 {
        return Err(FitError::TooFew(count));
    }
    let layout = initial(facts, probes);
    let starts = [layout.clone(), latency_bound(facts, probes, &layout)];
    let problem = Problem {
        facts,
        probes,
        layout,
    };
    // From each start: the robust fit, and the robust fit from the least-squares optimum
    // (the Cauchy loss has more local minima; least squares leads past some of them).
    let best = |problem: &Problem<'_>| {
        starts
            .iter()
            .flat_map(|start| {
                let log: Vec<f64> = start.values().iter().map(|v| v.ln()).collect();
                let (_, squared) = minimise(problem, &log, squares);
                [
                    minimise(problem, &log, robust),
                    minimise(problem, &squared, robust),
                ]
            })
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .unwrap_or_default()
    };
    let (cost, log) = best(&problem);
    // The latency holding the slot instead: only requests queued for a slot (the probe at
    // twice the slots) tell the two apart, and only for a latency that is not negligible.
    let fastest_ms = fastest(probes, |p| p.ttft) * 1e3;
    let queued = probes.iter().any(|p| p.shape.concurrency > facts.slots);
    if !queued || problem.constants(&log).latency_ms < NEGLIGIBLE_LATENCY * fastest_ms {
        return Ok(summarise(&problem, &log));
    }
    let in_slot = Problem {
        layout: Constants {
            latency_holds_slot: true,
            ..problem.layout.clone()
        },
        ..problem
    };
    let (slot_cost, slot_log) = best(&in_slot);
    Ok(if slot_cost < IN_SLOT_GAIN * cost {
        summarise(&in_slot, &slot_log)
    } else {
        summarise(&problem, &log)
    })
}

/// A latency below this fraction of the fastest TTFT is not worth placing.
const NEGLIGIBLE_LATENCY: f64 = 0.01;

/// How much lower (a factor on the sum of squared errors) the fit with the latency holding the
/// slot must come to be kept: a placement the probes barely tell apart stays before the queue.
const IN_SLOT_GAIN: f64 = 0.8;

/// A second starting point, for a server whose TTFT is mostly latency outside the engine:
/// nine tenths of the fastest TTFT as latency, the weights streamed in the fastest batch-1
/// TPOT, the longest prompt's GEMMs in what its TTFT adds to the fastest (at least a tenth of
/// it), decode attention free. From [`initial`]'s point the fit can settle where a slow step
/// carries that latency instead (a minimum it does not leave).
fn latency_bound(facts: &Facts, probes: &[MeasuredProbe], initial: &Constants) -> Constants {
    let model = facts.model();
    let (ttft, tpot) = (fastest(probes, |p| p.ttft), fastest(probes, |p| p.tpot));
    let longest = probes.iter().max_by_key(|p| p.shape.prompt_tokens);
    let gemm = longest.map_or(initial.gemm_gflops, |p| {
        let added = (p.ttft - ttft).max(0.1 * ttft);
        model.linear_flops(f64::from(p.shape.prompt_tokens)) / added / 1e9
    });
    let sane = |v: f64, or: f64| {
        let v = if v.is_finite() && v > 0.0 { v } else { or };
        v.ln().clamp(LOG_BOUNDS.0, LOG_BOUNDS.1).exp()
    };
    Constants {
        weight_gb_per_sec: sane(
            model.streamed_weight_bytes() / tpot / 1e9,
            initial.weight_gb_per_sec,
        ),
        gemm_gflops: sane(gemm, initial.gemm_gflops),
        kv_gb_per_sec: UNBOUNDED,
        latency_ms: sane(0.9 * ttft * 1e3, initial.latency_ms),
        ..initial.clone()
    }
}

/// Levenberg–Marquardt from the constants' logarithms `start`, in the fit's coordinates
/// (factors falling with the batch), each residual through `loss`: the sum of squared
/// residuals at the optimum, and the constants' logarithms there.
fn minimise(problem: &Problem<'_>, start: &[f64], loss: fn(f64) -> f64) -> (f64, Vec<f64>) {
    let eval = |fit: &[f64]| problem.residuals_by(&to_natural(fit), loss);
    let mut log = to_fit(start);
    let mut r = eval(&log);
    let mut cost = sum_sq(&r);
    let mut lambda = 1e-2;
    for _ in 0..ITERATIONS {
        let jacobian = jacobian(&log, &r, &eval);
        let (jtj, jtr) = normal_equations(&jacobian, &r);
        let mut improved = false;
        while lambda < 1e8 {
            let mut damped = jtj.clone();
            for (i, row) in damped.iter_mut().enumerate() {
                row[i] += lambda * (jtj[i][i] + 1e-9);
            }
            let minus: Vec<f64> = jtr.iter().map(|v| -v).collect();
            let Some(step) = solve(&damped, &minus) else {
                lambda *= 4.0;
                continue;
            };
            // At most a factor e² per constant and iteration: a flat direction must not
            // throw a constant to infinity.
            let trial: Vec<f64> = log
                .iter()
                .zip(&step)
                .map(|(a, b)| (a + b.clamp(-2.0, 2.0)).clamp(LOG_BOUNDS.0, LOG_BOUNDS.1))
                .collect();
            let trial_r = eval(&trial);
            let trial_cost = sum_sq(&trial_r);
            if trial_cost < cost {
                let gain = (cost - trial_cost) / cost.max(1e-300);
                (log, r, cost) = (trial, trial_r, trial_cost);
                lambda = (lambda / 3.0).max(1e-9);
                improved = gain > 1e-7;
                break;
            }
            lambda *= 4.0;
        }
        if !improved {
            break;
        }
    }
    (cost, to_natural(&log))
}

/// Relative standard errors of the parameters that the Jacobian determines.
fn uncertainties(jacobian: &[Vec<f64>], residuals: &[f64]) -> Vec<Option<f64>> {
    let p = jacobian.first().map_or(0, Vec::len);
    let n = residuals.len();
    let (jtj, _) = normal_equations(jacobian, residuals);
    let largest = (0..p).map(|i| jtj[i][i]).fold(0.0, f64::max);
    let kept: Vec<usize> = (0..p).filter(|&i| jtj[i][i] > largest * 1e-10).collect();
    let mut out = vec![None; p];
    if n <= kept.len() {
        return out;
    }
    let sub: Matrix = kept
        .iter()
        .map(|&i| kept.iter().map(|&j| jtj[i][j]).collect())
        .collect();
    let Some(cov) = inverse(&sub) else {
        return out;
    };
    let s2 = sum_sq(residuals) / (n - kept.len()) as f64;
    for (k, &i) in kept.iter().enumerate() {
        let sd = (s2 * cov[k][k]).max(0.0).sqrt();
        out[i] = (sd < UNDETERMINED).then_some(sd);
    }
    out
}

fn summarise(problem: &Problem<'_>, log: &[f64]) -> Fit {
    let constants = problem.constants(log);
    let (r, predicted) = problem.residuals(log);
    let jacobian = jacobian(log, &r, &|log: &[f64]| problem.residuals_by(log, squares));
    let sds = uncertainties(&jacobian, &r);
    let table: Vec<ConstantFit> = constants
        .names()
        .into_iter()
        .zip(constants.values())
        .zip(&sds)
        .map(|(((name, unit), value), sd)| ConstantFit {
            name,
            unit: (*unit).to_string(),
            value,
            relative_uncertainty: *sd,
        })
        .collect();
    let mut residuals = Vec::new();
    let measured = problem.probes.iter().flat_map(|p| {
        figures(p)
            .into_iter()
            .map(move |(metric, value)| (p.shape, metric, value))
    });
    for ((shape, metric, value), predicted) in measured.zip(predicted) {
        residuals.push(Residual {
            shape,
            metric: metric.to_string(),
            measured: value,
            predicted,
            relative_error: predicted / value - 1.0,
        });
    }
    let rms = (residuals
        .iter()
        .map(|r| r.relative_error.powi(2))
        .sum::<f64>()
        / residuals.len().max(1) as f64)
        .sqrt();
    Fit {
        problems: problems(&table, &residuals, rms, None),
        poor: is_poor(&residuals, table.len(), rms),
        constants,
        table,
        residuals,
        rms_relative_error: rms,
        server_noise: None,
    }
}

#[cfg(test)]
#[path = "fit_tests.rs"]
pub(crate) mod tests;
