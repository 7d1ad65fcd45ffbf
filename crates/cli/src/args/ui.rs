//! `goodput ui` arguments: the history store to serve and where to listen (loopback unless
//! `--allow-remote` says otherwise).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Result, bail};

use crate::options::store::StoreSpec;
use crate::options::ui::UiOptions;

/// Arguments of `goodput ui`.
#[derive(Debug, clap::Args)]
pub(crate) struct UiArgs {
    /// The history store to show (`goodput run --store`): a SQLite file or a PostgreSQL URL
    /// (postgres://user:password@host:port/db).
    #[arg(long, env = "GOODPUT_STORE", value_name = "DB")]
    pub(crate) store: PathBuf,
    /// The address and port to serve on (port 0: any free port, printed at start).
    #[arg(long, default_value = "127.0.0.1:8765", value_name = "ADDRESS:PORT")]
    pub(crate) listen: SocketAddr,
    /// Serve on an address other than loopback: everyone who can reach it reads the whole
    /// history (there is no authentication).
    #[arg(long)]
    pub(crate) allow_remote: bool,
}

impl UiArgs {
    /// `goodput ui`'s configuration: a non-loopback address refused without `--allow-remote`.
    pub(crate) fn into_options(self) -> Result<UiOptions> {
        if !self.listen.ip().is_loopback() && !self.allow_remote {
            bail!(
                "--listen {}: not a loopback address, so anyone who can reach this machine would \
                 read the run history (goodput ui has no authentication); add --allow-remote to \
                 serve it there anyway",
                self.listen
            );
        }
        Ok(UiOptions {
            store: StoreSpec::from_path(self.store),
            listen: self.listen,
        })
    }
}
