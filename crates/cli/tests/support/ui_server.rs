//! `goodput ui` started for a test on a free loopback port (`--listen 127.0.0.1:0`, the address
//! read from the first line it prints on stderr) and stopped as a person stops it, with Ctrl-C (SIGINT); and
//! runs recorded into a history store in virtual time (instant, and exact: a fixed-timing
//! simulator's TTFT is the same for every request).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

use assert_cmd::cargo::CommandCargoExt;

/// A running `goodput ui`.
pub struct UiServer {
    child: Child,
    /// Its address, `http://127.0.0.1:PORT`.
    pub url: String,
}

impl UiServer {
    /// Serves `store` (a file or a postgres:// URL); waits (bounded) for its address.
    pub fn start(store: &str) -> UiServer {
        let mut child = Command::cargo_bin("goodput")
            .unwrap()
            .args(["ui", "--store", store, "--listen", "127.0.0.1:0"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stderr.take().unwrap();
        let (send, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = send.send(line);
            }
        });
        let line = lines
            .recv_timeout(Duration::from_secs(60))
            .expect("goodput ui printed no address");
        let start = line.find("http://").expect("an http:// address");
        let url = line[start..]
            .split_whitespace()
            .next()
            .unwrap()
            .trim_end_matches('/')
            .to_string();
        UiServer { child, url }
    }

    /// Ctrl-C, then its exit status (it must stop within 10 s).
    pub fn stop(mut self) -> ExitStatus {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-INT", &pid]).status().unwrap();
        assert!(sent.success(), "kill -INT {pid}");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "goodput ui did not stop within 10 s of Ctrl-C"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for UiServer {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Records one virtual-time run of 40 requests against a fixed-timing simulator with
/// `ttft_ms` into `store`, tagged `tag` (KEY=VALUE); `command` is `run`, `sweep` (with its
/// levels) or `capacity` (with its SLO).
pub fn record(dir: &Path, store: &str, command: &[&str], ttft_ms: u64, tag: &str) {
    let sim = super::fixed_sim(dir, &format!("ttft{ttft_ms}"), ttft_ms, 2);
    let output = Command::cargo_bin("goodput")
        .unwrap()
        .args(command)
        .args(["--virtual-time", "--sim-config", sim.to_str().unwrap()])
        .args([
            "--input-tokens",
            "16",
            "--output-tokens",
            "8",
            "--seed",
            "7",
        ])
        .args(["--store", store, "--tag", tag])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "goodput {command:?} --store failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// `goodput run` arguments for [`record`]: 40 measured requests at 20/s.
pub const RUN: [&str; 8] = [
    "run",
    "--no-live",
    "--rate",
    "20",
    "--requests",
    "45",
    "--warmup",
    "5",
];
