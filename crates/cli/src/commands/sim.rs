//! `goodput sim`: serve the simulated engine until Ctrl-C, or print its derived figures.

use std::process::ExitCode;

use anyhow::{Context, Result};

use crate::exit::EXIT_OK;
use crate::options::sim::SimOptions;

/// Runs `goodput sim`.
pub(crate) async fn run(options: SimOptions) -> Result<ExitCode> {
    let SimOptions {
        config,
        explain,
        listen,
    } = options;
    if explain {
        print!("{}", goodput_sim::explain::explain(&config));
        return Ok(ExitCode::from(EXIT_OK));
    }
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("--listen {listen}: cannot bind"))?;
    let address = listener.local_addr().context("reading the bound address")?;
    let server = goodput_sim::SimServer::new(config).context("starting the simulator")?;
    eprintln!(
        "goodput sim: serving {} on http://{address}/v1 (Ctrl-C to stop)",
        server.model_name()
    );
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    server.serve(listener, shutdown).await.context("serving")?;
    Ok(ExitCode::from(EXIT_OK))
}
