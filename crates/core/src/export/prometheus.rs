//! A report's headline figures in the Prometheus text exposition format (version 0.0.4), as a
//! Pushgateway takes them: one gauge family per figure (`goodput_ttft_seconds{quantile="0.99"}`,
//! `goodput_requests_per_second`, …), each sample labelled with its step, the model, the
//! target, the API and the run's tags (`tag_<key>`); the run id and job go in the grouping
//! key of the push URL ([`grouping_path`]). Latencies are converted to seconds (the report's
//! milliseconds ÷ 1000); every other value is the report's own.

use std::fmt::Write as _;

use super::figures::{Figure, Unit, headline, run_id};
use crate::report::Report;

/// The Pushgateway job every push goes to.
pub const JOB: &str = "goodput";

/// The metric name of a figure (`goodput_` + name + unit suffix).
pub fn metric_name(figure: &Figure) -> String {
    let suffix = match figure.unit {
        Unit::Millis => "_seconds",
        Unit::Ratio => "_ratio",
        Unit::PerSec | Unit::Count => "",
    };
    format!("goodput_{}{suffix}", figure.name)
}

/// The value a figure is exposed with (latencies in seconds).
pub fn metric_value(figure: &Figure) -> f64 {
    match figure.unit {
        Unit::Millis => figure.value / 1000.0,
        Unit::PerSec | Unit::Ratio | Unit::Count => figure.value,
    }
}

/// The labels every sample carries: model, target, API and the tags (`tag_<key>`, the key's
/// characters outside `[A-Za-z0-9_]` turned into `_`).
pub fn run_labels(report: &Report) -> Vec<(String, String)> {
    let run = &report.run;
    let mut labels = vec![
        ("model".to_string(), run.model.clone()),
        ("target".to_string(), run.target.clone()),
        ("api".to_string(), run.api.clone()),
    ];
    for (key, value) in &run.tags {
        labels.push((format!("tag_{}", label_name(key)), value.clone()));
    }
    labels
}

/// The exposition of `report`'s headline figures: each family's `# HELP` and `# TYPE gauge`,
/// then its samples, families in the order they first appear.
pub fn exposition(report: &Report) -> String {
    let common = run_labels(report);
    let mut families: Vec<(String, &'static str, String)> = Vec::new();
    for figure in headline(report) {
        let name = metric_name(&figure);
        let line = sample(&name, &figure, &common);
        match families.iter_mut().find(|(n, _, _)| *n == name) {
            Some((_, _, lines)) => lines.push_str(&line),
            None => families.push((name, figure.help, line)),
        }
    }
    let mut text = String::new();
    for (name, help, lines) in families {
        let _ = writeln!(text, "# HELP {name} {help}");
        let _ = writeln!(text, "# TYPE {name} gauge");
        text.push_str(&lines);
    }
    text
}

fn sample(name: &str, figure: &Figure, common: &[(String, String)]) -> String {
    let mut labels = vec![format!("step=\"{}\"", figure.step)];
    for (key, value) in &figure.labels {
        labels.push(format!("{key}=\"{}\"", escape(value)));
    }
    for (key, value) in common {
        labels.push(format!("{key}=\"{}\"", escape(value)));
    }
    format!("{name}{{{}}} {}\n", labels.join(","), metric_value(figure))
}

/// The Pushgateway path of a run's group: `/metrics/job/goodput/run_id@base64/<id>` (the id
/// base64url-encoded, so any character survives the URL).
pub fn grouping_path(report: &Report) -> String {
    format!(
        "/metrics/job/{JOB}/run_id@base64/{}",
        base64url(run_id(report).as_bytes())
    )
}

/// A label value escaped for the text format (backslash, double quote, newline).
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A valid label name: characters outside `[A-Za-z0-9_]` become `_`.
fn label_name(key: &str) -> String {
    key.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Base64 with the URL-safe alphabet and padding (RFC 4648 §5), as the Pushgateway decodes
/// `@base64` grouping values.
fn base64url(bytes: &[u8]) -> String {
    crate::units::base64(bytes, crate::units::BASE64_URL)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64url_matches_rfc4648() {
        assert_eq!(base64url(b""), "");
        assert_eq!(base64url(b"f"), "Zg==");
        assert_eq!(base64url(b"fo"), "Zm8=");
        assert_eq!(base64url(b"foo"), "Zm9v");
        assert_eq!(base64url(b"foob"), "Zm9vYg==");
        assert_eq!(base64url(&[0xfb, 0xff]), "-_8=");
    }

    #[test]
    fn label_values_and_names_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(label_name("team.name-x"), "team_name_x");
    }
}
