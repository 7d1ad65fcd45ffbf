//! `report.html` and the HTML comparison: one self-contained file each. The report is embedded
//! as JSON and drawn by an inline script into tables and inline SVG charts (throughput vs
//! latency, goodput vs load, TTFT/TPOT/E2E CDFs, per-window time series, plus per-bucket,
//! server and capacity sections when the report has them, and the full metadata). Nothing is
//! fetched: no CDN, no fonts, no images.

use std::path::Path;

use anyhow::{Context, Result};
use goodput_core::decide::compare::Comparison;
use goodput_core::report::Report;
use serde_json::{Value, json};

const STYLE: &str = include_str!("style.css");
const SCRIPT: &str = include_str!("report.js");

/// The report as one HTML page.
pub(crate) fn render_report(report: &Report) -> Result<String> {
    let data = json!({"mode": "report", "report": report});
    let title = format!(
        "goodput report · {} · {}",
        report.run.model, report.run.started_at
    );
    page(&title, &data)
}

/// A comparison of two reports as one HTML page.
pub(crate) fn render_comparison(
    a: &Value,
    b: &Value,
    labels: [&str; 2],
    comparison: &Comparison,
) -> Result<String> {
    let data =
        json!({"mode": "compare", "a": a, "b": b, "labels": labels, "comparison": comparison});
    page(
        &format!("goodput comparison · {} vs {}", labels[1], labels[0]),
        &data,
    )
}

/// Writes `report.html`.
pub(crate) fn write_report(path: &Path, report: &Report) -> Result<()> {
    std::fs::write(path, render_report(report)?)
        .with_context(|| format!("cannot write {}", path.display()))
}

fn page(title: &str, data: &Value) -> Result<String> {
    let json = serde_json::to_string(data).context("serializing the report for HTML")?;
    Ok(format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n\
         <main id=\"content\"></main>\n\
         <footer><p id=\"render-status\">This report needs JavaScript to draw its tables and charts; \
         the data is in report.json.</p></footer>\n\
         <script type=\"application/json\" id=\"goodput-data\">{}</script>\n\
         <script>\n{SCRIPT}</script>\n</body>\n</html>\n",
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
}
