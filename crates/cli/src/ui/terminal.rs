//! Terminal state for the live view: [`TerminalGuard`] enters raw mode and the alternate
//! screen and restores both (and the cursor) when dropped — on a normal exit, an early return,
//! or a panic, whose hook restores the terminal before the panic message is printed.

use std::io::Write;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, Result};
use ratatui::crossterm::cursor::{Hide, Show};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};

/// Whether the terminal is currently in the live view's state.
static ACTIVE: AtomicBool = AtomicBool::new(false);
static HOOK: Once = Once::new();

/// Restores the terminal once; later calls do nothing.
pub(crate) fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let _ = disable_raw_mode();
        let mut stderr = std::io::stderr();
        let _ = execute!(stderr, LeaveAlternateScreen, Show);
        let _ = stderr.flush();
    }
}

/// Raw mode and the alternate screen for as long as it lives.
#[derive(Debug)]
pub(crate) struct TerminalGuard(());

impl TerminalGuard {
    /// Switches the terminal (on stderr) to the live view's state.
    pub(crate) fn enter() -> Result<TerminalGuard> {
        HOOK.call_once(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                restore();
                previous(info);
            }));
        });
        enable_raw_mode().context("cannot switch the terminal to raw mode")?;
        ACTIVE.store(true, Ordering::SeqCst);
        let guard = TerminalGuard(());
        execute!(std::io::stderr(), EnterAlternateScreen, Hide)
            .context("cannot switch to the alternate screen")?;
        Ok(guard)
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}
