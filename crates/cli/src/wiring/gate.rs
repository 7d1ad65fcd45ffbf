//! Release criteria for `goodput gate` and `goodput run --gate`: read them (a TOML file and
//! `--condition`s), judge a report against them, and print every condition with its measured
//! value and PASS/FAIL (a usage error — unknown path, bad unit — is an `Err`).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use anyhow::{Context, Result, bail};
use goodput_core::decide::gate::{self, Condition, StepSelector, Verdict};
use serde::Deserialize;
use serde_json::Value;

use crate::output::color;

/// Parsed release criteria.
#[derive(Debug, Clone, Default)]
pub(crate) struct Criteria {
    conditions: Vec<Condition>,
    step: StepSelector,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum StepField {
    Name(String),
    Index(usize),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CriteriaFile {
    #[serde(default)]
    step: Option<StepField>,
    conditions: Vec<String>,
}

fn parse_step(text: &str) -> Result<StepSelector> {
    StepSelector::parse(text)
        .with_context(|| format!("step `{text}`: expected all, first, last or a step index"))
}

/// Reads a criteria file (TOML with `conditions = [...]` and an optional `step`).
pub(crate) fn load_criteria(path: &Path) -> Result<Criteria> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the gate criteria {}", path.display()))?;
    let file: CriteriaFile = toml::from_str(&text).with_context(|| {
        format!(
            "{}: expected `conditions = [\"e2e.p95 <= 1.5s\", …]` and optionally `step = \"all\"`",
            path.display()
        )
    })?;
    let step = match file.step {
        None => StepSelector::All,
        Some(StepField::Index(i)) => StepSelector::Index(i),
        Some(StepField::Name(name)) => parse_step(&name)?,
    };
    let conditions =
        parse_conditions(&file.conditions).with_context(|| format!("in {}", path.display()))?;
    if conditions.is_empty() {
        bail!("{}: no conditions", path.display());
    }
    Ok(Criteria { conditions, step })
}

fn parse_conditions(texts: &[String]) -> Result<Vec<Condition>> {
    texts
        .iter()
        .map(|text| Condition::parse(text).map_err(anyhow::Error::from))
        .collect()
}

/// Judges `report` and renders the verdict lines; `Err` for a usage error (unknown path, bad
/// unit).
pub(crate) fn judge(report: &Value, criteria: &Criteria) -> Result<(bool, String)> {
    let verdicts = gate::evaluate(report, &criteria.conditions, criteria.step)?;
    let passed = gate::passed(&verdicts);
    Ok((passed, render(&verdicts, passed)))
}

fn render(verdicts: &[Verdict], passed: bool) -> String {
    let mut out = String::from("Gate\n");
    let several_steps = verdicts.iter().filter_map(|v| v.step).max().unwrap_or(0) > 0;
    for verdict in verdicts {
        let step = match verdict.step {
            Some(step) if several_steps => format!("[step {step}] "),
            _ => String::new(),
        };
        let _ = writeln!(out, "  {step}{}", verdict.line());
    }
    let failed: Vec<&str> = verdicts
        .iter()
        .filter(|v| !v.pass)
        .map(|v| v.condition.as_str())
        .collect();
    if passed {
        let _ = writeln!(out, "  gate PASS: all {} conditions hold", verdicts.len());
    } else {
        let _ = writeln!(
            out,
            "  gate FAIL: {} of {} failed: {}",
            failed.len(),
            verdicts.len(),
            failed.join("; ")
        );
    }
    out
}

/// Prints the verdict lines (coloured on a terminal).
pub(crate) fn print(text: &str) -> Result<()> {
    std::io::stdout()
        .lock()
        .write_all(color::paint(text, color::stdout_enabled()).as_bytes())
        .context("writing to stdout")
}

/// The criteria of `goodput gate`: the file's, then the `--condition`s, with `--step` last.
pub(crate) fn criteria(
    file: Option<&Path>,
    conditions: Vec<Condition>,
    step: Option<StepSelector>,
) -> Result<Criteria> {
    let mut criteria = match file {
        Some(path) => load_criteria(path)?,
        None => Criteria::default(),
    };
    criteria.conditions.extend(conditions);
    if let Some(step) = step {
        criteria.step = step;
    }
    if criteria.conditions.is_empty() {
        bail!("no conditions: give --criteria FILE or --condition 'PATH OP VALUE'");
    }
    Ok(criteria)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    #[test]
    fn criteria_files_and_rendering() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gate.toml");
        std::fs::write(
            &path,
            "step = \"last\"\nconditions = [\"requests_per_sec >= 150\", \"e2e.p95 <= 1.5s\"]\n",
        )
        .unwrap();
        let criteria = load_criteria(&path).unwrap();
        assert_eq!(criteria.step, StepSelector::Last);
        let report = json!({"steps": [{"throughput": {"requests_per_sec": 160.0},
                                       "latency_ms": {"e2e": {"p95": 1700.0}}}]});
        let (passed, text) = judge(&report, &criteria).unwrap();
        assert!(!passed);
        assert!(text.contains("PASS  requests_per_sec >= 150"), "{text}");
        assert!(
            text.contains("FAIL  e2e.p95 <= 1.5s  measured 1700 ms"),
            "{text}"
        );
        assert!(
            text.contains("gate FAIL: 1 of 2 failed: e2e.p95 <= 1.5s"),
            "{text}"
        );

        std::fs::write(&path, "conditons = []\n").unwrap();
        let error = format!("{:#}", load_criteria(&path).unwrap_err());
        assert!(error.contains("expected `conditions"), "{error}");
    }
}
