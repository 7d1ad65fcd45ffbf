//! What the `goodput tune` tests share: fixed-timing simulator configurations whose capacity is
//! known from arithmetic, a server script that `--server-cmd` runs (it notes every start and
//! can hang, exit at once, ignore SIGTERM or crash mid-step), and a look at `/proc` for any of
//! its processes left behind.

use std::path::{Path, PathBuf};

/// Each request's service on a fixed-timing slot: 200 ms TTFT + 5 × 20 ms for a 6-token answer.
pub const SERVICE_SECS: f64 = 0.3;

/// Target-time seconds per real second of every test server.
pub const TIME_SCALE: &str = "5";

/// Writes `sim-{slots}.json` (a fixed-timing engine with `slots` slots) for each of `slots`.
pub fn fixed_configs(dir: &Path, slots: &[u32]) {
    for n in slots {
        let text = format!(
            r#"{{"engine": {{"kind": "fixed", "ttft": 200, "itl": 20, "slots": {n}}},
                "prompt_tokenizer": "words"}}"#
        );
        std::fs::write(dir.join(format!("sim-{n}.json")), text).unwrap();
    }
}

/// `server.sh MODE PORT SLOTS`: notes the start in `starts.log`, then as MODE says — `ok`
/// serves `sim-SLOTS.json` at time scale 5; `hang` never listens (with a child of its own);
/// `taken` tries to listen on the port `$TAKEN_PORT` (one the test holds) and exits at once,
/// as a server whose port was taken does; `stubborn` ignores SIGTERM and never
/// listens; `crash` serves, then dies 1.5 s after it listens. Every process inherits
/// [`MARKER`] (the tune's environment), so [`left_running`] finds them.
pub fn server_script(dir: &Path) -> PathBuf {
    let goodput = assert_cmd::cargo::cargo_bin("goodput");
    let dir_text = dir.display();
    let script = format!(
        r#"#!/bin/sh
mode=$1; port=$2; slots=$3
echo "$mode $slots" >> "{dir_text}/starts.log"
serve() {{ "{goodput}" sim --config "{dir_text}/sim-$slots.json" --listen "127.0.0.1:$port" --time-scale {TIME_SCALE}; }}
case "$mode" in
  ok) serve ;;
  hang) sleep 600 & sleep 600 ;;
  taken)
    "{goodput}" sim --config "{dir_text}/sim-$slots.json" --listen "127.0.0.1:$TAKEN_PORT" ;;
  stubborn) trap '' TERM; echo "ignoring SIGTERM"; sleep 600 ;;
  crash)
    "{goodput}" sim --config "{dir_text}/sim-$slots.json" --listen "127.0.0.1:$port" \
      --time-scale {TIME_SCALE} 2> "{dir_text}/crash.err" & pid=$!
    until grep -q serving "{dir_text}/crash.err" 2>/dev/null; do sleep 0.05; done
    sleep 1.5; kill -9 $pid; echo "engine died" >&2; exit 9 ;;
esac
"#,
        goodput = goodput.display()
    );
    let path = dir.join("server.sh");
    std::fs::write(&path, script).unwrap();
    path
}

/// The lines of `starts.log`: one per server start.
pub fn starts(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("starts.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

/// The environment variable every process a test's tune starts inherits: its directory.
pub const MARKER: &str = "GOODPUT_TUNE_TEST_DIR";

/// Live processes whose environment has [`MARKER`] set to `marker` (a test's directory),
/// with their command lines.
pub fn left_running(marker: &str) -> Vec<String> {
    let needle = format!("{MARKER}={marker}\0");
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let path = entry.path();
        let Ok(stat) = std::fs::read_to_string(path.join("stat")) else {
            continue;
        };
        let state = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().chars().next());
        if state == Some(Some('Z')) {
            continue;
        }
        let Ok(environ) = std::fs::read(path.join("environ")) else {
            continue;
        };
        if !String::from_utf8_lossy(&environ).contains(&needle) {
            continue;
        }
        let cmdline = std::fs::read(path.join("cmdline")).unwrap_or_default();
        found.push(String::from_utf8_lossy(&cmdline).replace('\0', " "));
    }
    found
}

/// The flags of a capacity search by concurrency under an E2E SLO of 550 ms at 90 %: a
/// fixed-timing server of 1, 2 or 4 slots has a capacity of exactly its slots (one client more
/// puts 1 / slots of the requests — at least a quarter — a whole service time late), and a
/// goodput of slots / 0.3 s.
pub const BY_SLOTS: [&str; 14] = [
    "--slo",
    "e2e=550ms",
    "--dimension",
    "concurrency",
    "--attainment",
    "0.9",
    "--confidence",
    "0.9",
    "--input-tokens",
    "8",
    "--output-tokens",
    "6",
    "--seed",
    "5",
];
