//! Release gate: conditions such as `requests_per_sec >= 150`, `e2e.p95 <= 1.5s`,
//! `error_rate <= 0.1%` or `server.kv_cache_usage.max <= 0.90`, evaluated against a report
//! (as JSON, so every section is reachable). Values are unit-aware: a duration is converted to
//! the unit of the path (`e2e.p95` is in ms, so `1.5s` means 1500), a percentage to a
//! fraction; a value whose unit cannot apply to the path is an error, as is a path that names
//! nothing.

use std::fmt;

use serde::Serialize;
use serde_json::Value;

use crate::decide::report_path::{self, Unit, UnknownPath};
use crate::units::parse_duration;

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Op {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    Eq,
    /// `!=`
    Ne,
}

impl Op {
    const ALL: [(&'static str, Op); 6] = [
        ("<=", Op::Le),
        (">=", Op::Ge),
        ("==", Op::Eq),
        ("!=", Op::Ne),
        ("<", Op::Lt),
        (">", Op::Gt),
    ];

    fn holds(self, measured: f64, threshold: f64) -> bool {
        match self {
            Op::Lt => measured < threshold,
            Op::Le => measured <= threshold,
            Op::Gt => measured > threshold,
            Op::Ge => measured >= threshold,
            Op::Eq => (measured - threshold).abs() <= 1e-9 * threshold.abs().max(1.0),
            Op::Ne => (measured - threshold).abs() > 1e-9 * threshold.abs().max(1.0),
        }
    }

    fn symbol(self) -> &'static str {
        Op::ALL
            .iter()
            .find(|(_, op)| *op == self)
            .map_or("?", |(s, _)| s)
    }
}

/// The right-hand side of a condition, as written.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Threshold {
    /// A plain number, in the path's own unit.
    Number(f64),
    /// A duration, seconds.
    Seconds(f64),
    /// A percentage (`0.1%`), as a fraction.
    Percent(f64),
}

/// One condition.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// As written.
    pub text: String,
    /// The report path.
    pub path: String,
    /// The operator.
    pub op: Op,
    /// The threshold.
    pub threshold: Threshold,
}

/// Why a gate could not be evaluated (a usage error: exit status 2).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GateError {
    /// The condition is not `PATH OP VALUE`.
    #[error("condition `{text}`: {reason} (expected PATH OP VALUE, e.g. `e2e.p95 <= 1.5s`)")]
    Syntax {
        /// The condition.
        text: String,
        /// What is wrong.
        reason: String,
    },
    /// The path names nothing in the report.
    #[error("condition `{text}`: {source}")]
    UnknownPath {
        /// The condition.
        text: String,
        /// Which path and what exists.
        source: UnknownPath,
    },
    /// The value's unit does not fit the path.
    #[error("condition `{text}`: {reason}")]
    Unit {
        /// The condition.
        text: String,
        /// What does not fit.
        reason: String,
    },
    /// The step selector names no step.
    #[error("step {0} does not exist in the report")]
    NoSuchStep(usize),
}

impl Condition {
    /// Parses `PATH OP VALUE`.
    pub fn parse(text: &str) -> Result<Condition, GateError> {
        let syntax = |reason: &str| GateError::Syntax {
            text: text.to_string(),
            reason: reason.to_string(),
        };
        let (position, symbol, op) = Op::ALL
            .iter()
            .filter_map(|(symbol, op)| text.find(symbol).map(|i| (i, *symbol, *op)))
            .min_by_key(|(i, symbol, _)| (*i, usize::MAX - symbol.len()))
            .ok_or_else(|| syntax("no operator (<, <=, >, >=, ==, !=)"))?;
        let path = text[..position].trim();
        let value = text[position + symbol.len()..].trim();
        if path.is_empty() {
            return Err(syntax("no path before the operator"));
        }
        if value.is_empty() {
            return Err(syntax("no value after the operator"));
        }
        Ok(Condition {
            text: text.trim().to_string(),
            path: path.to_string(),
            op,
            threshold: parse_threshold(value).map_err(|reason| syntax(&reason))?,
        })
    }

    /// The threshold in `unit`.
    fn threshold_in(&self, unit: Unit) -> Result<f64, GateError> {
        let unit_error = |reason: String| GateError::Unit {
            text: self.text.clone(),
            reason,
        };
        match (self.threshold, unit) {
            (Threshold::Number(n), _) => Ok(n),
            (Threshold::Seconds(s), Unit::Milliseconds) => Ok(s * 1000.0),
            (Threshold::Seconds(s), Unit::Seconds) => Ok(s),
            (Threshold::Seconds(_), _) => Err(unit_error(format!(
                "`{}` is not a duration, so its value cannot have a time unit",
                self.path
            ))),
            (Threshold::Percent(f), Unit::Fraction | Unit::Plain) => Ok(f),
            (Threshold::Percent(_), unit) => Err(unit_error(format!(
                "`{}` is in {}, not a fraction, so its value cannot be a percentage",
                self.path,
                unit.label()
            ))),
        }
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

fn parse_threshold(text: &str) -> Result<Threshold, String> {
    if let Some(percent) = text.strip_suffix('%') {
        let value: f64 = percent
            .trim()
            .parse()
            .map_err(|_| format!("`{text}` is not a percentage"))?;
        return Ok(Threshold::Percent(value / 100.0));
    }
    let number_part = text
        .trim_end_matches("req/s")
        .trim_end_matches("tok/s")
        .trim_end_matches("/s")
        .trim();
    if let Ok(value) = number_part.parse::<f64>() {
        return Ok(Threshold::Number(value));
    }
    parse_duration(text)
        .map(|d| Threshold::Seconds(d.as_secs_f64()))
        .map_err(|_| format!("`{text}` is not a number, a duration (1.5s) or a percentage (0.1%)"))
}

/// Which steps a gate applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StepSelector {
    /// Every step must pass (a plain run has one).
    #[default]
    All,
    /// The first step.
    First,
    /// The last step.
    Last,
    /// The step with this index.
    Index(usize),
}

impl StepSelector {
    /// Parses `all`, `first`, `last` or an index.
    pub fn parse(text: &str) -> Option<StepSelector> {
        match text.trim() {
            "all" => Some(StepSelector::All),
            "first" => Some(StepSelector::First),
            "last" => Some(StepSelector::Last),
            n => n.parse().ok().map(StepSelector::Index),
        }
    }

    fn steps(self, count: usize) -> Result<Vec<usize>, GateError> {
        match self {
            StepSelector::All => Ok((0..count.max(1)).collect()),
            StepSelector::First => Ok(vec![0]),
            StepSelector::Last => Ok(vec![count.saturating_sub(1)]),
            StepSelector::Index(i) if i < count => Ok(vec![i]),
            StepSelector::Index(i) => Err(GateError::NoSuchStep(i)),
        }
    }
}

/// One condition's verdict on one step (or on the report, for root paths).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    /// The condition as written.
    pub condition: String,
    /// The step judged (`None` for a root path).
    pub step: Option<usize>,
    /// Where the figure was found.
    pub path: String,
    /// The measured value in `unit` (`None`: not measured, which fails).
    pub measured: Option<f64>,
    /// The threshold in `unit`.
    pub threshold: f64,
    /// Unit label of `measured` and `threshold`.
    pub unit: &'static str,
    /// Whether the condition held.
    pub pass: bool,
}

/// Judges every condition on the selected steps of `report`.
pub fn evaluate(
    report: &Value,
    conditions: &[Condition],
    selector: StepSelector,
) -> Result<Vec<Verdict>, GateError> {
    let step_count = report["steps"].as_array().map_or(0, Vec::len);
    let steps = selector.steps(step_count)?;
    let mut verdicts = Vec::new();
    for condition in conditions {
        let root = report_path::is_root_path(report, &condition.path);
        let judged: Vec<Option<usize>> = if root {
            vec![None]
        } else {
            steps.iter().copied().map(Some).collect()
        };
        for step in judged {
            verdicts.push(judge(report, condition, step)?);
        }
    }
    Ok(verdicts)
}

fn judge(report: &Value, condition: &Condition, step: Option<usize>) -> Result<Verdict, GateError> {
    let figure =
        report_path::resolve(report, step.unwrap_or(0), &condition.path).map_err(|source| {
            GateError::UnknownPath {
                text: condition.text.clone(),
                source,
            }
        })?;
    let threshold = condition.threshold_in(figure.unit)?;
    Ok(Verdict {
        condition: condition.text.clone(),
        step,
        path: figure.path,
        measured: figure.value,
        threshold,
        unit: figure.unit.label(),
        pass: figure
            .value
            .is_some_and(|measured| condition.op.holds(measured, threshold)),
    })
}

/// Whether every verdict passed.
pub fn passed(verdicts: &[Verdict]) -> bool {
    verdicts.iter().all(|v| v.pass)
}

impl Verdict {
    /// `PASS`/`FAIL` line text without colour, e.g.
    /// `PASS  e2e.p95 <= 1.5s  measured 812.5 ms (limit 1500 ms) [steps[0].latency_ms.e2e.p95]`.
    pub fn line(&self) -> String {
        let measured = self.measured.map_or_else(
            || "not measured".to_string(),
            |v| format!("{} {}", trim_number(v), self.unit),
        );
        format!(
            "{}  {}  measured {} (limit {} {}) [{}]",
            if self.pass { "PASS" } else { "FAIL" },
            self.condition,
            measured.trim_end(),
            trim_number(self.threshold),
            self.unit,
            self.path
        )
        .replace(" )", ")")
    }
}

fn trim_number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 {
        format!("{value:.0}")
    } else if value.abs() >= 100.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.4}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

impl Op {
    /// The operator's symbol.
    pub fn as_str(self) -> &'static str {
        self.symbol()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    fn report() -> Value {
        json!({"steps": [{
            "throughput": {"requests_per_sec": 151.5},
            "latency_ms": {"e2e": {"p95": 1600.0}},
            "requests": {"scheduled": 1000, "failed": 1},
            "server": {"kv_cache_usage": {"max": 0.85}}
        }]})
    }

    fn check(text: &str) -> Verdict {
        let condition = Condition::parse(text).unwrap();
        evaluate(&report(), &[condition], StepSelector::All)
            .unwrap()
            .remove(0)
    }

    #[test]
    fn the_issue_examples_with_units() {
        assert!(check("requests_per_sec >= 150").pass);
        let e2e = check("e2e.p95 <= 1.5s");
        assert!(!e2e.pass);
        assert_eq!((e2e.threshold, e2e.measured), (1500.0, Some(1600.0)));
        assert!(check("e2e.p95 <= 1700ms").pass);
        assert!(check("error_rate <= 0.001").pass);
        assert!(check("error_rate <= 0.1%").pass);
        assert!(!check("error_rate < 0.1%").pass);
        assert!(check("server.kv_cache_usage.max <= 0.90").pass);
        assert!(check("requests_per_sec > 150 req/s").pass);
        assert!(
            e2e.line()
                .starts_with("FAIL  e2e.p95 <= 1.5s  measured 1600 ms (limit 1500 ms)")
        );
    }

    #[test]
    fn usage_errors_are_clear() {
        let bad = |text: &str| {
            Condition::parse(text)
                .and_then(|c| evaluate(&report(), &[c], StepSelector::All))
                .unwrap_err()
                .to_string()
        };
        assert!(bad("e2e.p95 1.5s").contains("no operator"));
        assert!(bad("e2e.p95 <= fast").contains("not a number"));
        assert!(bad("e2e.p96 <= 1s").contains("did you mean e2e.p95"));
        assert!(bad("requests_per_sec >= 2s").contains("not a duration"));
        assert!(bad("e2e.p95 <= 5%").contains("not a fraction"));
        let condition = Condition::parse("e2e.p95 <= 1s").unwrap();
        assert!(evaluate(&report(), &[condition], StepSelector::Index(3)).is_err());
    }

    #[test]
    fn unmeasured_figures_fail() {
        let r = json!({"steps": [{"latency_ms": {"ttft": {"p99": null}}}]});
        let c = Condition::parse("ttft.p99 <= 1s").unwrap();
        let verdict = evaluate(&r, &[c], StepSelector::All).unwrap().remove(0);
        assert!(!verdict.pass);
        assert!(verdict.line().contains("not measured"));
    }
}
