//! The anytime-valid sequential test a capacity probe's attainment targets are judged by: a
//! verdict that may be looked at after every request and acted on as soon as it holds.
//!
//! **Why not the fixed-sample test.** [`super::early_stopping::judge`] (MLPerf's binomial
//! test) is valid for one look at a sample size fixed in advance. Looked at after every
//! request, and stopped on the first "proven", its error grows with every look (the law of the
//! iterated logarithm: a boundary-level server crosses any fixed-`n` threshold eventually).
//! A probe that wants to stop on proof needs a test whose error bound holds at *every* time
//! at once.
//!
//! **The test (mixture likelihood ratios; Wald 1947, Robbins 1970; Howard et al. 2021,
//! "Time-uniform, nonparametric, nonasymptotic confidence sequences", §3).** Requests are
//! Bernoulli samples: a miss with probability `θ`. The target "at least a fraction `p`
//! comply" is `θ < q`, with `q = 1 − p`; after `n` samples with `t` misses the likelihood
//! ratio of an alternative `θ₁` against the boundary `q` is
//!
//! ```text
//! L(θ₁) = (θ₁ / q)^t · ((1 − θ₁) / (1 − q))^(n − t).
//! ```
//!
//! Under any true `θ` its one-step factor has mean `θ·θ₁/q + (1 − θ)(1 − θ₁)/(1 − q)`, linear
//! in `θ` and 1 at `θ = q`; so for `θ₁ < q` it is at most 1 whenever `θ ≥ q`, and `L(θ₁)` is a
//! non-negative supermartingale under every miss rate of the null "the target fails". So is
//! any mixture `W = ∫ L(θ₁) dπ(θ₁)` over such alternatives, and Ville's inequality bounds the
//! chance that it *ever* reaches `1/α`: `P[∃ n: W_n ≥ 1/α] ≤ α`. The target is **proven** the
//! first time the proof mixture `W_P` reaches `1/α = 1/(1 − c)`, and **refuted** the first
//! time the mirror mixture `W_R` (alternatives `θ₁ > q`, null `θ ≤ q`) does: each error is
//! at most `1 − c` however often the probe looks, and however it stops.
//!
//! **The mixtures, in closed form.** With `X ~ Binomial(n + 1, q)`, using
//! `∫₀^q θ^t (1 − θ)^(n−t) dθ = B(t + 1, n − t + 1) · P[X ≥ t + 1]` (the Beta–binomial
//! identity `I_q(a, b) = P[Binomial(a + b − 1, q) ≥ a]`):
//!
//! * proof, `π_P = ½ δ₀ + ½ Uniform(0, q)`:
//!   `W_P = ½ [t = 0] (1 − q)^(−n) + ½ P[X ≥ t + 1] / ((t + 1) P[X = t + 1])`.
//!   The atom at `θ₁ = 0` is the best test for a server that never misses: it proves the
//!   target after `n ≥ ln(2/α) / −ln(1 − q)` requests without a miss — 528 at 99 %/99 %, 15 %
//!   more than the fewest any fixed-sample test could use (459, `ln(1/α) / −ln(1 − q)`); the
//!   uniform part proves a server with misses;
//! * refutation, `π_R = Uniform(q, 1)`:
//!   `W_R = P[X ≤ t] / ((n − t + 1) P[X = t])`.
//!
//! Both depend on `(n, t)` only, fall (proof) or rise (refutation) with `t` and move the other
//! way with `n`, so checking them after each request is checking `t` against two boundaries.
//!
//! **Sample cost.** Far from the boundary a mixture gains about `KL(θ ‖ q)` nats a request
//! (minus the prior's `O(ln n)`): a server missing half its requests against a 99 % target is
//! refuted within a handful, one never missing is proven after 528 requests (a third of the
//! 1,596 the fixed-sample probe measures); only near the boundary, where `KL` vanishes, does
//! it take longer than a fixed sample would.
//!
//! **What it assumes.** Independent samples. Latency misses cluster (a busy period delays
//! every request in it); as the fixed-sample verdicts do, the probe judges `n / φ` samples
//! with `t / φ` misses, `φ ≥ 1` the measured design effect
//! ([`crate::metrics::dispersion`]), an approximation whose `φ` is itself estimated as the
//! run goes.
//!
//! **Its share of a probe's budget.** A capacity probe runs this test at half its error
//! budget, at most 5 %, split over its runs ([`super::probe::Criteria::running_error`]: 693
//! requests without a miss at 99 %/99 %); what the test leaves undecided at the planned
//! length the fixed-sample test judges with the rest ([`super::probe::Look`]).

pub use crate::report::capacity::Verdict;

use crate::decide::student::ln_gamma;

/// `ln P[X = k]` for `X ~ Binomial(n, q)`, `0 < q < 1`, `k ≤ n`.
fn ln_pmf(n: u64, k: u64, q: f64) -> f64 {
    let (nf, kf) = (n as f64, k as f64);
    ln_gamma(nf + 1.0) - ln_gamma(kf + 1.0) - ln_gamma(nf - kf + 1.0)
        + kf * q.ln()
        + (nf - kf) * (1.0 - q).ln()
}

/// Relative size at which a series' next term no longer changes its sum.
const NEGLIGIBLE: f64 = 1e-17;

/// `ln Σ_{k ≥ k0} P[X = k] / P[X = k0]`, `X ~ Binomial(n, q)`: for `k0` at or above the mean
/// the terms fall geometrically once past it.
fn ln_upper_sum(n: u64, k0: u64, q: f64) -> f64 {
    let odds = q / (1.0 - q);
    let (mut term, mut sum) = (1.0f64, 1.0f64);
    for k in k0..n {
        term *= (n - k) as f64 / (k + 1) as f64 * odds;
        sum += term;
        if term < sum * NEGLIGIBLE {
            break;
        }
    }
    sum.ln()
}

/// `ln Σ_{k ≤ k0} P[X = k] / P[X = k0]`, `X ~ Binomial(n, q)`: for `k0` at or below the mean.
fn ln_lower_sum(n: u64, k0: u64, q: f64) -> f64 {
    let odds = (1.0 - q) / q;
    let (mut term, mut sum) = (1.0f64, 1.0f64);
    for k in (1..=k0).rev() {
        term *= k as f64 / (n - k + 1) as f64 * odds;
        sum += term;
        if term < sum * NEGLIGIBLE {
            break;
        }
    }
    sum.ln()
}

/// `ln(1 − e^x)` for `x ≤ 0`.
fn ln_one_minus_exp(x: f64) -> f64 {
    if x >= 0.0 {
        f64::NEG_INFINITY
    } else {
        (-x.exp_m1()).ln()
    }
}

/// `ln(e^a + e^b)`.
fn ln_add_exp(a: f64, b: f64) -> f64 {
    let (high, low) = if a >= b { (a, b) } else { (b, a) };
    if low == f64::NEG_INFINITY {
        return high;
    }
    high + (low - high).exp().ln_1p()
}

/// `ln` of the proof mixture `W_P` after `n` samples with `t ≤ n` misses against the miss
/// budget `q` (`0 < q < 1`): the evidence that the miss rate is below `q`.
pub fn log_evidence_for(n: u64, t: u64, q: f64) -> f64 {
    let t = t.min(n);
    // X ~ Binomial(n + 1, q); the uniform part is P[X ≥ t + 1] / ((t + 1) P[X = t + 1]).
    let (big, k) = (n + 1, t + 1);
    let uniform = if k as f64 >= big as f64 * q {
        ln_upper_sum(big, k, q) - (k as f64).ln()
    } else {
        let at_most_t = ln_pmf(big, t, q) + ln_lower_sum(big, t, q);
        ln_one_minus_exp(at_most_t.min(0.0)) - (k as f64).ln() - ln_pmf(big, k, q)
    };
    let atom = if t == 0 {
        -(n as f64) * (1.0 - q).ln()
    } else {
        f64::NEG_INFINITY
    };
    ln_add_exp(atom, uniform) - std::f64::consts::LN_2
}

/// `ln` of the refutation mixture `W_R` after `n` samples with `t ≤ n` misses against the miss
/// budget `q` (`0 < q < 1`): the evidence that the miss rate is above `q`.
pub fn log_evidence_against(n: u64, t: u64, q: f64) -> f64 {
    let t = t.min(n);
    // X ~ Binomial(n + 1, q): P[X ≤ t] / ((n − t + 1) P[X = t]).
    let big = n + 1;
    let rest = ((n - t + 1) as f64).ln();
    if t as f64 <= big as f64 * q {
        ln_lower_sum(big, t, q) - rest
    } else {
        let above_t = ln_pmf(big, t + 1, q) + ln_upper_sum(big, t + 1, q);
        ln_one_minus_exp(above_t.min(0.0)) - rest - ln_pmf(big, t, q)
    }
}

/// The sequential verdict on attainment `p` after `n` samples with `misses` misses, at
/// `confidence`: proven when the proof mixture has reached `1 / (1 − confidence)`, refuted
/// when the refutation mixture has. Valid however often it is looked at (see the module).
pub fn verdict(n: u64, misses: u64, p: f64, confidence: f64) -> Verdict {
    let q = 1.0 - p;
    let misses = misses.min(n);
    if n == 0 || !(confidence > 0.0 && confidence < 1.0) {
        return Verdict::Inconclusive;
    }
    if q <= 0.0 {
        // Every sample must comply: one miss refutes, nothing proves.
        return if misses > 0 {
            Verdict::Refuted
        } else {
            Verdict::Inconclusive
        };
    }
    if q >= 1.0 {
        return Verdict::Proven;
    }
    let threshold = -(1.0 - confidence).ln();
    if log_evidence_for(n, misses, q) >= threshold {
        Verdict::Proven
    } else if log_evidence_against(n, misses, q) >= threshold {
        Verdict::Refuted
    } else {
        Verdict::Inconclusive
    }
}

/// The fewest samples without a miss that prove attainment `p` at `confidence` sequentially
/// (528 at 99 %/99 %; at most `⌈ln(2/α) / −ln(1 − q)⌉`); `u64::MAX` when none do.
pub fn fewest_requests(p: f64, confidence: f64) -> u64 {
    let proves = |n: u64| verdict(n, 0, p, confidence) == Verdict::Proven;
    let mut high = 16u64;
    while !proves(high) {
        high *= 2;
        if high > 1 << 40 {
            return u64::MAX;
        }
    }
    let mut low = 0;
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if proves(mid) { high = mid } else { low = mid }
    }
    high
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SplitMix64: a deterministic stream of uniforms in [0, 1).
    struct Rng(u64);

    impl Rng {
        fn uniform(&mut self) -> f64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            (z ^ (z >> 31)) as f64 / 2f64.powi(64)
        }
    }

    /// `ln ∫_a^b L(θ₁) dθ₁ / (b − a)` by Simpson's rule: the mixtures from their definition.
    fn mixture(n: u64, t: u64, q: f64, (a, b): (f64, f64)) -> f64 {
        let steps = 20_000;
        let h = (b - a) / steps as f64;
        let ln_l = |x: f64| t as f64 * (x / q).ln() + (n - t) as f64 * ((1.0 - x) / (1.0 - q)).ln();
        let sum: f64 = (0..=steps)
            .map(|i| {
                let x = (a + i as f64 * h).clamp(a + 1e-12, b - 1e-12);
                let weight = if i == 0 || i == steps {
                    1.0
                } else if i % 2 == 1 {
                    4.0
                } else {
                    2.0
                };
                weight * ln_l(x).exp()
            })
            .sum();
        (sum * h / 3.0 / (b - a)).ln()
    }

    #[test]
    fn closed_forms_match_the_mixtures_they_stand_for() {
        let q = 0.01;
        for (n, t) in [(50, 0), (200, 1), (600, 3), (1500, 8), (300, 9), (120, 40)] {
            let uniform = mixture(n, t, q, (0.0, q));
            let atom = if t == 0 {
                -(n as f64) * (1.0 - q).ln()
            } else {
                f64::NEG_INFINITY
            };
            let expected = ln_add_exp(atom, uniform) - std::f64::consts::LN_2;
            let got = log_evidence_for(n, t, q);
            assert!(
                (got - expected).abs() < 1e-6,
                "for ({n}, {t}): {got} vs {expected}"
            );
            let expected = mixture(n, t, q, (q, 1.0));
            let got = log_evidence_against(n, t, q);
            assert!(
                (got - expected).abs() < 1e-6,
                "against ({n}, {t}): {got} vs {expected}"
            );
        }
        assert!((ln_gamma(10.0) - 362_880f64.ln()).abs() < 1e-12);
        assert!((ln_gamma(0.5) - std::f64::consts::PI.sqrt().ln()).abs() < 1e-12);
    }

    #[test]
    fn a_server_that_never_misses_is_proven_after_modestly_more_than_the_fixed_minimum() {
        // Derived: the atom alone proves once ½ (1 − q)^−n ≥ 1/α, n ≥ ln(2/α) / −ln(1 − q).
        let bound = ((2.0f64 / 0.01).ln() / -(0.99f64).ln()).ceil() as u64;
        assert_eq!(bound, 528);
        let fixed = super::super::early_stopping::min_requests(0, 0.99, 0.99);
        let sequential = fewest_requests(0.99, 0.99);
        assert_eq!(fixed, 459);
        assert!((fixed..=bound).contains(&sequential), "{sequential}");
        // A third of the fixed-sample probe.
        let probe = super::super::early_stopping::probe_requests(0.99, 0.99);
        assert!(3 * sequential <= probe + 30, "{sequential} vs {probe}");
        assert_eq!(verdict(sequential, 0, 0.99, 0.99), Verdict::Proven);
        assert_eq!(
            verdict(sequential - 1, 0, 0.99, 0.99),
            Verdict::Inconclusive
        );
    }

    /// The largest miss count that proves, and the smallest that refutes, at each `n ≤ len`
    /// (the verdicts are monotone in the misses: two boundaries).
    fn boundaries(len: u64, p: f64, c: f64) -> (Vec<Option<u64>>, Vec<u64>) {
        let (mut prove, mut refute) = (Vec::new(), Vec::new());
        let mut most: Option<u64> = None;
        let mut least = 1u64;
        for n in 0..=len {
            while most.map_or(0, |m| m + 1) <= n
                && verdict(n, most.map_or(0, |m| m + 1), p, c) == Verdict::Proven
            {
                most = Some(most.map_or(0, |m| m + 1));
            }
            while least <= n && verdict(n, least, p, c) != Verdict::Refuted {
                least += 1;
            }
            prove.push(most);
            refute.push(least);
        }
        (prove, refute)
    }

    /// Over `streams` seeded Bernoulli(`theta`) streams of `len` samples, looked at after
    /// every sample: how many were ever proven, how many ever refuted, and the mean sample
    /// count at the first verdict (`len` when none came).
    fn simulate(theta: f64, p: f64, c: f64, streams: u64, len: u64) -> (u64, u64, f64) {
        let (prove, refute) = boundaries(len, p, c);
        let (mut proven, mut refuted, mut samples) = (0, 0, 0u64);
        for seed in 0..streams {
            let mut rng = Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ 0x1234_5678);
            let mut misses = 0u64;
            let mut decided = len;
            for n in 1..=len {
                misses += u64::from(rng.uniform() < theta);
                let n_ = n as usize;
                if prove[n_].is_some_and(|most| misses <= most) {
                    proven += 1;
                    decided = n;
                    break;
                }
                if misses >= refute[n_] {
                    refuted += 1;
                    decided = n;
                    break;
                }
            }
            samples += decided;
        }
        (proven, refuted, samples as f64 / streams as f64)
    }

    #[test]
    fn at_the_boundary_neither_error_exceeds_one_minus_the_confidence() {
        // A server exactly at the target, looked at after every request for 2,000 requests:
        // a false proof (or refutation) in at most 1 − c of 1,000 streams.
        for (p, c) in [(0.9, 0.95), (0.99, 0.99), (0.95, 0.9)] {
            let streams = 1000;
            let (proven, refuted, _) = simulate(1.0 - p, p, c, streams, 2000);
            let allowed = ((1.0 - c) * streams as f64) as u64;
            eprintln!(
                "p {p} c {c}: {proven} false proofs, {refuted} false refutations of {streams}"
            );
            assert!(
                proven <= allowed,
                "p {p} c {c}: {proven} false proofs of {streams}"
            );
            assert!(
                refuted <= allowed,
                "p {p} c {c}: {refuted} false refutations"
            );
        }
    }

    #[test]
    fn the_fixed_sample_test_looked_at_every_request_is_not_valid() {
        // Why a new test: MLPerf's binomial verdict checked after every request at the
        // boundary proves a failing server far more often than 1 − c.
        let (p, c, len) = (0.9, 0.95, 2000u64);
        let judge = super::super::early_stopping::judge;
        let mut false_proofs = 0;
        for seed in 0..200u64 {
            let mut rng = Rng(seed ^ 0xdead_beef);
            let mut misses = 0;
            for n in 1..=len {
                misses += u64::from(rng.uniform() < 1.0 - p);
                if n % 10 == 0 && judge(n, misses, p, c) == Verdict::Proven {
                    false_proofs += 1;
                    break;
                }
            }
        }
        eprintln!("fixed-sample test looked at every 10 requests: {false_proofs} of 200");
        assert!(false_proofs > 20, "{false_proofs} of 200 (5 % would be 10)");
    }

    #[test]
    fn far_from_the_boundary_a_verdict_takes_a_fraction_of_the_fixed_probe() {
        // Derived bound (Wald): the mixture over an interval I of alternatives is at least
        // π(I) · min_{θ₁ ∈ I} L(θ₁), and ln L(θ₁) grows by d(θ, θ₁) = θ ln(θ₁/q) +
        // (1 − θ) ln((1 − θ₁)/(1 − q)) a sample on average, so the verdict comes after about
        // n* = (ln(1/α) + ln(1/π(I))) / min_I d samples.
        let (p, c) = (0.99, 0.99);
        let q = 1.0 - p;
        let probe = super::super::early_stopping::probe_requests(p, c) as f64;
        let drift = |theta: f64, x: f64| {
            theta * (x / q).ln() + (1.0 - theta) * ((1.0 - x) / (1.0 - q)).ln()
        };
        let expected = |theta: f64, (a, b): (f64, f64), mass: f64| {
            ((1.0 / (1.0 - c)).ln() + (1.0 / mass).ln()) / drift(theta, a).min(drift(theta, b))
        };
        // Five times the budget (a server well over capacity): I = [3q, 7q], π(I) = 4q/(1−q).
        let theta = 5.0 * q;
        let bound = expected(theta, (3.0 * q, 7.0 * q), 4.0 * q / (1.0 - q));
        let (proven, refuted, mean) = simulate(theta, p, c, 400, 4000);
        assert_eq!(proven, 0);
        assert!(refuted >= 396, "{refuted}");
        assert!(mean <= bound && mean < probe / 4.0, "{mean} vs {bound:.0}");
        eprintln!("five times the budget: {mean:.0} samples (bound {bound:.0})");
        // Half the requests missing: refuted within a handful.
        let (_, refuted, mean) = simulate(0.5, p, c, 400, 100);
        assert_eq!(refuted, 400);
        assert!(mean <= 8.0, "{mean}");
        eprintln!("half missing: {mean:.1} samples");
        // A fifth of the budget: I = [q/10, q/2], π(I) = ½ · 0.4.
        let theta = q / 5.0;
        let bound = expected(theta, (q / 10.0, q / 2.0), 0.2);
        let (proven, refuted, mean) = simulate(theta, p, c, 400, 4000);
        assert_eq!(refuted, 0);
        assert!(proven >= 396, "{proven}");
        assert!(mean <= bound && mean < probe, "{mean} vs {bound:.0}");
        eprintln!("fifth of the budget: {mean:.0} samples (bound {bound:.0}, probe {probe})");
    }
}
