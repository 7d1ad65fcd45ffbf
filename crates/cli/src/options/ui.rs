//! `goodput ui`'s plain configuration.

use std::net::SocketAddr;

use crate::options::store::StoreSpec;

/// Everything `goodput ui` runs with.
#[derive(Debug, Clone)]
pub(crate) struct UiOptions {
    /// `--store`: the history shown.
    pub(crate) store: StoreSpec,
    /// `--listen`: where to serve (loopback unless `--allow-remote` was given).
    pub(crate) listen: SocketAddr,
}
