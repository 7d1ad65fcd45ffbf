//! `goodput sim` as a child process on a free loopback port, stopped when dropped.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};

use super::goodput;

/// A running `goodput sim --listen 127.0.0.1:0`; `url` is its base URL.
pub struct Sim {
    child: Child,
    pub url: String,
}

impl Sim {
    /// Starts the simulator with `config` (and `extra` flags) and waits for its address.
    pub fn start(config: &Path, extra: &[&str]) -> Sim {
        let mut child = goodput()
            .args(["sim", "--listen", "127.0.0.1:0", "--config"])
            .arg(config)
            .args(extra)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        stderr.read_line(&mut line).unwrap();
        let url = line
            .split_whitespace()
            .find(|word| word.starts_with("http://"))
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_string();
        Sim { child, url }
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
