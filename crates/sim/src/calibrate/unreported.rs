//! What a server that reports neither its slots nor its step budget (vLLM, SGLang, TGI, a
//! gateway, a test server) leaves to the probes: whether it queued at twice the slots the
//! waves found (a lower bound when it ran all of the largest wave), and whether its steps are
//! bounded at a typical engine's budget or not at all.

use super::coordinates::robust;
use super::{Facts, MeasuredProbe, fit::Fit, fit::FitError, fit::fit};

/// Whether the plan's probe at twice `slots` queued: its median TTFT exceeds that of the
/// sweep's probe at `slots` by more than half of that probe's service time (a request queued
/// behind a full batch waits about one service). `None` when either probe is missing or the
/// service is too short to tell.
pub fn queued_at_twice(probes: &[MeasuredProbe], slots: u32) -> Option<bool> {
    let at = |concurrency: u32| {
        probes.iter().find(|p| {
            p.shape.concurrency == concurrency
                && p.shape.prompt_tokens <= 128
                && p.shape.output_tokens > super::PREFILL_ANSWER
        })
    };
    let (full, twice) = (at(slots)?, at(slots.checked_mul(2)?)?);
    let service = full.ttft + full.tpot * f64::from(full.shape.output_tokens.saturating_sub(1));
    // A server answering faster than that cannot show a queue above the client's jitter.
    (service >= MIN_SERVICE_SECS).then(|| twice.ttft - full.ttft > service / 2.0)
}

/// The shortest service, seconds, whose queue is told from jitter (the waves' 20 ms).
const MIN_SERVICE_SECS: f64 = 0.020;

/// Fits `probes` with the server's step budget unknown: at `facts.batch_tokens` (a typical
/// engine's) and, when some probe's prompts arriving together exceed that budget, unbounded
/// too (every slot's whole context in one step: a server whose prompts cost the same however
/// many arrive together), keeping the unbounded one only when its squared error is at least a
/// fifth lower — or, when the step-budget probe saw a long prompt run beside a decoding stream
/// without growing its steps (`facts.prompts_beside_decodes`), the other way round: the
/// bounded one only when its squared error is at least a fifth lower. Both are fitted whether
/// or not the bounded fit is poor: with free small-batch factors the bounded engine can mimic
/// an unbounded server within the poor threshold (cheap prefill steps, decode paid per
/// sequence), so the fits alone tell them apart only by a margin that a loaded machine's noise
/// at a few hundred clients can erase; the probe's two requests are not loaded. Returns the
/// fit and the facts it was made with.
pub fn fit_unknown_budget(
    facts: &Facts,
    probes: &[MeasuredProbe],
) -> Result<(Fit, Facts), FitError> {
    let bounded = fit(facts, probes)?;
    let unbounded_facts = Facts {
        batch_tokens: facts
            .slots
            .max(1)
            .saturating_mul(facts.context_per_slot.max(1)),
        ..facts.clone()
    };
    if !budget_binds(facts, probes) || unbounded_facts.batch_tokens <= facts.batch_tokens {
        // Every probe's prompts fit one bounded step: the two fits would be the same.
        return Ok((bounded, facts.clone()));
    }
    let unbounded = fit(&unbounded_facts, probes)?;
    let losses = (robust_loss(&bounded), robust_loss(&unbounded));
    Ok(if keeps_unbounded(losses, facts.prompts_beside_decodes) {
        (unbounded, unbounded_facts)
    } else {
        (bounded, facts.clone())
    })
}

/// Whether the prompts some probe sends together (as many as the slots run, shared by the
/// engines) exceed one step of `facts.batch_tokens`, so that a bound on the step changes its
/// figures.
fn budget_binds(facts: &Facts, probes: &[MeasuredProbe]) -> bool {
    probes.iter().any(|p| {
        let together = p
            .shape
            .concurrency
            .min(facts.slots.max(1))
            .div_ceil(facts.replicas());
        u64::from(together) * u64::from(p.shape.prompt_tokens) > u64::from(facts.batch_tokens)
    })
}

/// What `fit` left of the loss both fits minimise: the sum of its figures' squared robust
/// log-ratios. Unlike the RMS error, a figure neither engine reproduces (a loaded client's
/// late wake-ups at a few hundred clients) weighs about as much in either fit's loss, so it
/// cannot hide which of them reproduces the rest.
fn robust_loss(fit: &Fit) -> f64 {
    fit.residuals
        .iter()
        .map(|r| robust((1.0 + r.relative_error).max(1e-12).ln()).powi(2))
        .sum()
}

/// Whether the unbounded fit is kept over the bounded one, given their [`robust_loss`]es: when
/// its loss is at least a fifth lower, or — the prompts seen run `beside` the decodes — unless
/// the bounded one's is at least a fifth lower.
fn keeps_unbounded((bounded, unbounded): (f64, f64), beside: bool) -> bool {
    if beside {
        bounded >= BUDGET_GAIN * unbounded
    } else {
        unbounded < BUDGET_GAIN * bounded
    }
}

/// How much lower the other budget's loss must come to be kept over the presumed one.
const BUDGET_GAIN: f64 = 0.8;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibrate::ProbeShape;
    use crate::calibrate::fit::tests::{cpu_constants, facts, measured_on};

    /// Four slots of 2,048 tokens at a budget of 256 tokens a step, so that the plan's long
    /// prompts (one of 1,024, four of 512 together) run in chunks when bounded.
    fn bounded_facts() -> Facts {
        Facts {
            batch_tokens: 256,
            ..facts()
        }
    }

    /// The plan's figures on the engine with `facts` and CPU-shaped constants, exact.
    fn exact_on(facts: &Facts) -> Vec<MeasuredProbe> {
        measured_on(facts, &cpu_constants(facts), |_| 1.0)
    }

    #[test]
    fn the_budget_the_figures_were_made_with_is_the_one_kept() {
        let bounded = bounded_facts();
        let unbounded = Facts {
            batch_tokens: 4 * 2048,
            ..bounded.clone()
        };
        // With or without the step-budget probe's evidence of prompts run beside the decodes:
        // exact figures leave the other budget's fit far behind.
        for beside in [false, true] {
            let start = Facts {
                prompts_beside_decodes: beside,
                ..bounded.clone()
            };
            for truth in [&bounded, &unbounded] {
                let (fit, kept) = fit_unknown_budget(&start, &exact_on(truth)).unwrap();
                assert_eq!(kept.batch_tokens, truth.batch_tokens, "{fit:?}");
                assert!(fit.rms_relative_error < 0.02, "{fit:?}");
            }
        }
    }

    #[test]
    fn a_prompt_seen_beside_the_decodes_turns_a_near_tie_to_no_bound() {
        // Losses within a fifth of each other: the bound by default, none with the probe's
        // evidence; beyond it, the better fit either way.
        assert!(!keeps_unbounded((10.0, 9.0), false));
        assert!(keeps_unbounded((10.0, 9.0), true));
        assert!(keeps_unbounded((9.0, 10.0), true));
        assert!(keeps_unbounded((10.0, 4.0), false));
        assert!(!keeps_unbounded((4.0, 10.0), true));
        // The margin, exactly: a fifth lower.
        assert!(keeps_unbounded((10.0, 7.999), false));
        assert!(!keeps_unbounded((10.0, 8.001), false));
        assert!(!keeps_unbounded((7.999, 10.0), true));
        assert!(keeps_unbounded((8.001, 10.0), true));
    }

    #[test]
    fn a_figure_neither_fit_reproduces_weighs_alike_in_both_losses() {
        let residual = |relative_error: f64| crate::calibrate::fit::Residual {
            shape: probe(256, 0.1).shape,
            metric: "ttft".to_string(),
            measured: 0.1,
            predicted: 0.1 * (1.0 + relative_error),
            relative_error,
        };
        let with = |errors: &[f64]| Fit {
            residuals: errors.iter().copied().map(residual).collect(),
            ..fit(&bounded_facts(), &exact_on(&bounded_facts())).unwrap()
        };
        // In the loss's scale (a log-ratio of 0.02): a figure one scale off costs ln 2 scales²,
        // a tenth as far off about a hundredth of that; one 30 % and one 100 % off cost within
        // 40 % of each other (their squared log-ratios: 7×).
        let scale2 = 0.02f64.powi(2);
        let one = robust_loss(&with(&[0.02f64.exp() - 1.0])) / scale2;
        assert!((one - 2f64.ln()).abs() < 1e-9, "{one}");
        let small = robust_loss(&with(&[0.002f64.exp() - 1.0])) / scale2;
        assert!((small - 1.01f64.ln()).abs() < 1e-9, "{small}");
        let (near, far) = (robust_loss(&with(&[0.3])), robust_loss(&with(&[1.0])));
        assert!(far / near < 1.4 && far > near, "{near} {far}");
    }

    #[test]
    fn a_budget_no_probe_exceeds_is_not_fitted_twice() {
        let roomy = Facts {
            batch_tokens: 4096,
            ..bounded_facts()
        };
        let probes = exact_on(&roomy);
        assert!(!budget_binds(&roomy, &probes));
        assert!(budget_binds(&bounded_facts(), &probes));
    }

    fn probe(concurrency: u32, ttft: f64) -> MeasuredProbe {
        MeasuredProbe {
            shape: ProbeShape {
                concurrency,
                prompt_tokens: 64,
                output_tokens: 48,
                requests: 3 * concurrency,
            },
            ttft,
            tpot: 0.010,
        }
    }

    #[test]
    fn a_probe_at_twice_the_slots_queued_when_it_waited_half_a_service_more() {
        // A service of 0.1 + 47 × 0.01 = 0.57 s at 4.
        let queued = [probe(4, 0.1), probe(8, 0.1 + 0.57)];
        assert_eq!(queued_at_twice(&queued, 4), Some(true));
        let ran = [probe(4, 0.1), probe(8, 0.104)];
        assert_eq!(queued_at_twice(&ran, 4), Some(false));
        assert_eq!(queued_at_twice(&ran[..1], 4), None);
        // An instant server: 1 ms of service cannot show a queue.
        let instant = |c, ttft| MeasuredProbe {
            tpot: 0.000_01,
            ..probe(c, ttft)
        };
        assert_eq!(
            queued_at_twice(&[instant(4, 0.0005), instant(8, 0.002)], 4),
            None
        );
    }
}
