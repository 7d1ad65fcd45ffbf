//! Phase profiles: a load that changes over the run — e.g. nominal → overload at k × capacity
//! → nominal, to measure recovery — given on the command line
//! (`nominal=8:60s,overload=20:30s,recovery=8:2m`) or in a TOML/JSON file with the same fields.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use crate::report::phases::RatePhase;
use crate::units::parse_duration;

/// Arrival process of open-loop load.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Arrival {
    /// Exponential inter-arrival times (memoryless).
    Poisson,
    /// Equal spacing.
    Constant,
    /// Gamma inter-arrival times with shape `burstiness` (1 = Poisson, < 1 burstier, > 1
    /// smoother), mean `1 / rate`.
    Gamma {
        /// Gamma shape parameter.
        burstiness: f64,
    },
}

impl Arrival {
    /// `poisson`, `constant` or `gamma`.
    pub fn name(&self) -> &'static str {
        match self {
            Arrival::Poisson => "poisson",
            Arrival::Constant => "constant",
            Arrival::Gamma { .. } => "gamma",
        }
    }
}

/// A profile that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid phase profile: {0} (e.g. `nominal=8:60s,overload=20:30s,recovery=8:2m`)")]
pub struct ProfileError(pub String);

/// Parses `[name=]RATE:DURATION[,…]`.
pub fn parse_phases(text: &str) -> Result<Vec<RatePhase>, ProfileError> {
    let phases = text
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .enumerate()
        .map(|(i, term)| {
            let (name, spec) = match term.split_once('=') {
                Some((name, spec)) => (name.trim().to_string(), spec),
                None => (format!("phase{}", i + 1), term),
            };
            let (rate, duration) = spec
                .split_once(':')
                .ok_or_else(|| ProfileError(format!("`{term}` needs RATE:DURATION")))?;
            let rate_per_sec: f64 = rate
                .trim()
                .trim_end_matches("/s")
                .parse()
                .map_err(|_| ProfileError(format!("`{rate}` is not a rate")))?;
            let duration = parse_duration(duration).map_err(|e| ProfileError(e.to_string()))?;
            Ok(RatePhase {
                name,
                rate_per_sec,
                duration,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    validate_phases(&phases)?;
    Ok(phases)
}

/// Checks that there is at least one phase and every rate and length is positive.
pub fn validate_phases(phases: &[RatePhase]) -> Result<(), ProfileError> {
    if phases.is_empty() {
        return Err(ProfileError("no phase".into()));
    }
    for phase in phases {
        if !(phase.rate_per_sec.is_finite() && phase.rate_per_sec > 0.0) {
            return Err(ProfileError(format!(
                "phase `{}`: the rate must be positive",
                phase.name
            )));
        }
        if phase.duration.is_zero() {
            return Err(ProfileError(format!(
                "phase `{}`: the duration must be positive",
                phase.name
            )));
        }
    }
    Ok(())
}

/// The profile file: phases and, optionally, the arrival process.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileFile {
    /// Arrival process (`poisson`, `constant`; default Poisson).
    #[serde(default)]
    pub arrival: Option<String>,
    /// Gamma shape when `arrival = "gamma"`.
    #[serde(default)]
    pub burstiness: Option<f64>,
    /// The phases, in order.
    pub phases: Vec<FilePhase>,
}

/// A phase as written in a file (durations as text, e.g. `"60s"`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilePhase {
    /// Name.
    #[serde(default)]
    pub name: Option<String>,
    /// Requests per second.
    pub rate: f64,
    /// Length, e.g. `"30s"` or `"2m"`.
    pub duration: String,
}

impl ProfileFile {
    /// Reads a TOML (`.toml`) or JSON file.
    pub fn read(path: &Path) -> Result<(Vec<RatePhase>, Arrival), ProfileError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ProfileError(format!("cannot read {}: {e}", path.display())))?;
        let file: ProfileFile = if path.extension().is_some_and(|e| e == "toml") {
            toml::from_str(&text).map_err(|e| ProfileError(format!("{}: {e}", path.display())))?
        } else {
            serde_json::from_str(&text)
                .map_err(|e| ProfileError(format!("{}: {e}", path.display())))?
        };
        file.into_phases()
    }

    fn into_phases(self) -> Result<(Vec<RatePhase>, Arrival), ProfileError> {
        let arrival = match (self.arrival.as_deref(), self.burstiness) {
            (None | Some("poisson"), None) => Arrival::Poisson,
            (Some("constant"), None) => Arrival::Constant,
            (Some("gamma"), Some(burstiness)) => Arrival::Gamma { burstiness },
            (other, _) => {
                return Err(ProfileError(format!(
                    "unknown arrival {other:?} (poisson, constant, or gamma with burstiness)"
                )));
            }
        };
        let phases = self
            .phases
            .into_iter()
            .enumerate()
            .map(|(i, phase)| {
                let duration =
                    parse_duration(&phase.duration).map_err(|e| ProfileError(e.to_string()))?;
                let name = phase.name.unwrap_or_else(|| format!("phase{}", i + 1));
                Ok(RatePhase {
                    name,
                    rate_per_sec: phase.rate,
                    duration,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        validate_phases(&phases)?;
        Ok((phases, arrival))
    }
}

/// Total length of a profile.
pub fn total_duration(phases: &[RatePhase]) -> Duration {
    phases.iter().map(|p| p.duration).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_and_files_say_the_same_thing() {
        let flags = parse_phases("nominal=8:60s, overload=20/s:30s, 8:2m").unwrap();
        assert_eq!(flags.len(), 3);
        assert_eq!(flags[1].rate_per_sec, 20.0);
        assert_eq!(flags[2].name, "phase3");
        assert_eq!(total_duration(&flags), Duration::from_secs(210));
        let toml_text = r#"
            arrival = "constant"
            [[phases]]
            name = "nominal"
            rate = 8
            duration = "60s"
            [[phases]]
            name = "overload"
            rate = 20
            duration = "30s"
            [[phases]]
            rate = 8
            duration = "2m"
        "#;
        let file: ProfileFile = toml::from_str(toml_text).unwrap();
        let (phases, arrival) = file.into_phases().unwrap();
        assert_eq!(phases, flags);
        assert_eq!(arrival, Arrival::Constant);
    }

    #[test]
    fn bad_profiles_say_what_is_wrong() {
        for (text, needle) in [
            ("8", "RATE:DURATION"),
            ("x:5s", "not a rate"),
            ("8:5", "unit"),
            ("0:5s", "positive"),
            ("", "no phase"),
        ] {
            let error = parse_phases(text).unwrap_err().to_string();
            assert!(error.contains(needle), "{text}: {error}");
        }
    }
}
