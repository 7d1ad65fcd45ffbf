//! The HTML exporter: `report.html` and the comparison page, each one self-contained file. The
//! report (or the runs and their comparisons) is embedded as JSON and drawn by an inline script
//! into tables and inline SVG charts; nothing is fetched (no CDN, fonts or images). The command
//! line and the Python package both render through here, so the page is designed once. The
//! pages of `goodput ui` are drawn here too ([`history`]: the runs of a history store and a
//! figure's trend), and the report and comparison pages it serves are these same pages with a
//! bar of links on top.

use serde::Serialize;
use serde_json::{Value, json};

use crate::decide::compare::Comparison;

pub mod history;

const STYLE: &str = include_str!("style.css");
/// The page script, in parts: helpers and charts, the report page, its optional sections and
/// `main`, the reasoning/tool-call/session sections, the comparison page, the tune page, the
/// pages of `goodput ui`. Concatenated inside one function scope.
const SCRIPTS: [&str; 7] = [
    include_str!("base.js"),
    include_str!("report.js"),
    include_str!("sections.js"),
    include_str!("channels.js"),
    include_str!("compare.js"),
    include_str!("tune.js"),
    include_str!("history.js"),
];

/// A link in the bar on top of a page `goodput ui` serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NavLink {
    /// The text shown.
    pub label: String,
    /// Where it goes.
    pub href: String,
}

impl NavLink {
    /// A link.
    pub fn new(label: impl Into<String>, href: impl Into<String>) -> NavLink {
        NavLink {
            label: label.into(),
            href: href.into(),
        }
    }
}

/// One run on a comparison page.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct LabelledRun<'a> {
    /// The name shown for the run (its directory, or A, B, …).
    pub label: &'a str,
    /// The run's report as JSON.
    pub report: &'a Value,
}

/// One candidate judged against the baseline (the first run).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct CandidateComparison<'a> {
    /// Index of the candidate in the runs.
    pub candidate: usize,
    /// The comparison of that candidate against the baseline.
    pub comparison: &'a Comparison,
}

/// The report (as JSON) as one HTML page.
pub fn render_report(report: &Value) -> Result<String, serde_json::Error> {
    render_report_with(report, &[])
}

/// The report page with a bar of links on top (`goodput ui`).
pub fn render_report_with(report: &Value, nav: &[NavLink]) -> Result<String, serde_json::Error> {
    let text = |pointer: &str| {
        report
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or("")
    };
    let title = format!(
        "goodput report · {} · {}",
        text("/run/model"),
        text("/run/started_at")
    );
    page(
        &title,
        &json!({"mode": "report", "report": report, "nav": nav}),
    )
}

/// Several runs overlaid on one page, each candidate compared against the first run.
pub fn render_comparison(
    runs: &[LabelledRun<'_>],
    comparisons: &[CandidateComparison<'_>],
) -> Result<String, serde_json::Error> {
    render_comparison_with(runs, comparisons, &[])
}

/// The comparison page with a bar of links on top (`goodput ui`).
pub fn render_comparison_with(
    runs: &[LabelledRun<'_>],
    comparisons: &[CandidateComparison<'_>],
    nav: &[NavLink],
) -> Result<String, serde_json::Error> {
    let labels: Vec<&str> = runs.iter().map(|r| r.label).collect();
    let title = format!("goodput comparison · {}", labels.join(" vs "));
    let data = json!({"mode": "compare", "runs": runs, "comparisons": comparisons, "nav": nav});
    page(&title, &data)
}

pub(crate) fn page(title: &str, data: &Value) -> Result<String, serde_json::Error> {
    let json = serde_json::to_string(data)?;
    let script = format!("(function () {{\n{}\nmain();\n}})();\n", SCRIPTS.join("\n"));
    Ok(format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"color-scheme\" content=\"light dark\">\n\
         <title>{}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n\
         <main id=\"content\"></main>\n\
         <footer><p id=\"render-status\">This report needs JavaScript to draw its tables and charts; \
         the data is in report.json.</p></footer>\n\
         <script type=\"application/json\" id=\"goodput-data\">{}</script>\n\
         <script>\n{script}</script>\n</body>\n</html>\n",
        escape_text(title),
        escape_script_json(&json)
    ))
}

/// Text for an HTML element.
fn escape_text(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// JSON that cannot end its `<script>` element early: `<`, `>` and `&` only occur inside JSON
/// strings, where their `\u` escapes mean the same.
fn escape_script_json(json: &str) -> String {
    json.replace('<', "\\u003c")
        .replace('>', "\\u003e")
        .replace('&', "\\u0026")
        .replace('\u{2028}', "\\u2028")
        .replace('\u{2029}', "\\u2029")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn embedded_json_cannot_close_the_script() {
        let data = json!({"tag": "</script><script>alert(1)</script>"});
        let html = page("t", &data).unwrap();
        assert_eq!(html.matches("</script>").count(), 2, "only the page's own");
        let start = html.find("id=\"goodput-data\">").unwrap() + "id=\"goodput-data\">".len();
        let end = html[start..].find("</script>").unwrap() + start;
        let back: Value = serde_json::from_str(&html[start..end]).unwrap();
        assert_eq!(back, data);
    }

    #[test]
    fn the_title_names_model_and_start_and_is_escaped() {
        let report =
            json!({"run": {"model": "m<1>", "started_at": "2026-01-01T00:00:00Z"}, "steps": []});
        let html = render_report(&report).unwrap();
        assert!(html.contains("<title>goodput report · m&lt;1&gt; · 2026-01-01T00:00:00Z</title>"));
    }
}
