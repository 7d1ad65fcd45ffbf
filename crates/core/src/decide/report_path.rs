//! Dotted paths into a report (`e2e.p95`, `requests_per_sec`, `steps[1].goodput.attained_fraction`,
//! `server.kv_cache_usage.max`): resolution with the short forms people write, the unit a path
//! carries (from the `_ms` / `_secs` / `_per_sec` naming rule), derived figures such as
//! `error_rate`, and the list of every numeric leaf (what `goodput compare` puts side by
//! side). Works on the report as JSON, so sections added by later versions (sweeps, server
//! metrics, capacity) are reachable without this module knowing their structure.

use serde_json::Value;

/// The unit of a figure, read from its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Milliseconds (`*_ms`).
    Milliseconds,
    /// Seconds (`*_secs`).
    Seconds,
    /// Per second (`*_per_sec`).
    PerSecond,
    /// A fraction in [0, 1] (`*_fraction`, `*_rate` without `_per_sec`, `*_ratio`, `*_usage`).
    Fraction,
    /// A count or any other plain number.
    Plain,
}

impl Unit {
    /// The unit of the figure at the dotted `path`.
    pub fn of_path(path: &str) -> Unit {
        let last = path.rsplit('.').next().unwrap_or(path);
        if last == "count" || last.starts_with("count[") {
            return Unit::Plain;
        }
        for segment in path.rsplit('.') {
            let segment = segment.split('[').next().unwrap_or(segment);
            if segment.ends_with("_ms") {
                return Unit::Milliseconds;
            }
            if segment.ends_with("_secs") {
                return Unit::Seconds;
            }
            if segment.ends_with("_per_sec") {
                return Unit::PerSecond;
            }
        }
        let fraction_like = [
            "_fraction",
            "_ratio",
            "_usage",
            "error_rate",
            "success_rate",
        ];
        let parent_fraction = path.split('.').any(|s| s.ends_with("_usage"));
        if fraction_like.iter().any(|s| last.ends_with(s)) || parent_fraction {
            return Unit::Fraction;
        }
        Unit::Plain
    }

    /// A short label (`ms`, `s`, `/s`, or empty).
    pub fn label(self) -> &'static str {
        match self {
            Unit::Milliseconds => "ms",
            Unit::Seconds => "s",
            Unit::PerSecond => "/s",
            Unit::Fraction | Unit::Plain => "",
        }
    }
}

/// A path that names nothing in the report.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown report path `{path}`{}", suggestion_text(.suggestions))]
pub struct UnknownPath {
    /// The path as written.
    pub path: String,
    /// Existing paths that look close.
    pub suggestions: Vec<String>,
}

fn suggestion_text(suggestions: &[String]) -> String {
    if suggestions.is_empty() {
        "; see docs/report-schema.md for the fields".to_string()
    } else {
        format!("; did you mean {}?", suggestions.join(", "))
    }
}

/// A resolved figure.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// The full path it was found at (e.g. `steps[0].latency_ms.e2e.p95`).
    pub path: String,
    /// Its value (`None` when the report has `null`: not measured).
    pub value: Option<f64>,
    /// Its unit.
    pub unit: Unit,
}

/// Sections of a step tried, in order, for a short path.
const STEP_SECTIONS: [&str; 8] = [
    "",
    "latency_ms.",
    "throughput.",
    "goodput.",
    "requests.",
    "tokens.",
    "stability.",
    "latency_from_send_ms.",
];

/// Figures computed from others: name → (numerator, denominator) paths within a step.
const DERIVED: [(&str, &str, &str); 2] = [
    ("error_rate", "requests.failed", "requests.scheduled"),
    ("success_rate", "requests.completed", "requests.scheduled"),
];

/// Whether `path` addresses the report root (rather than a step): it starts with `steps`,
/// or its first segment is a top-level field of `report`.
pub fn is_root_path(report: &Value, path: &str) -> bool {
    let first = first_segment(path);
    first == "steps" || (report.get(first).is_some() && !step_has(report, first))
}

fn first_segment(path: &str) -> &str {
    path.split(['.', '[']).next().unwrap_or(path)
}

fn step_has(report: &Value, key: &str) -> bool {
    report["steps"]
        .as_array()
        .is_some_and(|steps| steps.iter().any(|step| step.get(key).is_some()))
}

/// Resolves `path` for step `step` of `report` (root paths ignore `step`).
pub fn resolve(report: &Value, step: usize, path: &str) -> Result<Figure, UnknownPath> {
    let path = path.trim();
    if is_root_path(report, path) {
        if let Some(value) = lookup(report, path) {
            return figure(path.to_string(), value, path);
        }
        return Err(unknown(report, path));
    }
    let step_value = &report["steps"][step];
    for section in STEP_SECTIONS {
        let full = format!("{section}{path}");
        if let Some(value) = lookup(step_value, &full) {
            return figure(format!("steps[{step}].{full}"), value, path);
        }
    }
    if let Some((_, numerator, denominator)) = DERIVED.iter().find(|(name, ..)| *name == path) {
        let number = |p: &str| lookup(step_value, p).and_then(Value::as_f64);
        if let (Some(n), Some(d)) = (number(numerator), number(denominator)) {
            return Ok(Figure {
                path: format!("steps[{step}].{numerator} ÷ {denominator}"),
                value: (d > 0.0).then(|| n / d),
                unit: Unit::Fraction,
            });
        }
    }
    Err(unknown(report, path))
}

fn figure(full: String, value: &Value, written: &str) -> Result<Figure, UnknownPath> {
    let unit = Unit::of_path(&full);
    match value {
        Value::Null => Ok(Figure {
            path: full,
            value: None,
            unit,
        }),
        Value::Bool(b) => Ok(Figure {
            path: full,
            value: Some(f64::from(u8::from(*b))),
            unit: Unit::Plain,
        }),
        Value::Number(n) => Ok(Figure {
            path: full,
            value: n.as_f64(),
            unit,
        }),
        _ => Err(UnknownPath {
            path: written.to_string(),
            suggestions: leaves(value)
                .into_iter()
                .take(6)
                .map(|(leaf, _)| format!("{written}.{leaf}"))
                .collect(),
        }),
    }
}

/// The value at a dotted path (`a.b[2].c` or `a.b.2.c`) below `value`; a row of a named
/// breakdown (`models`, `adapters`, `classes`) by its name too (`models[llama-3.1-8b].e2e`).
pub fn lookup<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    let mut current = value;
    for segment in split_path(path) {
        let (key, indices) = match segment.find('[') {
            Some(i) => (&segment[..i], &segment[i..]),
            None => (segment, ""),
        };
        if !key.is_empty() {
            current = match current {
                Value::Object(map) => map.get(key)?,
                Value::Array(items) => items.get(key.parse::<usize>().ok()?)?,
                _ => return None,
            };
        }
        for index in indices.split('[').skip(1) {
            let index = index.strip_suffix(']')?;
            current = match index.parse::<usize>() {
                Ok(position) => current.get(position)?,
                Err(_) => named_row(current, index)?,
            };
        }
    }
    Some(current)
}

/// The row named `name` of an array of named rows.
fn named_row<'a>(rows: &'a Value, name: &str) -> Option<&'a Value> {
    rows.as_array()?
        .iter()
        .find(|row| row.get("name").and_then(Value::as_str) == Some(name))
}

/// The segments of a dotted path, dots inside brackets (a row's name) kept.
fn split_path(path: &str) -> Vec<&str> {
    let (mut segments, mut start, mut depth) = (Vec::new(), 0, 0u32);
    for (i, c) in path.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            '.' if depth == 0 => {
                segments.push(&path[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    segments.push(&path[start..]);
    segments
}

/// Breakdowns whose rows are compared by name, not position (the runs may differ in rows).
const NAMED_ROWS: [&str; 5] = ["models", "adapters", "classes", "targets", "replicas"];

/// The name a row of a named breakdown is addressed by (`None`: address rows by position).
fn row_names(prefix: &str, items: &[Value]) -> Option<Vec<String>> {
    let key = prefix.rsplit('.').next().unwrap_or(prefix);
    if !NAMED_ROWS.contains(&key) {
        return None;
    }
    items
        .iter()
        .map(|item| {
            let name = item.get("name")?.as_str()?;
            (!name.contains(['[', ']'])).then(|| name.to_string())
        })
        .collect()
}

/// Every numeric (or boolean) leaf below `value` as `(dotted path, number)`, in document
/// order; arrays of objects are indexed (`steps[0]…`) — the rows of a named breakdown by name
/// (`models[a]…`), so two runs' rows of one model meet — arrays of numbers are skipped.
pub fn leaves(value: &Value) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    collect_leaves(value, String::new(), &mut out);
    out
}

fn collect_leaves(value: &Value, prefix: String, out: &mut Vec<(String, f64)>) {
    match value {
        Value::Number(n) => {
            if let Some(n) = n.as_f64() {
                out.push((prefix, n));
            }
        }
        Value::Bool(b) => out.push((prefix, f64::from(u8::from(*b)))),
        Value::Object(map) => {
            for (key, child) in map {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                collect_leaves(child, path, out);
            }
        }
        Value::Array(items) if items.iter().all(Value::is_object) => {
            let names = row_names(&prefix, items);
            for (i, child) in items.iter().enumerate() {
                let row = names
                    .as_ref()
                    .and_then(|names| names.get(i).cloned())
                    .unwrap_or_else(|| i.to_string());
                collect_leaves(child, format!("{prefix}[{row}]"), out);
            }
        }
        _ => {}
    }
}

/// Every numeric leaf path of a step or the root, with `null` leaves included (they are valid
/// paths whose value was not measured).
fn all_paths(value: &Value, prefix: String, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                all_paths(child, path, out);
            }
        }
        Value::Number(_) | Value::Null | Value::Bool(_) => out.push(prefix),
        _ => {}
    }
}

fn unknown(report: &Value, path: &str) -> UnknownPath {
    let mut candidates = Vec::new();
    all_paths(&report["steps"][0], String::new(), &mut candidates);
    let wanted = path.to_ascii_lowercase();
    let last = wanted.rsplit('.').next().unwrap_or(&wanted).to_string();
    let mut scored: Vec<(usize, String)> = candidates
        .into_iter()
        .filter_map(|candidate| {
            let short = short_form(&candidate);
            let distance = edit_distance(&wanted, &short.to_ascii_lowercase());
            let close = distance <= 3 || candidate.ends_with(&format!(".{last}"));
            close.then_some((distance, short))
        })
        .collect();
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    UnknownPath {
        path: path.to_string(),
        suggestions: scored.into_iter().take(4).map(|(_, s)| s).collect(),
    }
}

/// The shortest form of a step path that [`resolve`] accepts.
fn short_form(path: &str) -> String {
    for section in STEP_SECTIONS.iter().skip(1) {
        if let Some(rest) = path.strip_prefix(section) {
            return rest.to_string();
        }
    }
    path.to_string()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            current.push(
                (previous[j] + cost)
                    .min(previous[j + 1] + 1)
                    .min(current[j] + 1),
            );
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    fn report() -> Value {
        json!({
            "run": {"seed": 7},
            "steps": [{
                "throughput": {"requests_per_sec": 151.5},
                "goodput": {"requests_per_sec": 140.0, "attained_fraction": 0.9},
                "latency_ms": {"e2e": {"p95": 812.5, "p99": null}},
                "requests": {"scheduled": 1000, "failed": 2, "completed": 998},
                "server": {"kv_cache_usage": {"max": 0.93}}
            }],
            "capacity": {"max_rate_per_sec": 42.0}
        })
    }

    #[test]
    fn short_paths_resolve_with_their_units() {
        let r = report();
        let rps = resolve(&r, 0, "requests_per_sec").unwrap();
        assert_eq!(rps.path, "steps[0].throughput.requests_per_sec");
        assert_eq!((rps.value, rps.unit), (Some(151.5), Unit::PerSecond));
        let e2e = resolve(&r, 0, "e2e.p95").unwrap();
        assert_eq!((e2e.value, e2e.unit), (Some(812.5), Unit::Milliseconds));
        assert_eq!(resolve(&r, 0, "e2e.p99").unwrap().value, None);
        let kv = resolve(&r, 0, "server.kv_cache_usage.max").unwrap();
        assert_eq!((kv.value, kv.unit), (Some(0.93), Unit::Fraction));
        let error = resolve(&r, 0, "error_rate").unwrap();
        assert_eq!(error.value, Some(0.002));
        let capacity = resolve(&r, 0, "capacity.max_rate_per_sec").unwrap();
        assert_eq!(capacity.path, "capacity.max_rate_per_sec");
        assert_eq!(resolve(&r, 0, "run.seed").unwrap().value, Some(7.0));
        let full = resolve(&r, 0, "steps[0].goodput.attained_fraction").unwrap();
        assert_eq!(full.value, Some(0.9));
    }

    #[test]
    fn unknown_paths_suggest_close_ones() {
        let error = resolve(&report(), 0, "e2e.p96").unwrap_err();
        assert!(
            error.suggestions.contains(&"e2e.p95".to_string()),
            "{error}"
        );
        let error = resolve(&report(), 0, "latency_ms.e2e").unwrap_err();
        assert!(error.to_string().contains("latency_ms.e2e.p95"), "{error}");
    }

    #[test]
    fn leaves_skip_plain_arrays() {
        let value = json!({"a": {"b": 1, "c": [1, 2]}, "d": [{"e": 2.5}], "f": true});
        assert_eq!(
            leaves(&value),
            vec![
                ("a.b".to_string(), 1.0),
                ("d[0].e".to_string(), 2.5),
                ("f".to_string(), 1.0)
            ]
        );
    }

    #[test]
    fn named_rows_are_addressed_by_name() {
        let step = json!({"models": [
            {"name": "llama-3.1-8b", "latency_ms": {"e2e": {"p99": 9.0}}},
            {"name": "b", "latency_ms": {"e2e": {"p99": 4.0}}}
        ], "buckets": [{"name": "short", "n": 1}]});
        let paths: Vec<String> = leaves(&step).into_iter().map(|(p, _)| p).collect();
        assert_eq!(
            paths,
            [
                "buckets[0].n",
                "models[llama-3.1-8b].latency_ms.e2e.p99",
                "models[b].latency_ms.e2e.p99"
            ]
        );
        for path in &paths {
            assert!(lookup(&step, path).is_some(), "{path}");
        }
        let report = json!({"steps": [step]});
        let figure = resolve(&report, 0, "models[llama-3.1-8b].latency_ms.e2e.p99").unwrap();
        assert_eq!((figure.value, figure.unit), (Some(9.0), Unit::Milliseconds));
        assert!(resolve(&report, 0, "models[c].latency_ms.e2e.p99").is_err());
    }
}
