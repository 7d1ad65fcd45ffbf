//! The machines of `run`: the client host (`run.client_host`) and what the target says about
//! itself (`run.server_info`), filled by [`crate::observe::environment`]; and the SLO classes
//! of the run (`run.classes`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The machine goodput ran on.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HostInfo {
    /// Host name, when known.
    pub hostname: Option<String>,
    /// Operating system (e.g. `Debian GNU/Linux 12 (bookworm)`), or the OS family.
    pub os: String,
    /// Kernel name and release (e.g. `Linux 6.1.0-18-amd64`), when known.
    pub kernel: Option<String>,
    /// CPU architecture (e.g. `x86_64`).
    pub arch: String,
    /// CPU model name, when known.
    pub cpu_model: Option<String>,
    /// Logical CPUs available to goodput.
    pub logical_cores: u32,
    /// Physical cores, when known.
    pub physical_cores: Option<u32>,
    /// Total memory, MiB, when known.
    pub memory_total_mib: Option<u64>,
}

/// What the target says about itself.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ServerInfo {
    /// Model ids listed at `/v1/models` (empty when it was not asked or did not answer).
    pub models: Vec<String>,
    /// Distinct values of identifying response headers (`server`, `via`), by header name.
    pub headers: BTreeMap<String, Vec<String>>,
}

/// One SLO class of a run (`--class interactive=80%:ttft=500ms,tpot=50ms`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassInfo {
    /// The class.
    pub name: String,
    /// Its share of the requests, 0–1.
    pub share: f64,
    /// Its SLO, in flag syntax: its requests are judged against it alone.
    pub slo: String,
}
