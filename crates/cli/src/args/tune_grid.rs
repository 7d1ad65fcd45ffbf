//! `goodput tune`'s grid: `--grid 'name=v1,v2;name2=…'` (every combination, the first name
//! varying slowest) or `--grid-file` (a TOML file listing configurations, or a `[grid]` table
//! of value lists), the placeholders of the templates checked against it before anything
//! starts, and each configuration's accelerators (`--accelerators-per-config`).

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::options::tune::{PORT, Template};

/// Most configurations one tune measures.
const MAX_CONFIGURATIONS: usize = 10_000;

/// The configurations of a grid, in order: each one's name and values (in key order).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Grid {
    /// Every placeholder name, in the order first given.
    pub(crate) keys: Vec<String>,
    /// Name and values of each configuration.
    pub(crate) configurations: Vec<(String, Vec<(String, String)>)>,
}

/// `name=v1,v2;name2=v3`: every combination, the first name varying slowest.
pub(crate) fn parse_grid(text: &str) -> Result<Grid> {
    let mut axes: Vec<(String, Vec<String>)> = Vec::new();
    for part in text.split(';').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, values) = part
            .split_once('=')
            .with_context(|| format!("--grid: `{part}` is not name=value,value"))?;
        let key = check_key(key.trim())?;
        if axes.iter().any(|(k, _)| *k == key) {
            bail!("--grid: `{key}` is given twice");
        }
        let values: Vec<String> = values.split(',').map(|v| v.trim().to_string()).collect();
        if values.iter().any(String::is_empty) {
            bail!("--grid: `{key}` has an empty value");
        }
        axes.push((key, values));
    }
    if axes.is_empty() {
        bail!("--grid: no configuration, e.g. --grid 'np=1,4;ctx=4096'");
    }
    product(axes)
}

/// Every combination of `axes`, the first varying slowest.
fn product(axes: Vec<(String, Vec<String>)>) -> Result<Grid> {
    let count = axes
        .iter()
        .try_fold(1usize, |n, (_, v)| n.checked_mul(v.len()))
        .filter(|n| *n <= MAX_CONFIGURATIONS)
        .with_context(|| format!("the grid has more than {MAX_CONFIGURATIONS} configurations"))?;
    let mut configurations = Vec::with_capacity(count);
    for mut index in 0..count {
        let mut values = vec![(String::new(), String::new()); axes.len()];
        for (slot, (key, options)) in axes.iter().enumerate().rev() {
            values[slot] = (key.clone(), options[index % options.len()].clone());
            index /= options.len();
        }
        configurations.push((name_of(&values), values));
    }
    let keys = axes.into_iter().map(|(k, _)| k).collect();
    Ok(Grid {
        keys,
        configurations,
    })
}

/// `key=value,…`.
fn name_of(values: &[(String, String)]) -> String {
    let parts: Vec<String> = values.iter().map(|(k, v)| format!("{k}={v}")).collect();
    parts.join(",")
}

/// A placeholder name: letters, digits, `_`, `-`, `.`; not `port` (given by the tune).
fn check_key(key: &str) -> Result<String> {
    let valid = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if !valid {
        bail!("grid key `{key}`: letters, digits, `_`, `-` and `.` only");
    }
    if key == PORT {
        bail!("grid key `port`: {{{{port}}}} is given a free port by the tune itself");
    }
    Ok(key.to_string())
}

/// A grid file: `[[configuration]]` tables (each its values, `name` optional) or a `[grid]`
/// table of value lists (every combination).
pub(crate) fn read_grid_file(path: &Path) -> Result<Grid> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--grid-file: cannot read {}", path.display()))?;
    let table: toml::Table =
        toml::from_str(&text).with_context(|| format!("--grid-file {}", path.display()))?;
    let flag = format!("--grid-file {}", path.display());
    match (table.get("configuration"), table.get("grid")) {
        (Some(list), None) => listed(list, &flag),
        (None, Some(toml::Value::Table(grid))) => {
            let mut axes = Vec::new();
            for (key, values) in grid {
                let values = match values {
                    toml::Value::Array(items) => items.iter().map(scalar).collect::<Result<_>>(),
                    other => Ok(vec![scalar(other)?]),
                };
                axes.push((
                    check_key(key)?,
                    values.with_context(|| format!("{flag}: {key}"))?,
                ));
            }
            product(axes).with_context(|| flag.clone())
        }
        _ => bail!(
            "{flag}: give either [[configuration]] tables (one per configuration) or one [grid] \
             table of value lists"
        ),
    }
}

/// `[[configuration]]` tables, in order.
fn listed(list: &toml::Value, flag: &str) -> Result<Grid> {
    let toml::Value::Array(items) = list else {
        bail!("{flag}: `configuration` must be [[configuration]] tables");
    };
    let (mut keys, mut configurations, mut names) = (Vec::new(), Vec::new(), BTreeSet::new());
    for (i, item) in items.iter().enumerate() {
        let toml::Value::Table(table) = item else {
            bail!("{flag}: configuration {} is not a table", i + 1);
        };
        let mut values = Vec::new();
        let mut name = None;
        for (key, value) in table {
            let value =
                scalar(value).with_context(|| format!("{flag}: configuration {}", i + 1))?;
            if key == "name" {
                name = Some(value);
                continue;
            }
            let key = check_key(key)?;
            if !keys.contains(&key) {
                keys.push(key.clone());
            }
            values.push((key, value));
        }
        let name = name.unwrap_or_else(|| name_of(&values));
        if !names.insert(name.clone()) {
            bail!("{flag}: two configurations are named `{name}`");
        }
        configurations.push((name, values));
    }
    if configurations.is_empty() {
        bail!("{flag}: no configuration");
    }
    Ok(Grid {
        keys,
        configurations,
    })
}

/// A value as text: strings as they are, numbers and booleans as TOML writes them.
fn scalar(value: &toml::Value) -> Result<String> {
    Ok(match value {
        toml::Value::String(text) => text.clone(),
        toml::Value::Integer(n) => n.to_string(),
        toml::Value::Float(x) => x.to_string(),
        toml::Value::Boolean(b) => b.to_string(),
        other => bail!("`{other}`: a value must be a string, number or boolean"),
    })
}

/// Checks the templates against the grid before anything starts: every placeholder is a grid
/// key (or `port`), every configuration gives every placeholder used, and every grid key is
/// used by some template (else every configuration would start the same server).
pub(crate) fn check_placeholders(grid: &Grid, templates: &[(&str, &Template)]) -> Result<()> {
    let mut used = BTreeSet::new();
    for (flag, template) in templates {
        for name in template.placeholders() {
            if name != PORT && !grid.keys.iter().any(|k| k == name) {
                bail!(
                    "{flag}: {{{{{name}}}}} is neither a grid key ({}) nor {{{{port}}}}",
                    grid.keys.join(", ")
                );
            }
            used.insert(name.to_string());
        }
    }
    if let Some(unused) = grid.keys.iter().find(|k| !used.contains(*k)) {
        bail!(
            "grid key `{unused}` is no placeholder of --server-cmd, --target, --ready-url or \
             --reset-url: its configurations would start the same server"
        );
    }
    for (name, values) in &grid.configurations {
        if let Some(missing) = used
            .iter()
            .find(|k| *k != PORT && !values.iter().any(|(key, _)| key == *k))
        {
            bail!("configuration `{name}` gives no value for {{{{{missing}}}}}");
        }
    }
    Ok(())
}

/// Each configuration's accelerators from `--accelerators-per-config` (a number, a grid key
/// whose values are numbers, or a product of both, `tp*dp`), else `--accelerators`, else 1;
/// and how they were counted, in words.
pub(crate) fn accelerators(
    spec: Option<&str>,
    fallback: Option<u32>,
    grid: &Grid,
) -> Result<(Vec<u32>, String)> {
    let count = grid.configurations.len();
    let Some(spec) = spec else {
        return Ok(match fallback {
            Some(n) => (
                vec![n; count],
                format!("{n} per configuration (--accelerators)"),
            ),
            None => (
                vec![1; count],
                "1 per configuration (no --accelerators-per-config)".to_string(),
            ),
        });
    };
    let flag = "--accelerators-per-config";
    let factors: Vec<&str> = spec.split('*').map(str::trim).collect();
    for factor in &factors {
        if factor.parse::<u32>().is_err() && !grid.keys.iter().any(|k| k == factor) {
            bail!("{flag} {spec}: `{factor}` is neither a number nor a grid key");
        }
    }
    let mut counts = Vec::with_capacity(count);
    for (name, values) in &grid.configurations {
        let mut product = 1u32;
        for factor in &factors {
            let text = values
                .iter()
                .find(|(k, _)| k == factor)
                .map_or(*factor, |(_, v)| v.as_str());
            let n: u32 = text.parse().ok().filter(|n| *n > 0).with_context(|| {
                format!("{flag} {spec}: configuration `{name}` has {factor}={text}, not a positive whole number")
            })?;
            product = product.saturating_mul(n);
        }
        counts.push(product);
    }
    Ok((counts, format!("{spec} of each configuration ({flag})")))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_grid_is_every_combination_the_first_key_slowest() {
        let grid = parse_grid("np=1,4; ctx=2048,4096").unwrap();
        let names: Vec<&str> = grid
            .configurations
            .iter()
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "np=1,ctx=2048",
                "np=1,ctx=4096",
                "np=4,ctx=2048",
                "np=4,ctx=4096"
            ]
        );
        assert!(parse_grid("np").is_err());
        assert!(parse_grid("np=1;np=2").is_err());
        assert!(parse_grid("port=1").is_err());
        assert!(parse_grid("np=1,").is_err());
    }

    #[test]
    fn placeholders_must_be_grid_keys_and_every_key_used() {
        let grid = parse_grid("np=1,4").unwrap();
        let good = Template::parse("srv -np {{np}} --port {{port}}").unwrap();
        check_placeholders(&grid, &[("--server-cmd", &good)]).unwrap();
        let unknown = Template::parse("srv -np {{np}} -c {{ctx}}").unwrap();
        let error = check_placeholders(&grid, &[("--server-cmd", &unknown)]).unwrap_err();
        assert!(
            error.to_string().contains("{{ctx}} is neither a grid key"),
            "{error}"
        );
        let unused = Template::parse("srv --port {{port}}").unwrap();
        let error = check_placeholders(&grid, &[("--server-cmd", &unused)]).unwrap_err();
        assert!(error.to_string().contains("grid key `np`"), "{error}");
    }

    #[test]
    fn accelerators_multiply_grid_keys() {
        let grid = parse_grid("tp=1,2;dp=2").unwrap();
        let (counts, basis) = accelerators(Some("tp*dp"), None, &grid).unwrap();
        assert_eq!(counts, [2, 4]);
        assert!(basis.contains("tp*dp"));
        assert_eq!(accelerators(None, None, &grid).unwrap().0, [1, 1]);
        assert_eq!(accelerators(None, Some(8), &grid).unwrap().0, [8, 8]);
        assert!(accelerators(Some("gpus"), None, &grid).is_err());
    }
}
