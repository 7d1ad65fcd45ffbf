//! `goodput tune`'s configuration: the configurations of the grid (each with its placeholder
//! values, its accelerators and, in virtual time, its simulator), how a server is started,
//! readied and stopped from its command template, what is measured per configuration, and
//! where the tune's journal lives.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use goodput_core::decide::sweep::SweepReport;
use goodput_core::report::tune::{TuneMeasure, TuneMode};
use goodput_sim::SimConfig;

use super::capacity::CapacityOptions;

/// Everything `goodput tune` runs with.
#[derive(Debug, Clone)]
pub(crate) struct TuneOptions {
    /// The capacity search every configuration gets (its run options are the base of every
    /// configuration's run; its target is replaced by each configuration's).
    pub(crate) capacity: CapacityOptions,
    /// `--measure sweep`: the levels swept instead (and whether `--rate` was given).
    pub(crate) sweep: Option<SweepReport>,
    /// Capacity search or sweep.
    pub(crate) measure: TuneMeasure,
    /// Live (`--server-cmd`) or virtual time.
    pub(crate) mode: TuneMode,
    /// The configurations, in grid order.
    pub(crate) configurations: Vec<Configuration>,
    /// How servers are started, readied and stopped (live, or `--verify-top`).
    pub(crate) server: Option<ServerOptions>,
    /// How each configuration's accelerators are counted, in words.
    pub(crate) accelerators_basis: String,
    /// `--gpu-hour-cost`.
    pub(crate) gpu_hour_cost: Option<f64>,
    /// `--verify-top K`: the K best predicted configurations measured live.
    pub(crate) verify_top: usize,
    /// The tune's output directory (`--out`, or `--resume`'s).
    pub(crate) out: PathBuf,
    /// `--resume`: skip the configurations the journal in `out` finished.
    pub(crate) resume: bool,
}

/// One configuration of the grid.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Configuration {
    /// `key=value,…` in grid order, or the name a grid file gave it.
    pub(crate) name: String,
    /// Each placeholder's value, in grid order.
    pub(crate) values: Vec<(String, String)>,
    /// Accelerators serving it.
    pub(crate) accelerators: u32,
    /// In virtual time: the simulator this configuration is, or why it is not a valid one.
    pub(crate) simulator: Option<Result<SimConfig, String>>,
}

impl Configuration {
    /// The values as a map (placeholder → value).
    pub(crate) fn map(&self) -> BTreeMap<String, String> {
        self.values.iter().cloned().collect()
    }
}

/// How a configuration's server is run.
#[derive(Debug, Clone)]
pub(crate) struct ServerOptions {
    /// `--server-cmd`: the command template, run by `sh -c` in a process group of its own.
    pub(crate) command: Template,
    /// `--target`: the URL template (default `http://127.0.0.1:{{port}}/v1`).
    pub(crate) target: Template,
    /// `--ready-url`: polled until it answers 2xx (default: the target's `/health`, then
    /// its `/v1/models`).
    pub(crate) ready_url: Option<Template>,
    /// `--ready-timeout`.
    pub(crate) ready_timeout: Duration,
    /// `--stop-grace`: SIGTERM to SIGKILL.
    pub(crate) stop_grace: Duration,
    /// `--reset-url`: POSTed before every step.
    pub(crate) reset_url: Option<Template>,
    /// Target-time seconds per real second of the servers (`--time-scale`).
    pub(crate) time_scale: f64,
}

/// A text with `{{name}}` placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Template {
    /// The text as given.
    pub(crate) text: String,
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Text(String),
    Placeholder(String),
}

/// The placeholder every configuration gets a free port for.
pub(crate) const PORT: &str = "port";

impl Template {
    /// Parses `text`: `{{name}}` (letters, digits, `_`, `-`, `.`) is a placeholder; any other
    /// `{{` is refused (`None`, with the offending part).
    pub(crate) fn parse(text: &str) -> Result<Template, String> {
        let mut parts = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find("{{") {
            let after = &rest[open + 2..];
            let close = after
                .find("}}")
                .ok_or_else(|| format!("`{{{{` without `}}}}` in `{text}`"))?;
            let name = after[..close].trim();
            let valid = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
            if !valid {
                return Err(format!(
                    "`{{{{{}}}}}` is not a placeholder name",
                    &after[..close]
                ));
            }
            if open > 0 {
                parts.push(Part::Text(rest[..open].to_string()));
            }
            parts.push(Part::Placeholder(name.to_string()));
            rest = &after[close + 2..];
        }
        if !rest.is_empty() {
            parts.push(Part::Text(rest.to_string()));
        }
        Ok(Template {
            text: text.to_string(),
            parts,
        })
    }

    /// The placeholders it names, in order, each once.
    pub(crate) fn placeholders(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for part in &self.parts {
            if let Part::Placeholder(name) = part
                && !names.contains(&name.as_str())
            {
                names.push(name);
            }
        }
        names
    }

    /// The text with every placeholder replaced by its value (one missing stays as written).
    pub(crate) fn expand(&self, values: &BTreeMap<String, String>) -> String {
        self.parts
            .iter()
            .map(|part| match part {
                Part::Text(text) => text.clone(),
                Part::Placeholder(name) => values
                    .get(name)
                    .cloned()
                    .unwrap_or_else(|| format!("{{{{{name}}}}}")),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn templates_name_their_placeholders_and_expand() {
        let t = Template::parse("srv -np {{np}} --port {{ port }} -c {{np}}").unwrap();
        assert_eq!(t.placeholders(), ["np", "port"]);
        let values = BTreeMap::from([
            ("np".to_string(), "4".to_string()),
            ("port".to_string(), "8001".to_string()),
        ]);
        assert_eq!(t.expand(&values), "srv -np 4 --port 8001 -c 4");
        assert!(Template::parse("a {{b").is_err());
        assert!(Template::parse("a {{b c}}").is_err());
        assert_eq!(Template::parse("plain").unwrap().placeholders().len(), 0);
    }
}
