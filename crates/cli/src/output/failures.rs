//! The terminal lines saying why requests failed: one example message per failure kind.

use std::fmt::Write as _;

use goodput_core::report::StepReport;

/// Appends `  why (kind): message` for every failure kind of the step.
pub(super) fn render(out: &mut String, step: &StepReport) {
    for (kind, message) in &step.requests.failure_examples {
        let short: String = message.chars().take(160).collect();
        let more = if short.len() < message.len() {
            "…"
        } else {
            ""
        };
        let _ = writeln!(out, "  why ({kind}): {short}{more}");
    }
}
