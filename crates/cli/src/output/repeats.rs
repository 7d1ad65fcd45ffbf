//! The terminal summary of `goodput run --repeats N`: each headline figure across the runs —
//! mean with the half-width of its 95 % confidence interval, standard deviation (and as a
//! share of the mean), range.

use std::fmt::Write as _;

use goodput_core::report::repeats::RepeatsReport;

/// The figures across the runs, one line each.
pub(crate) fn render(out: &mut String, repeats: &RepeatsReport) {
    let _ = writeln!(
        out,
        "\nAcross {} runs: mean ± {:.0} % confidence interval, run-to-run spread, range",
        repeats.runs,
        repeats.confidence * 100.0
    );
    for figure in &repeats.figures {
        let digits = if figure.mean.abs() >= 100.0 { 1 } else { 2 };
        let half = figure.ci_high.map(|high| high - figure.mean);
        let mean = match half {
            Some(half) => format!("{:.digits$} ± {half:.digits$}", figure.mean),
            None => format!("{:.digits$}", figure.mean),
        };
        let spread = match (figure.sd, figure.cv) {
            (Some(sd), Some(cv)) => format!("sd {sd:.digits$} ({:.1} %)", cv * 100.0),
            (Some(sd), None) => format!("sd {sd:.digits$}"),
            _ => "one run".to_string(),
        };
        let _ = writeln!(
            out,
            "  {:<16}{:>22} {:<9}{:<22}{:.digits$}–{:.digits$}",
            figure.name, mean, figure.unit, spread, figure.min, figure.max
        );
    }
}
