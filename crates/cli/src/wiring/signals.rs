//! Ctrl-C and SIGTERM: [`wait_for_signal`] waits for either, [`cancel_on_signal`] turns the
//! first into a cancelled token (a run stops cleanly) and the second into an exit at once
//! (`goodput tune` installs its own, which also kills its server first).

use tokio_util::sync::CancellationToken;

use crate::exit::EXIT_INTERRUPTED;

/// A token cancelled by the first Ctrl-C (or SIGTERM): stop the run cleanly. Second: exit at
/// once (the journal is already flushed line by line).
pub(crate) fn cancel_on_signal() -> CancellationToken {
    let cancel = CancellationToken::new();
    let token = cancel.clone();
    tokio::spawn(async move {
        if wait_for_signal().await.is_err() {
            return;
        }
        eprintln!("\nstopping: cancelling in-flight requests (Ctrl-C again to exit at once)");
        cancel.cancel();
        if wait_for_signal().await.is_ok() {
            std::process::exit(i32::from(EXIT_INTERRUPTED));
        }
    });
    token
}

pub(crate) async fn wait_for_signal() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            result = tokio::signal::ctrl_c() => result,
            _ = terminate.recv() => Ok(()),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await
    }
}
