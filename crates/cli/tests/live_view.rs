//! The live view under a real terminal (tmux): it draws, `q` and Ctrl-C stop the run cleanly
//! with the results kept, and the terminal is restored (cooked mode, main screen, cursor
//! shown) on those exits and when the view panics.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// A tmux server of its own (a private socket), killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// Starts `command` in a detached 120×40 session.
    fn start(name: &str, command: &str) -> Tmux {
        Tmux::start_sized(name, command, 120, 40)
    }

    /// Starts `command` in a detached session of `columns`×`rows`.
    fn start_sized(name: &str, command: &str, columns: u16, rows: u16) -> Tmux {
        let available = Command::new("tmux")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
        assert!(
            available,
            "tmux is needed to test the live view under a terminal; install it: apt-get install -y tmux (.ci/run does this)"
        );
        let tmux = Tmux {
            socket: format!("goodput-test-{name}-{}", std::process::id()),
        };
        let output = tmux.run(&[
            "-f",
            "/dev/null",
            "new-session",
            "-d",
            "-s",
            "main",
            "-x",
            &columns.to_string(),
            "-y",
            &rows.to_string(),
            command,
        ]);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        tmux
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap()
    }

    fn screen(&self) -> String {
        String::from_utf8_lossy(
            &self
                .run(&["capture-pane", "-p", "-J", "-S", "-200", "-t", "main"])
                .stdout,
        )
        .into_owned()
    }

    fn wait_for(&self, text: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(90);
        loop {
            let screen = self.screen();
            if screen.contains(text) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "`{text}` never appeared; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn keys(&self, keys: &str) {
        assert!(
            self.run(&["send-keys", "-t", "main", keys])
                .status
                .success()
        );
    }

    fn pane_flag(&self, format: &str) -> String {
        String::from_utf8_lossy(
            &self
                .run(&["display-message", "-p", "-t", "main", format])
                .stdout,
        )
        .trim()
        .to_string()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// A shell command running `goodput run` for up to a minute, then reporting its exit status
/// and whether the terminal settings are those it started with.
fn script(out: &Path, env: &str) -> String {
    script_for(out, env, "60s")
}

fn script_for(out: &Path, env: &str, duration: &str) -> String {
    format!(
        "sh -c 'before=$(stty -g); {env} {} run --rate 20 --duration {duration} --seed 1 --out {}; \
         status=$?; after=$(stty -g); \
         if [ \"$before\" = \"$after\" ]; then echo TTY-RESTORED; else echo TTY-CHANGED; fi; \
         echo EXIT=$status; sleep 600'",
        env!("CARGO_BIN_EXE_goodput"),
        out.display()
    )
}

fn assert_restored(tmux: &Tmux, screen: &str) {
    assert!(
        screen.contains("TTY-RESTORED"),
        "terminal settings not restored:\n{screen}"
    );
    assert_eq!(
        tmux.pane_flag("#{alternate_on}"),
        "0",
        "still on the alternate screen"
    );
    assert_eq!(tmux.pane_flag("#{cursor_flag}"), "1", "cursor still hidden");
}

fn stop_with(key: &str, name: &str) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let tmux = Tmux::start(name, &script(&out, ""));
    let live = tmux.wait_for("q / Ctrl-C: stop the run");
    assert!(
        live.contains("offered") && live.contains("in flight") && live.contains("TTFT"),
        "{live}"
    );
    assert_eq!(
        tmux.pane_flag("#{alternate_on}"),
        "1",
        "the view uses the alternate screen"
    );
    let running = tmux.wait_for("scheduled 2");
    let lines: Vec<&str> = running.lines().collect();
    let text = lines.iter().position(|l| l.contains("elapsed")).unwrap();
    assert!(
        !lines[text].contains('█') && !lines[text].contains('░'),
        "the progress text is not written over the bar:\n{running}"
    );
    assert!(
        lines[text + 1].contains('░') || lines[text + 1].contains('█'),
        "the bar is on the line below its text:\n{running}"
    );
    tmux.keys(key);
    let screen = tmux.wait_for("EXIT=");
    assert!(
        screen.contains("EXIT=130"),
        "an interrupted run exits 130:\n{screen}"
    );
    assert!(
        screen.contains("Throughput") && screen.contains("interrupted"),
        "summary printed:\n{screen}"
    );
    assert_restored(&tmux, &screen);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(report["run"]["end_reason"], "interrupted", "results kept");
}

#[test]
fn q_stops_the_run_keeps_the_results_and_restores_the_terminal() {
    stop_with("q", "q");
}

#[test]
fn ctrl_c_stops_the_run_keeps_the_results_and_restores_the_terminal() {
    stop_with("C-c", "ctrl-c");
}

#[test]
fn a_panicking_live_view_restores_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let tmux = Tmux::start("panic", &script(&out, "GOODPUT_TEST_LIVE_VIEW_PANIC=1"));
    let screen = tmux.wait_for("EXIT=");
    assert!(
        screen.contains("panics on purpose"),
        "the panic message is shown:\n{screen}"
    );
    assert!(screen.contains("the live view crashed"), "{screen}");
    assert_restored(&tmux, &screen);
    assert!(out.join("report.json").exists(), "results kept");
}

#[test]
fn a_narrow_terminal_gets_plain_progress_lines() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let tmux = Tmux::start_sized("narrow", &script_for(&out, "", "8s"), 60, 30);
    let progress = tmux.wait_for("] scheduled");
    assert_eq!(
        tmux.pane_flag("#{alternate_on}"),
        "0",
        "no full-screen view on 60 columns:\n{progress}"
    );
    let screen = tmux.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(
        !screen.contains("q / Ctrl-C: stop the run"),
        "the live view never drew:\n{screen}"
    );
    assert!(screen.contains("Throughput:"), "summary printed:\n{screen}");
}
