//! `goodput compare A B`: every figure of two runs side by side with absolute and relative
//! deltas, a significance test per latency distribution (Mann–Whitney U over the journals when
//! both runs have `requests.jsonl` beside their report, else a bootstrap over the reports'
//! quantile points), and warnings when the conditions differ. Text, Markdown, HTML or JSON.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};
use goodput_core::decide::compare::{self, Side};
use goodput_core::decide::significance::Thresholds;

use crate::args::analysis::{CompareArgs, CompareFormat};
use crate::exit::{EXIT_OK, EXIT_RUN_FAILED};
use crate::output::{color, comparison, html};
use crate::wiring::inputs::load_report;

/// Runs `goodput compare`.
pub(crate) fn run(args: CompareArgs) -> Result<ExitCode> {
    if !(0.0..1.0).contains(&args.alpha) || args.alpha == 0.0 {
        bail!("--alpha: must be in (0, 1), e.g. 0.01");
    }
    if args.min_effect < 0.0 {
        bail!("--min-effect: must be a non-negative fraction, e.g. 0.05");
    }
    let a = load_report(&args.baseline)?;
    let b = load_report(&args.candidate)?;
    let (samples_a, samples_b) = (a.samples()?, b.samples()?);
    let thresholds = Thresholds {
        alpha: args.alpha,
        min_effect: args.min_effect,
    };
    let result = compare::compare(
        Side {
            report: &a.value,
            samples: samples_a.as_ref(),
        },
        Side {
            report: &b.value,
            samples: samples_b.as_ref(),
        },
        thresholds,
    );
    let same_label = a.label == b.label;
    let labels = if same_label {
        ["A".to_string(), "B".to_string()]
    } else {
        [a.label.clone(), b.label.clone()]
    };
    let labels = [labels[0].as_str(), labels[1].as_str()];
    let text = render(args.format, labels, [&a.value, &b.value], &result)?;
    emit(&args, text)?;
    let failed = args.fail_on_regression && result.has_regression();
    Ok(ExitCode::from(if failed {
        EXIT_RUN_FAILED
    } else {
        EXIT_OK
    }))
}

fn render(
    format: CompareFormat,
    labels: [&str; 2],
    [a, b]: [&serde_json::Value; 2],
    result: &compare::Comparison,
) -> Result<String> {
    Ok(match format {
        CompareFormat::Text => comparison::text(labels, result),
        CompareFormat::Markdown => comparison::markdown(labels, result),
        CompareFormat::Html => html::render_comparison(a, b, labels, result)?,
        CompareFormat::Json => {
            serde_json::to_string_pretty(result).context("serializing the comparison")? + "\n"
        }
    })
}

/// Writes the output to `--output`, or to stdout (text coloured on a terminal).
fn emit(args: &CompareArgs, text: String) -> Result<()> {
    match &args.output {
        Some(path) => {
            std::fs::write(path, &text).with_context(|| format!("cannot write {}", path.display()))
        }
        None => {
            let painted = if args.format == CompareFormat::Text {
                color::paint(&text, color::stdout_enabled())
            } else {
                text
            };
            std::io::stdout()
                .lock()
                .write_all(painted.as_bytes())
                .context("writing to stdout")
        }
    }
}
