//! A fit's verdict: whether it is poor, and the problems it names — too few figures, a large
//! error (its worst figure, and whether the server's noise or the engine's form explains it),
//! a few figures the robust loss left out, constants the probes leave undetermined.

use super::fit::{ConstantFit, NEGLIGIBLE, NOISY, POOR_RMS, Residual, UNBOUNDED};

/// Whether a fit is poor: no more figures than constants, or an RMS error over [`POOR_RMS`]
/// with more than a quarter of the figures that far off. Fewer are figures the robust loss
/// left out — the engine does not reproduce them, and they did not bend the rest (the
/// simulated GPU server of 2026-12-05: 5 wave TTFTs of 28 figures 11–36 % off, the rest
/// within 2 %, RMS 11.2 %, every held-out median within 1.5 %).
pub(super) fn is_poor(residuals: &[Residual], constants: usize, rms: f64) -> bool {
    residuals.len() <= constants || (rms > POOR_RMS && 4 * far_off(residuals) > residuals.len())
}

/// How many figures the model misses by more than [`POOR_RMS`].
fn far_off(residuals: &[Residual]) -> usize {
    let far = |r: &&Residual| r.relative_error.abs() > POOR_RMS;
    residuals.iter().filter(far).count()
}

/// Why a fit is poor or where it is weak: too few figures, a large RMS error or the few figures
/// the robust loss left out (naming the worst figure, and whether the server's `noise` explains
/// it) and the constants the probes leave undetermined.
pub(super) fn problems(
    table: &[ConstantFit],
    residuals: &[Residual],
    rms: f64,
    noise: Option<f64>,
) -> Vec<String> {
    let mut out = Vec::new();
    if residuals.len() <= table.len() {
        out.push(format!(
            "only {} measured figures for {} constants: the fit is underdetermined",
            residuals.len(),
            table.len()
        ));
    }
    if let Some(misfit) = misfit(residuals, table.len(), rms, noise) {
        out.push(misfit);
    } else if let Some(noise) = noise.filter(|n| *n > NOISY) {
        out.push(format!(
            "the server's own figures vary by {:.1} % from one pass of the same probes to the \
             next: predictions of it can be no closer than that",
            noise * 100.0
        ));
    }
    for constant in table.iter().filter(|c| c.relative_uncertainty.is_none()) {
        out.push(if constant.value < NEGLIGIBLE {
            format!(
                "{} fell to 0: the probes see no cost of its own beyond the other constants'",
                constant.name
            )
        } else if constant.value > UNBOUNDED {
            format!(
                "{} grew without bound: what it prices costs nothing the probes can tell from \
                 the other constants'",
                constant.name
            )
        } else {
            format!(
                "{} is not determined by the probes (its value barely changes the predictions)",
                constant.name
            )
        });
    }
    out
}

/// The problem of a fit whose RMS error exceeds [`POOR_RMS`]: the worst figure, and whether the
/// fit is poor for it or left a few figures out.
fn misfit(
    residuals: &[Residual],
    constants: usize,
    rms: f64,
    noise: Option<f64>,
) -> Option<String> {
    if rms <= POOR_RMS {
        return None;
    }
    let worst = residuals
        .iter()
        .max_by(|a, b| a.relative_error.abs().total_cmp(&b.relative_error.abs()))?;
    let lead = if is_poor(residuals, constants, rms) {
        format!(
            "RMS error {:.1} % exceeds {:.0} %",
            rms * 100.0,
            POOR_RMS * 100.0
        )
    } else {
        format!(
            "{} of {} figures are more than {:.0} % off (RMS error {:.1} %), left out by \
             the robust loss: the engine does not reproduce them and they did not bend the \
             other figures; shapes like them are the least well predicted",
            far_off(residuals),
            residuals.len(),
            POOR_RMS * 100.0,
            rms * 100.0
        )
    };
    Some(format!(
        "{lead}: worst is {} at concurrency {}, {}-token prompts, {} answer tokens \
         (measured {:.1} ms, model {:.1} ms) — {}",
        worst.metric.to_uppercase(),
        worst.shape.concurrency,
        worst.shape.prompt_tokens,
        worst.shape.output_tokens,
        worst.measured * 1e3,
        worst.predicted * 1e3,
        misfit_cause(rms, noise)
    ))
}

/// What a poor fit's error comes from, as far as the server's measured noise tells.
fn misfit_cause(rms: f64, noise: Option<f64>) -> String {
    match noise {
        None => "the server is noisy (another load on the machine?) or behaves outside the \
                 engine's form (measure more than one pass to tell which)"
            .to_string(),
        Some(n) if n >= rms => format!(
            "the server itself varies by {:.1} % from one pass of the same probes to the next: \
             noise (another load on the machine?), not the engine's form",
            n * 100.0
        ),
        Some(n) => format!(
            "the server repeats its figures within {:.1} % from one pass to the next, so the \
             misfit is the engine's form, not noise",
            n * 100.0
        ),
    }
}
