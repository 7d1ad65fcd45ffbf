//! `goodput monitor`: watch a live server's `/metrics` window by window until `--duration`
//! or Ctrl-C, printing a rolling table (or JSON lines) and appending rows to `--jsonl`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::process::ExitCode;

use anyhow::{Context, Result};
use goodput_core::observe::monitor::{MonitorRow, watch};
use tokio_util::sync::CancellationToken;

use crate::exit::EXIT_OK;
use crate::options::monitor::MonitorOptions;
use crate::output;

/// Runs `goodput monitor`.
pub(crate) async fn run(options: MonitorOptions) -> Result<ExitCode> {
    let MonitorOptions {
        url,
        config,
        duration,
        jsonl,
        json,
    } = options;
    let endpoint = crate::wiring::server_side::metrics_endpoint(&url, config.interval)?;
    let mut jsonl = match &jsonl {
        Some(path) => Some(
            OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("--jsonl: cannot open {}", path.display()))?,
        ),
        None => None,
    };
    let cancel = CancellationToken::new();
    let on_signal = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_signal.cancel();
        }
    });
    if !json {
        let until = duration.map_or("until Ctrl-C".to_string(), |d| format!("for {d:?}"));
        println!(
            "watching {url} every {:?}, one row per {:?}, queue trend over {} rows, {until}",
            config.interval, config.window, config.trend_windows
        );
        println!("{}", output::monitor::header());
    }
    let mut write_error = None;
    watch(&endpoint, &config, duration, cancel, |row| {
        if let Err(error) = emit(row, json, jsonl.as_mut()) {
            write_error.get_or_insert(error);
        }
    })
    .await;
    if let Some(error) = write_error {
        return Err(error);
    }
    Ok(ExitCode::from(EXIT_OK))
}

fn emit(row: &MonitorRow, json: bool, jsonl: Option<&mut File>) -> Result<()> {
    let line = serde_json::to_string(row).context("serializing a monitor row")?;
    if json {
        println!("{line}");
    } else {
        println!("{}", output::monitor::row(row));
    }
    if let Some(file) = jsonl {
        writeln!(file, "{line}").context("--jsonl: writing a row")?;
        file.flush().context("--jsonl: writing a row")?;
    }
    Ok(())
}
