//! The live view of a running benchmark. On a terminal (stderr and stdin are TTYs, no
//! `--quiet`, `--no-live` or `--json`), a ratatui screen on its own thread shows elapsed and
//! remaining time, offered vs completed rate, in-flight, tokens/s, latency percentiles so far,
//! error counts and a sparkline; `q`, Esc or Ctrl-C stops the run cleanly (results are kept)
//! and the terminal is restored on every exit path, panics included. It reads the runner's
//! atomic counters and the snapshots a [`LiveSink`] publishes over a watch channel: nothing it
//! does can slow the hot path. Elsewhere — and on a terminal smaller than
//! [`MIN_COLUMNS`]×[`MIN_ROWS`] — `goodput run` prints plain progress lines; a terminal shrunk
//! below that during the run gets the same figures as plain lines inside the view.

mod draw;
mod terminal;

use std::io::IsTerminal;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use goodput_core::observe::live::{LiveSink, LiveSnapshot};
use goodput_core::runner::RunMonitor;
use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub(crate) use draw::Plan;
use draw::Screen;

/// Set (to anything) to make the live view panic after its first frame: the test hook that
/// proves the terminal is restored on a panic.
pub(crate) const PANIC_TEST_VARIABLE: &str = "GOODPUT_TEST_LIVE_VIEW_PANIC";

/// Time between two frames.
const FRAME: Duration = Duration::from_millis(250);

/// Narrowest terminal the live view draws its boxes on.
pub(crate) const MIN_COLUMNS: u16 = 72;
/// Lowest terminal the live view draws its boxes on.
pub(crate) const MIN_ROWS: u16 = 24;

/// Whether the live view can run: stderr and stdin are terminals at least
/// [`MIN_COLUMNS`]×[`MIN_ROWS`] large (or of a size the terminal does not report).
pub(crate) fn available() -> bool {
    std::io::stderr().is_terminal()
        && std::io::stdin().is_terminal()
        && ratatui::crossterm::terminal::size().is_ok_and(|(columns, rows)| {
            (columns, rows) == (0, 0) || (columns >= MIN_COLUMNS && rows >= MIN_ROWS)
        })
}

/// A running live view.
#[derive(Debug)]
pub(crate) struct LiveView {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl LiveView {
    /// Starts the view on its own thread; returns it and the sink to add to the run's sinks.
    pub(crate) fn start(
        plan: Plan,
        monitor: Arc<RunMonitor>,
        cancel: CancellationToken,
    ) -> Result<(LiveView, LiveSink)> {
        let (sink, snapshots) = LiveSink::new();
        let stop = Arc::new(AtomicBool::new(false));
        let guard = terminal::TerminalGuard::enter()?;
        let thread_stop = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("goodput-live".into())
            .spawn(move || {
                let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    let result = ui_loop(&plan, &monitor, &snapshots, &cancel, &thread_stop);
                    drop(guard);
                    result
                }));
                terminal::restore();
                match outcome {
                    Ok(Ok(())) => {}
                    Ok(Err(error)) => {
                        eprintln!("the live view failed: {error:#}; stopping the run");
                        cancel.cancel();
                    }
                    Err(_) => {
                        eprintln!("the live view crashed; stopping the run (results are kept)");
                        cancel.cancel();
                    }
                }
            })
            .context("cannot start the live view")?;
        Ok((
            LiveView {
                stop,
                thread: Some(thread),
            },
            sink,
        ))
    }

    /// Stops the view and restores the terminal (before the summary is printed).
    pub(crate) fn finish(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        terminal::restore();
    }
}

impl Drop for LiveView {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        terminal::restore();
    }
}

fn ui_loop(
    plan: &Plan,
    monitor: &RunMonitor,
    snapshots: &watch::Receiver<LiveSnapshot>,
    cancel: &CancellationToken,
    stop: &AtomicBool,
) -> Result<()> {
    let mut terminal = Terminal::new(CrosstermBackend::new(std::io::stderr()))
        .context("cannot draw on the terminal")?;
    let mut screen = Screen::new(Instant::now());
    let panic_after_first_frame = std::env::var_os(PANIC_TEST_VARIABLE).is_some();
    let mut next_frame = Instant::now();
    while !stop.load(Ordering::SeqCst) {
        if Instant::now() >= next_frame {
            screen.sample(monitor.progress());
            let snapshot = snapshots.borrow().clone();
            terminal
                .draw(|frame| screen.draw(frame, plan, &snapshot, cancel.is_cancelled()))
                .context("drawing the live view")?;
            next_frame = Instant::now() + FRAME;
            if panic_after_first_frame {
                panic!("{PANIC_TEST_VARIABLE} is set: the live view panics on purpose");
            }
        }
        if event::poll(Duration::from_millis(50)).context("reading the keyboard")?
            && let Event::Key(key) = event::read().context("reading the keyboard")?
            && key.kind != KeyEventKind::Release
        {
            let ctrl_c =
                key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL);
            if ctrl_c || matches!(key.code, KeyCode::Char('q') | KeyCode::Esc) {
                cancel.cancel();
                next_frame = Instant::now();
            }
        }
    }
    Ok(())
}
