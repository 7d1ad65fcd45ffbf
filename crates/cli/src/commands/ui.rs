//! `goodput ui`: the history store served as a local web app ([`crate::web`]) on loopback by
//! default, until Ctrl-C (or SIGTERM): the server stops accepting, lets requests in flight
//! finish (5 s at most) and exits 0.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};

use crate::exit::EXIT_OK;
use crate::options::ui::UiOptions;
use crate::store;

/// How long requests in flight may take to finish once asked to stop.
const DRAIN: Duration = Duration::from_secs(5);

/// Runs `goodput ui`.
pub(crate) async fn run(options: UiOptions) -> Result<ExitCode> {
    let spec = options.store.clone();
    // Open (create, migrate) the store first, so a wrong URL or file fails at once.
    let version = tokio::task::spawn_blocking(move || store::open(&spec)?.schema_version())
        .await
        .context("opening the history store")??;
    let listener = tokio::net::TcpListener::bind(options.listen)
        .await
        .with_context(|| format!("--listen {}: cannot listen there", options.listen))?;
    let address = listener.local_addr().context("the listening address")?;
    eprintln!(
        "goodput ui: {} (schema version {version}) at http://{address}/ (Ctrl-C stops)",
        options.store
    );
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(
        axum::serve(listener, crate::web::router(options.store))
            .with_graceful_shutdown(async move {
                let _ = stopped.await;
            })
            .into_future(),
    );
    stop_signal().await;
    let _ = stop.send(());
    match tokio::time::timeout(DRAIN, server).await {
        Ok(joined) => joined
            .context("the web server")?
            .context("the web server")?,
        Err(_) => eprintln!("goodput ui: requests still open after {DRAIN:?}; stopped anyway"),
    }
    eprintln!("goodput ui: stopped");
    Ok(ExitCode::from(EXIT_OK))
}

/// Ctrl-C, or SIGTERM on Unix.
async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}
