//! `goodput sim`'s configuration: the simulator (a file as the base, flags on top, validated)
//! and whether to serve it or explain it.

use std::net::SocketAddr;

use goodput_sim::SimConfig;

/// Everything `goodput sim` runs with.
#[derive(Debug, Clone)]
pub(crate) struct SimOptions {
    /// The simulator's configuration.
    pub(crate) config: SimConfig,
    /// `--explain`: print the derived figures instead of serving.
    pub(crate) explain: bool,
    /// `--listen`.
    pub(crate) listen: SocketAddr,
}
