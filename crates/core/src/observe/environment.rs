//! Run metadata about the machines involved: [`HostInfo`] describes the client host (CPU,
//! cores, memory, OS, read from `/proc` and `/etc/os-release` on Linux, with portable
//! fallbacks), [`ServerInfo`] what the target says about itself (its `/v1/models` list and
//! identifying response headers such as `server` and `via`, gathered from the request records
//! by [`ServerHeaders`]).

use std::collections::{BTreeMap, BTreeSet};
use std::io;

use crate::record::RequestRecord;
pub use crate::report::run::{HostInfo, ServerInfo};
use crate::runner::RecordSink;

impl HostInfo {
    /// Describes this machine (never fails: unknown parts are `None`).
    pub fn collect() -> Self {
        let cpuinfo = read("/proc/cpuinfo");
        HostInfo {
            hostname: read("/proc/sys/kernel/hostname")
                .or_else(|| read("/etc/hostname"))
                .map(|h| h.trim().to_string())
                .filter(|h| !h.is_empty()),
            os: read("/etc/os-release")
                .as_deref()
                .and_then(os_release_name)
                .unwrap_or_else(|| std::env::consts::OS.to_string()),
            kernel: kernel(),
            arch: std::env::consts::ARCH.to_string(),
            cpu_model: cpuinfo.as_deref().and_then(cpu_model),
            logical_cores: std::thread::available_parallelism()
                .map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX)),
            physical_cores: cpuinfo.as_deref().and_then(physical_cores),
            memory_total_mib: read("/proc/meminfo").as_deref().and_then(memory_total_mib),
        }
    }
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

fn kernel() -> Option<String> {
    let name = read("/proc/sys/kernel/ostype")?;
    let release = read("/proc/sys/kernel/osrelease")?;
    Some(format!("{} {}", name.trim(), release.trim()))
}

/// `PRETTY_NAME` (else `NAME`) of an `os-release` file.
fn os_release_name(text: &str) -> Option<String> {
    let field = |key: &str| {
        text.lines().find_map(|line| {
            let value = line.strip_prefix(key)?.strip_prefix('=')?;
            Some(value.trim().trim_matches('"').to_string())
        })
    };
    field("PRETTY_NAME").or_else(|| field("NAME"))
}

/// The first `model name` (x86) or `Model`/`Hardware` (ARM) line of `/proc/cpuinfo`.
fn cpu_model(cpuinfo: &str) -> Option<String> {
    ["model name", "Model", "Hardware", "cpu model"]
        .iter()
        .find_map(|key| {
            cpuinfo.lines().find_map(|line| {
                let (name, value) = line.split_once(':')?;
                (name.trim() == *key && !value.trim().is_empty()).then(|| value.trim().to_string())
            })
        })
}

/// Distinct `(physical id, core id)` pairs of `/proc/cpuinfo`.
fn physical_cores(cpuinfo: &str) -> Option<u32> {
    let mut cores = BTreeSet::new();
    let mut physical = None;
    for line in cpuinfo.lines() {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        match name.trim() {
            "physical id" => physical = Some(value.trim().to_string()),
            "core id" => {
                cores.insert((physical.clone(), value.trim().to_string()));
            }
            _ => {}
        }
    }
    (!cores.is_empty()).then(|| u32::try_from(cores.len()).unwrap_or(u32::MAX))
}

fn memory_total_mib(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024)
}

/// Response headers that identify the serving software (others, like `date` or
/// `x-request-id`, change per request and say nothing about the server).
pub const IDENTIFYING_HEADERS: [&str; 2] = ["server", "via"];

/// Distinct values kept per header.
const MAX_VALUES_PER_HEADER: usize = 8;

/// Collects the distinct identifying header values of finished requests (a [`RecordSink`]).
#[derive(Debug, Clone, Default)]
pub struct ServerHeaders {
    seen: BTreeMap<String, BTreeSet<String>>,
}

impl ServerHeaders {
    /// Folds in one record's headers.
    pub fn add(&mut self, record: &RequestRecord) {
        for (name, value) in &record.headers {
            let name = name.to_ascii_lowercase();
            if !IDENTIFYING_HEADERS.contains(&name.as_str()) {
                continue;
            }
            let values = self.seen.entry(name).or_default();
            if values.len() < MAX_VALUES_PER_HEADER {
                values.insert(value.clone());
            }
        }
    }

    /// The server info with `models` from `/v1/models`.
    pub fn server_info(&self, models: Vec<String>) -> ServerInfo {
        ServerInfo {
            models,
            headers: self
                .seen
                .iter()
                .map(|(name, values)| (name.clone(), values.iter().cloned().collect()))
                .collect(),
        }
    }
}

impl RecordSink for ServerHeaders {
    fn record(&mut self, record: &RequestRecord) -> io::Result<()> {
        self.add(record);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_files() {
        let cpuinfo = "processor\t: 0\nmodel name\t: Example CPU @ 3.0GHz\nphysical id\t: 0\ncore id\t\t: 0\n\nprocessor\t: 1\nmodel name\t: Example CPU @ 3.0GHz\nphysical id\t: 0\ncore id\t\t: 0\n\nprocessor\t: 2\nphysical id\t: 0\ncore id\t\t: 1\n";
        assert_eq!(cpu_model(cpuinfo).as_deref(), Some("Example CPU @ 3.0GHz"));
        assert_eq!(physical_cores(cpuinfo), Some(2));
        assert_eq!(
            memory_total_mib("MemTotal:       16384000 kB\nMemFree: 1 kB\n"),
            Some(16000)
        );
        assert_eq!(
            os_release_name("NAME=\"Debian\"\nPRETTY_NAME=\"Debian GNU/Linux 12\"\n").as_deref(),
            Some("Debian GNU/Linux 12")
        );
    }

    #[test]
    fn collects_this_host_without_failing() {
        let host = HostInfo::collect();
        assert!(host.logical_cores >= 1);
        assert!(!host.arch.is_empty());
    }
}
