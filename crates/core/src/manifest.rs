//! The run manifest (`run.json`): written when a run starts, so the journal beside it can be
//! turned back into the same report even if the run never finished.

use serde::{Deserialize, Serialize};

use crate::config::{LoadSpec, RunConfig};
use crate::report::{LoadReport, RunInfo, SCHEMA_VERSION, ToolInfo};

/// What `run.json` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunManifest {
    /// Report layout version.
    pub schema_version: u32,
    /// The tool that ran.
    pub tool: ToolInfo,
    /// What was run, against what (`end_reason` is `running` until the report is written).
    pub run: RunInfo,
    /// The run's parameters (SLO, window, load, warmup…).
    pub config: RunConfig,
    /// The load of every step of a multi-step run (sweep levels, capacity probes), in order;
    /// empty for a plain run, whose only step runs `config.load`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<LoadSpec>,
    /// A sweep's dimension, levels and knee threshold (`goodput sweep`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sweep: Option<crate::decide::sweep::SweepReport>,
    /// A capacity search's plan (`goodput capacity`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<crate::decide::capacity::CapacityPlan>,
    /// Which shard of a sharded run this process was (`--shards`), and its start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<crate::shard::ShardInfo>,
    /// Runs of `goodput run --repeats N` (its steps), so a rebuild gives the figures across
    /// them again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeats: Option<u32>,
}

impl RunManifest {
    /// A manifest for a run starting now.
    pub fn new(tool: ToolInfo, run: RunInfo, config: RunConfig) -> Self {
        RunManifest {
            schema_version: SCHEMA_VERSION,
            tool,
            run,
            config,
            steps: Vec::new(),
            sweep: None,
            capacity: None,
            shard: None,
            repeats: None,
        }
    }
}

impl From<&LoadSpec> for LoadReport {
    fn from(load: &LoadSpec) -> Self {
        match *load {
            LoadSpec::Closed { concurrency } => LoadReport {
                mode: "closed".into(),
                concurrency: Some(concurrency),
                rate_per_sec: None,
                arrival: None,
                burstiness: None,
                max_concurrency: None,
                phases: None,
            },
            LoadSpec::Open {
                rate_per_sec,
                arrival,
                max_concurrency,
            } => LoadReport {
                mode: "open".into(),
                concurrency: None,
                rate_per_sec: Some(rate_per_sec),
                arrival: Some(arrival.name().to_string()),
                burstiness: match arrival {
                    crate::config::Arrival::Gamma { burstiness } => Some(burstiness),
                    _ => None,
                },
                max_concurrency,
                phases: None,
            },
            LoadSpec::Profile {
                ref phases,
                arrival,
                max_concurrency,
            } => LoadReport {
                mode: "open".into(),
                concurrency: None,
                rate_per_sec: None,
                arrival: Some(arrival.name().to_string()),
                burstiness: match arrival {
                    crate::config::Arrival::Gamma { burstiness } => Some(burstiness),
                    _ => None,
                },
                max_concurrency,
                phases: Some(phases.clone()),
            },
            LoadSpec::Replay { max_concurrency } => LoadReport {
                mode: "replay".into(),
                concurrency: None,
                rate_per_sec: None,
                arrival: None,
                burstiness: None,
                max_concurrency,
                phases: None,
            },
        }
    }
}

/// Removes credentials from a URL's authority (`user:pass@`), keeping everything else.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((_, host)) => format!("***@{host}"),
        None => authority.to_string(),
    };
    if scheme.is_empty() {
        format!("{authority}{path}")
    } else {
        format!("{scheme}://{authority}{path}")
    }
}

/// Flags whose value is a secret.
const SECRET_FLAGS: [&str; 1] = ["--api-key"];

/// The command line with secrets replaced by `***`: values of `--api-key`, of secret
/// `--header` values, and credentials inside URLs.
pub fn redact_command_line(args: &[String]) -> Vec<String> {
    let mut redacted = Vec::with_capacity(args.len());
    let mut hide_next = false;
    let mut header_next = false;
    for arg in args {
        if hide_next {
            redacted.push("***".to_string());
            hide_next = false;
            continue;
        }
        if header_next {
            redacted.push(redact_header(arg));
            header_next = false;
            continue;
        }
        if let Some(flag) = SECRET_FLAGS
            .iter()
            .find(|flag| arg.starts_with(&format!("{flag}=")))
        {
            redacted.push(format!("{flag}=***"));
        } else if SECRET_FLAGS.contains(&arg.as_str()) {
            hide_next = true;
            redacted.push(arg.clone());
        } else if arg == "--header" {
            header_next = true;
            redacted.push(arg.clone());
        } else if let Some(value) = arg.strip_prefix("--header=") {
            redacted.push(format!("--header={}", redact_header(value)));
        } else if arg.contains("://") {
            redacted.push(redact_url(arg));
        } else {
            redacted.push(arg.clone());
        }
    }
    redacted
}

fn redact_header(header: &str) -> String {
    match header.split_once(':') {
        Some((name, _))
            if crate::record::SECRET_HEADERS
                .contains(&name.trim().to_ascii_lowercase().as_str()) =>
        {
            format!("{name}: ***")
        }
        _ => header.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_credentials() {
        assert_eq!(
            redact_url("https://user:pw@example.com:8443/v1"),
            "https://***@example.com:8443/v1"
        );
        assert_eq!(
            redact_url("http://localhost:8000/v1"),
            "http://localhost:8000/v1"
        );
    }

    #[test]
    fn command_lines_lose_their_secrets() {
        let args: Vec<String> = [
            "goodput",
            "run",
            "--api-key",
            "sk-1",
            "--api-key=sk-2",
            "--header",
            "Authorization: Bearer x",
            "--header=X-Trace: 1",
            "--target",
            "http://a:b@h/v1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let joined = redact_command_line(&args).join(" ");
        for secret in ["sk-1", "sk-2", "Bearer x", "a:b"] {
            assert!(!joined.contains(secret), "{joined}");
        }
        assert!(joined.contains("X-Trace: 1"));
    }
}
