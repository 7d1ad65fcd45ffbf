//! A tolerant parser of the Prometheus text exposition format (version 0.0.4, and the
//! OpenMetrics subset servers actually emit): `name{label="value",…} value [timestamp]` lines,
//! `# HELP` / `# TYPE` comments, escaped label values, `NaN` / `±Inf`.
//!
//! It never fails: malformed lines are skipped and counted, a last line without its newline
//! (a truncated body) is dropped rather than misread (`12` may be the start of `1234`), and at
//! most [`MAX_SAMPLES`] samples are kept. Invalid UTF-8 is replaced, not rejected.

/// Most samples kept from one body; the rest is dropped and the body marked truncated.
pub const MAX_SAMPLES: usize = 200_000;

/// Lines longer than this are skipped as malformed.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Metric name as exposed (with `_total`, `_bucket`, `_sum`, `_count` suffixes).
    pub name: String,
    /// Labels in exposition order, values unescaped.
    pub labels: Vec<(String, String)>,
    /// The value (may be NaN or infinite).
    pub value: f64,
}

impl Sample {
    /// The value of label `name`, if present.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }
}

/// What a body contained.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exposition {
    /// Every well-formed sample, in order.
    pub samples: Vec<Sample>,
    /// Lines that were neither a sample, a comment nor blank.
    pub malformed_lines: u64,
    /// The first malformed line's number (1-based) and what was wrong with it.
    pub first_problem: Option<(u64, String)>,
    /// The body did not end with a newline, so its last line was dropped.
    pub missing_final_newline: bool,
    /// More than [`MAX_SAMPLES`] samples: the rest was dropped.
    pub too_many_samples: bool,
}

/// Parses a whole exposition body.
pub fn parse(body: &[u8]) -> Exposition {
    let text = String::from_utf8_lossy(body);
    let mut exposition = Exposition::default();
    let mut lines: Vec<&str> = text.split('\n').collect();
    // `split` yields an empty last element when the body ends with '\n'.
    match lines.last() {
        Some(&"") => {
            lines.pop();
        }
        Some(_) => {
            lines.pop();
            exposition.missing_final_newline = true;
        }
        None => {}
    }
    for (index, line) in lines.into_iter().enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line).trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if exposition.samples.len() >= MAX_SAMPLES {
            exposition.too_many_samples = true;
            break;
        }
        match parse_sample(line) {
            Ok(sample) => exposition.samples.push(sample),
            Err(problem) => {
                exposition.malformed_lines += 1;
                if exposition.first_problem.is_none() {
                    exposition.first_problem = Some((index as u64 + 1, problem.to_string()));
                }
            }
        }
    }
    exposition
}

/// Parses one sample line (not a comment, not blank).
fn parse_sample(line: &str) -> Result<Sample, &'static str> {
    if line.len() > MAX_LINE_BYTES {
        return Err("line longer than 64 KiB");
    }
    let name_end = line
        .find(|c: char| c == '{' || c.is_ascii_whitespace())
        .ok_or("no value after the metric name")?;
    let name = &line[..name_end];
    if !is_metric_name(name) {
        return Err("invalid metric name");
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(after_brace) = rest.strip_prefix('{') {
        let (parsed, remainder) = parse_labels(after_brace)?;
        labels = parsed;
        rest = remainder;
    }
    let mut fields = rest.split_ascii_whitespace();
    let value = parse_value(fields.next().ok_or("no value")?)?;
    if let Some(timestamp) = fields.next()
        && timestamp.parse::<f64>().is_err()
    {
        return Err("invalid timestamp");
    }
    if fields.next().is_some() {
        return Err("unexpected text after the value");
    }
    Ok(Sample {
        name: name.to_string(),
        labels,
        value,
    })
}

type Labels = Vec<(String, String)>;

/// Parses `key="value",…}` (the opening brace already consumed); returns the labels and what
/// follows the closing brace.
fn parse_labels(mut text: &str) -> Result<(Labels, &str), &'static str> {
    let mut labels = Vec::new();
    loop {
        text = text.trim_start();
        if let Some(rest) = text.strip_prefix('}') {
            return Ok((labels, rest));
        }
        let eq = text.find('=').ok_or("label without `=`")?;
        let key = text[..eq].trim();
        if !is_label_name(key) {
            return Err("invalid label name");
        }
        let after_eq = text[eq + 1..].trim_start();
        let quoted = after_eq.strip_prefix('"').ok_or("label value not quoted")?;
        let (value, rest) = unescape_until_quote(quoted)?;
        labels.push((key.to_string(), value));
        text = rest.trim_start();
        if let Some(rest) = text.strip_prefix(',') {
            text = rest;
        } else if !text.starts_with('}') {
            return Err("expected `,` or `}` after a label");
        }
    }
}

/// Reads an escaped label value up to its closing quote; returns it and the text after.
fn unescape_until_quote(text: &str) -> Result<(String, &str), &'static str> {
    let mut value = String::new();
    let mut chars = text.char_indices();
    while let Some((index, c)) = chars.next() {
        match c {
            '"' => return Ok((value, &text[index + 1..])),
            '\\' => match chars.next() {
                Some((_, 'n')) => value.push('\n'),
                Some((_, escaped)) => value.push(escaped),
                None => return Err("unterminated escape in a label value"),
            },
            other => value.push(other),
        }
    }
    Err("unterminated label value")
}

fn parse_value(text: &str) -> Result<f64, &'static str> {
    match text {
        "NaN" | "nan" => Ok(f64::NAN),
        "+Inf" | "Inf" | "+inf" | "inf" => Ok(f64::INFINITY),
        "-Inf" | "-inf" => Ok(f64::NEG_INFINITY),
        _ => text.parse::<f64>().map_err(|_| "invalid value"),
    }
}

fn is_metric_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_' || b == b':')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':')
}

fn is_label_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_samples_labels_and_special_values() {
        let body = b"# HELP vllm:num_requests_running Running.\n\
            # TYPE vllm:num_requests_running gauge\n\
            vllm:num_requests_running{model_name=\"m\",engine=\"0\"} 3.0\n\
            vllm:ttft_bucket{le=\"+Inf\",model_name=\"a \\\"b\\\" \\\\ c\\nd\"} 12 1700000000000\n\
            llamacpp:kv_cache_usage_ratio 0.25\n\
            odd NaN\n\
            neg -Inf\n";
        let parsed = parse(body);
        assert_eq!(parsed.malformed_lines, 0, "{:?}", parsed.first_problem);
        assert_eq!(parsed.samples.len(), 5);
        let running = &parsed.samples[0];
        assert_eq!(running.name, "vllm:num_requests_running");
        assert_eq!(running.label("engine"), Some("0"));
        assert_eq!(running.value, 3.0);
        assert_eq!(parsed.samples[1].label("le"), Some("+Inf"));
        assert_eq!(
            parsed.samples[1].label("model_name"),
            Some("a \"b\" \\ c\nd")
        );
        assert_eq!(parsed.samples[2].labels, vec![]);
        assert!(parsed.samples[3].value.is_nan());
        assert_eq!(parsed.samples[4].value, f64::NEG_INFINITY);
    }

    #[test]
    fn garbage_is_counted_not_fatal() {
        let body = b"<html>not metrics</html>\nok_metric 1\n{oops} 2\nname{a=b} 3\nname{a=\"x\"\n";
        let parsed = parse(body);
        assert_eq!(parsed.samples.len(), 1);
        assert_eq!(parsed.malformed_lines, 4);
        assert_eq!(parsed.first_problem.as_ref().unwrap().0, 1);
    }

    #[test]
    fn a_truncated_last_line_is_dropped_not_misread() {
        let parsed = parse(b"a_total 1234\nb_total 12");
        assert_eq!(parsed.samples.len(), 1);
        assert!(parsed.missing_final_newline);
    }

    #[test]
    fn binary_noise_does_not_panic() {
        let noise: Vec<u8> = (0..10_000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        let parsed = parse(&noise);
        assert!(parsed.samples.len() < 10);
        let parsed = parse(b"");
        assert_eq!(parsed, Exposition::default());
    }

    #[test]
    fn the_sample_count_is_bounded() {
        let body = "x 1\n".repeat(MAX_SAMPLES + 10);
        let parsed = parse(body.as_bytes());
        assert_eq!(parsed.samples.len(), MAX_SAMPLES);
        assert!(parsed.too_many_samples);
    }
}
