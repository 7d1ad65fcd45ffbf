//! Tests of the fit: constants recovered from the engine's own figures, noise and its
//! verdicts, a server whose latency lies outside the engine, too few figures.
#![allow(clippy::unwrap_used)]

use super::super::plan;
use super::*;

/// A small model on four slots of 2,048 tokens (the other tests' server).
pub(crate) fn facts() -> Facts {
    Facts {
        slots: 4,
        context_per_slot: 2048,
        hidden: 512,
        vocab: 32_000,
        params: 42_082_816.0,
        weight_dtype: goodput_protocol::hardware::DType::Fp32,
        ..Facts::default()
    }
}

fn truth() -> Constants {
    cpu_constants(&facts())
}

/// Constants shaped like a CPU server's, at the batch points of `facts`' plan: GEMMs over one
/// token nine times slower per token than over a full batch, the slowdown fading by the
/// shortest prefill probe.
pub(crate) fn cpu_constants(facts: &Facts) -> Constants {
    let shapes = plan(facts, 1);
    let (points, full_rate_tokens) = batch_layout(facts, &shapes);
    let slowdown = |n: u32| 1.0 + 8.0 / f64::from(n).powf(0.8);
    Constants {
        weight_gb_per_sec: 18.0,
        gemm_gflops: 85.0,
        attention_gflops: 30.0,
        kv_gb_per_sec: 1.5,
        batch_factors: points
            .into_iter()
            .map(|tokens| BatchFactor {
                tokens,
                factor: slowdown(tokens),
            })
            .collect(),
        full_rate_tokens,
        latency_ms: 20.0,
        latency_holds_slot: false,
    }
}

/// What the engine with `constants` measures on every probe of the plan, each figure
/// scaled by `noise(i)`.
fn measured(constants: &Constants, noise: impl Fn(usize) -> f64) -> Vec<MeasuredProbe> {
    measured_on(&facts(), constants, noise)
}

/// What the engine with `facts` and `constants` measures on every probe of `facts`' plan,
/// each figure scaled by `noise(i)`.
pub(crate) fn measured_on(
    facts: &Facts,
    constants: &Constants,
    noise: impl Fn(usize) -> f64,
) -> Vec<MeasuredProbe> {
    let config = calibrated_config(facts, constants);
    plan(facts, 1)
        .iter()
        .enumerate()
        .map(|(i, shape)| {
            let p = predict(&config, shape);
            MeasuredProbe {
                shape: *shape,
                ttft: p.ttft * noise(2 * i),
                tpot: p.tpot * noise(2 * i + 1),
            }
        })
        .collect()
}

#[test]
fn the_fit_recovers_the_constants_the_measurements_were_made_with() {
    let fit = fit(&facts(), &measured(&truth(), |_| 1.0)).unwrap();
    let truth = truth();
    assert_eq!(fit.constants.full_rate_tokens, truth.full_rate_tokens);
    assert_eq!(
        fit.table.len(),
        5 + truth.batch_factors.len(),
        "{:?}",
        fit.table
    );
    for ((name, _), (got, want)) in truth
        .names()
        .iter()
        .zip(fit.constants.values().iter().zip(truth.values()))
    {
        assert!((got / want - 1.0).abs() < 0.03, "{name}: {got} vs {want}");
    }
    assert!(fit.rms_relative_error < 0.005, "{fit:?}");
    assert!(!fit.poor);
    assert!(
        !fit.constants.latency_holds_slot,
        "before the queue, as measured"
    );
}

#[test]
fn noisy_measurements_give_uncertainties_and_a_poor_verdict_with_its_reason() {
    let noisy = measured(&truth(), |i| if i % 3 == 0 { 1.8 } else { 0.6 });
    let fit = fit(&facts(), &noisy).unwrap();
    assert!(fit.poor, "{fit:?}");
    assert!(fit.problems[0].contains("RMS error"), "{:?}", fit.problems);
    let slight = measured(&truth(), |i| 1.0 + 0.02 * ((i % 3) as f64 - 1.0));
    let fit = super::fit(&facts(), &slight).unwrap();
    assert!(!fit.poor, "{fit:?}");
    let gemm = &fit.table[1];
    assert!(
        gemm.relative_uncertainty
            .is_some_and(|u| u > 0.0 && u < 0.2),
        "{gemm:?}"
    );
}

#[test]
fn the_servers_own_noise_tells_a_noisy_server_from_a_wrong_form() {
    let noisy = measured(&truth(), |i| if i % 3 == 0 { 1.8 } else { 0.6 });
    let poor = fit(&facts(), &noisy).unwrap();
    let cause = |fit: &Fit| {
        fit.problems[0]
            .split(" — ")
            .nth(1)
            .unwrap_or("")
            .to_string()
    };
    assert!(
        cause(&poor).contains("measure more than one pass"),
        "{poor:?}"
    );
    // Passes that differed by as much as the misfit: noise.
    let judged = poor.clone().with_server_noise(poor.rms_relative_error);
    assert!(judged.poor && judged.server_noise.is_some());
    assert!(
        cause(&judged).contains("not the engine's form"),
        "{judged:?}"
    );
    // Passes that agreed within a tenth of it: the form.
    let judged = poor
        .clone()
        .with_server_noise(poor.rms_relative_error / 10.0);
    assert!(
        cause(&judged).contains("the misfit is the engine's form"),
        "{judged:?}"
    );
    assert_eq!(judged.problems.len(), poor.problems.len());
    // A good fit on a noisy server says how close predictions can be; on a quiet one,
    // nothing.
    let good = fit(&facts(), &measured(&truth(), |_| 1.0)).unwrap();
    let noisy_server = good.clone().with_server_noise(0.12);
    assert!(
        noisy_server
            .problems
            .iter()
            .any(|p| p.contains("vary by 12.0 %")),
        "{noisy_server:?}"
    );
    assert_eq!(good.clone().with_server_noise(0.02).problems, good.problems);
}

#[test]
fn too_few_or_invalid_measurements_are_refused() {
    let all = measured(&truth(), |_| 1.0);
    assert!(matches!(fit(&facts(), &all[..0]), Err(FitError::TooFew(0))));
    let few = fit(&facts(), &all[..2]).unwrap();
    assert!(
        few.poor && few.problems[0].contains("underdetermined"),
        "{few:?}"
    );
    let mut bad = all;
    bad[0].ttft = f64::NAN;
    assert!(matches!(fit(&facts(), &bad), Err(FitError::Invalid(_))));
}

/// A server whose 20 ms latency holds the slot: the probe at twice the slots (its queued
/// requests wait for it after a slot frees) tells it from the same latency before the queue,
/// and the fit places it there, recovering it; a server whose latency passes before the queue
/// keeps it there (the first test).
#[test]
fn a_latency_holding_the_slot_is_placed_there_by_the_queued_probe() {
    let truth = Constants {
        latency_holds_slot: true,
        ..truth()
    };
    let measured = measured(&truth, |_| 1.0);
    let fit = fit(&facts(), &measured).unwrap();
    assert!(fit.constants.latency_holds_slot, "{fit:?}");
    assert_eq!(fit.table[4].name, "slot_setup_latency");
    // Every figure reproduced, the latency recovered within a quarter: the probes leave
    // directions flat where constants trade (the weights' 18 GB/s came back as 10.9, the
    // batch-1 factor 9 as 2.8 and the 20 ms as 16.3, every figure within 10⁻⁹).
    let latency = fit.constants.latency_ms;
    assert!((latency / truth.latency_ms - 1.0).abs() < 0.25, "{latency}");
    assert!(fit.rms_relative_error < 0.005, "{fit:?}");
    // The same constants with the latency before the queue: the queued probe's TTFT comes
    // out short.
    let before = Constants {
        latency_holds_slot: false,
        ..fit.constants
    };
    let queued = measured.last().unwrap();
    let short = predict(&calibrated_config(&facts(), &before), &queued.shape).ttft;
    // (Two rounds at twice the slots, so the median request queued: 38 ms more of its 1.52 s
    // than with the same latency before the queue, on this engine.)
    assert!(
        queued.ttft - short > latency / 3.0 * 1e-3,
        "{} vs {short}",
        queued.ttft
    );
}

/// A quarter of the figures or fewer far off (a robust fit's left-out figures) is said, not
/// judged poor; more is poor.
#[test]
fn a_few_figures_far_off_are_named_without_a_poor_verdict() {
    let shape = plan(&facts(), 1)[0];
    let residuals = |far: usize| -> Vec<Residual> {
        (0..20)
            .map(|i| {
                let error = if i < far { -0.3 } else { 0.01 };
                Residual {
                    shape,
                    metric: "ttft".to_string(),
                    measured: 0.1,
                    predicted: 0.1 * (1.0 + error),
                    relative_error: error,
                }
            })
            .collect()
    };
    let rms = |r: &[Residual]| {
        (r.iter().map(|r| r.relative_error.powi(2)).sum::<f64>() / r.len() as f64).sqrt()
    };
    let few = residuals(5);
    assert!(rms(&few) > POOR_RMS);
    assert!(!is_poor(&few, 10, rms(&few)));
    let said = problems(&[], &few, rms(&few), Some(0.01));
    assert!(
        said[0].starts_with("5 of 20 figures are more than 10 % off"),
        "{said:?}"
    );
    let many = residuals(6);
    assert!(is_poor(&many, 10, rms(&many)));
    let said = problems(&[], &many, rms(&many), Some(0.01));
    assert!(said[0].starts_with("RMS error"), "{said:?}");
    assert!(
        is_poor(&few, 20, rms(&few)),
        "no more figures than constants"
    );
}
