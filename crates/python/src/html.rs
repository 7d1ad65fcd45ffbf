//! `report.html` for reports made in Python: the same page as the command line's
//! (`crates/cli/src/output/html.rs`), built from the same stylesheet and script, so a report
//! measured in-process draws exactly like one from `goodput run`.

const STYLE: &str = include_str!("../../cli/src/output/html/style.css");
const SCRIPT: &str = include_str!("../../cli/src/output/html/report.js");

/// The report (its JSON text) as one self-contained HTML page.
pub(crate) fn render_report(report: &serde_json::Value) -> Result<String, serde_json::Error> {
    let data = serde_json::json!({"mode": "report", "report": report});
    let text = |key: &str| {
        report
            .pointer(key)
            .and_then(serde_json::Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let title = format!(
        "goodput report · {} · {}",
        text("/run/model"),
        text("/run/started_at")
    );
    let json = serde_json::to_string(&data)?;
    Ok(format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n\
         <main id=\"content\"></main>\n\
         <footer><p id=\"render-status\">This report needs JavaScript to draw its tables and charts; \
         the data is in report.json.</p></footer>\n\
         <script type=\"application/json\" id=\"goodput-data\">{}</script>\n\
         <script>\n{SCRIPT}</script>\n</body>\n</html>\n",
        escape_text(&title),
        escape_script_json(&json)
    ))
}

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
