//! `goodput tune` end to end against servers it starts itself: `goodput sim` with fixed timing
//! behind a script (`support::tune`), whose capacity under the SLO is known from arithmetic —
//! 1, 2 or 4 slots of 0.3 s each serve exactly that many clients and slots / 0.3 requests per
//! second. Tune must rank them by it and name the best; a server that never becomes ready,
//! one that exits at start (its port taken), one that ignores SIGTERM and one that crashes
//! mid-step are each marked failed with their log while the rest go on; a reset is POSTed
//! before every step; a tune stopped midway resumes without starting a finished configuration
//! again; placeholders are checked before anything starts; and no process of any server is
//! left running.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::tune::{
    BY_SLOTS, SERVICE_SECS, TIME_SCALE, fixed_configs, left_running, server_script, starts,
};
use support::{goodput, read_json, validate_against_schema};

/// `goodput tune` with the server script as `--server-cmd` and `extra` flags, into `dir/out`.
fn tune(dir: &Path, extra: &[&str]) -> Command {
    let script = server_script(dir);
    let mut command = goodput();
    command
        .args(["tune", "--quiet", "--time-scale", TIME_SCALE])
        .args(BY_SLOTS)
        .args([
            "--server-cmd",
            &format!(
                "sh {} {{{{mode}}}} {{{{port}}}} {{{{slots}}}}",
                script.display()
            ),
        ])
        .args(extra)
        .env(support::tune::MARKER, dir.display().to_string())
        .env_remove("GOODPUT_TARGET");
    command
}

/// The tests whose figures are timed run one at a time (their servers run five times faster
/// than real time, so a busy machine shows in their latencies five times over).
static TIMED: Mutex<()> = Mutex::new(());

fn timed() -> MutexGuard<'static, ()> {
    TIMED.lock().unwrap_or_else(PoisonError::into_inner)
}

fn out_dir(dir: &Path) -> String {
    dir.join("out").display().to_string()
}

fn ok(output: Output) -> Output {
    assert!(
        output.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// The configuration named `name` in a tune report.
fn configuration<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["tune"]["configurations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no configuration {name}"))
}

fn assert_nothing_left(dir: &Path) {
    let marker = dir.display().to_string();
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let left = left_running(&marker);
        if left.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "left running: {left:#?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn tune_ranks_fixed_timing_servers_by_their_capacity_and_names_the_best() {
    let _timed = timed();
    let dir = tempfile::tempdir().unwrap();
    fixed_configs(dir.path(), &[1, 2, 4]);
    let out = out_dir(dir.path());
    let output = ok(tune(
        dir.path(),
        &["--grid", "mode=ok;slots=1,2,4", "--out", &out],
    )
    .output()
    .unwrap());
    assert_nothing_left(dir.path());
    assert_eq!(starts(dir.path()).len(), 3, "one start per configuration");
    let report = read_json(&dir.path().join("out/report.json"));
    validate_against_schema(&report);
    let tune = &report["tune"];
    for slots in [1u32, 2, 4] {
        let c = configuration(&report, &format!("mode=ok,slots={slots}"));
        let figures = &c["run"]["figures"];
        assert_eq!(figures["capacity"], f64::from(slots), "{c}");
        let arithmetic = f64::from(slots) / SERVICE_SECS;
        let goodput = figures["goodput_per_accelerator"].as_f64().unwrap();
        assert!(
            goodput > 0.8 * arithmetic && goodput < 1.02 * arithmetic,
            "slots={slots}: {goodput} good req/s against {arithmetic}"
        );
        assert_eq!(c["rank"], [3, 2, 1][slots.trailing_zeros() as usize]);
        assert!(c["run"]["startup_secs"].as_f64().unwrap() > 0.0);
        let own = dir
            .path()
            .join("out")
            .join(c["run"]["dir"].as_str().unwrap());
        for file in ["server.log", "report.json", "requests.jsonl", "run.json"] {
            assert!(own.join(file).exists(), "{file} in {}", own.display());
        }
    }
    let best = &tune["best"];
    assert_eq!(best["name"], "mode=ok,slots=4");
    let margin = best["margin"].as_f64().unwrap();
    assert!((margin - 1.0).abs() < 0.3, "4 slots over 2: {margin}");
    assert_eq!(best["significance"], "not tested: one run each");
    let best_index = best["configuration"].as_u64().unwrap();
    assert!(
        tune["pareto_front"]
            .as_array()
            .unwrap()
            .contains(&best_index.into())
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("Best: mode=ok,slots=4"), "{stdout}");
    assert!(stdout.contains("Pareto front"), "{stdout}");
    rebuilt_identically(dir.path(), &report);
    html_labels_every_point(dir.path());
}

/// `goodput report DIR` gives the same figures from the configurations' journals.
fn rebuilt_identically(dir: &Path, report: &Value) {
    let output = ok(goodput()
        .args(["report", "--json"])
        .arg(dir.join("out"))
        .output()
        .unwrap());
    let rebuilt: Value = serde_json::from_slice(&output.stdout).unwrap();
    validate_against_schema(&rebuilt);
    assert_eq!(rebuilt["tune"]["best"], report["tune"]["best"]);
    assert_eq!(
        rebuilt["tune"]["configurations"],
        report["tune"]["configurations"]
    );
}

/// report.html draws the front with each point labelled by its configuration.
fn html_labels_every_point(dir: &Path) {
    let dom = support::rendered_dom(&dir.join("out/report.html"));
    let charts = support::charts(&dom);
    assert!(
        charts
            .iter()
            .any(|(title, points)| title.starts_with("Pareto front") && *points >= 1),
        "{charts:?}"
    );
    assert!(dom.contains("class=\"point-label\""), "no point labels");
    for slots in [1, 2, 4] {
        assert!(
            dom.contains(&format!(">mode=ok,slots={slots}</text>")),
            "slots={slots} unlabelled"
        );
    }
    assert!(!dom.contains("data-error="), "the page failed to draw");
}

/// A grid file of servers that fail each their own way, and one that works.
fn failing_grid(dir: &Path) -> String {
    let table = |name: &str, mode: &str, slots: u32| {
        format!("[[configuration]]\nname = \"{name}\"\nmode = \"{mode}\"\nslots = {slots}\n")
    };
    let text: String = [
        table("never-ready", "hang", 1),
        table("exits", "taken", 1),
        table("ignores-sigterm", "stubborn", 1),
        table("crashes", "crash", 1),
        table("works", "ok", 2),
    ]
    .concat();
    let grid = dir.join("grid.toml");
    std::fs::write(&grid, text).unwrap();
    grid.display().to_string()
}

/// Whether `value` (a JSON string, or any JSON as text) contains `text`.
fn says(value: &Value, text: &str) -> bool {
    value
        .as_str()
        .map_or_else(|| value.to_string(), str::to_string)
        .contains(text)
}

#[test]
fn failures_are_recorded_with_their_log_and_the_rest_goes_on() {
    let _timed = timed();
    let dir = tempfile::tempdir().unwrap();
    fixed_configs(dir.path(), &[1, 2]);
    let (grid, out) = (failing_grid(dir.path()), out_dir(dir.path()));
    let flags = [
        "--grid-file",
        &grid,
        "--ready-timeout",
        "3s",
        "--stop-grace",
        "1s",
    ];
    // A port the `taken` server is told to listen on, held here.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let output = ok(tune(dir.path(), &[&flags[..], &["--out", &out]].concat())
        .env("TAKEN_PORT", port)
        .output()
        .unwrap());
    assert_nothing_left(dir.path());
    let report = read_json(&dir.path().join("out/report.json"));
    validate_against_schema(&report);
    let failure = |name: &str| configuration(&report, name)["run"]["failure"].clone();
    let never = failure("never-ready");
    assert_eq!(never["stage"], "ready");
    assert!(says(&never["reason"], "not ready within 3 s"), "{never}");
    let exits = failure("exits");
    assert_eq!(exits["stage"], "ready");
    assert!(says(&exits["reason"], "exit status: 2"), "{exits}");
    assert!(
        says(&exits["log_tail"], "Address already in use"),
        "{exits}"
    );
    let stubborn = failure("ignores-sigterm");
    assert_eq!(stubborn["stage"], "ready");
    assert!(
        says(&stubborn["log_tail"], "ignoring SIGTERM"),
        "{stubborn}"
    );
    let crashed = failure("crashes");
    assert_eq!(crashed["stage"], "measure", "{crashed}");
    assert!(
        says(&crashed["reason"], "exited mid-measurement"),
        "{crashed}"
    );
    assert!(says(&crashed["log_tail"], "engine died"), "{crashed}");
    assert_eq!(report["tune"]["best"]["name"], "works");
    assert_eq!(starts(dir.path()).len(), 5);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("Failures") && stdout.contains("| engine died"),
        "{stdout}"
    );
}

/// The lines of the tune's journal in `dir`.
fn journal_lines(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("out/tune.jsonl")).map_or(0, |t| t.lines().count())
}

/// Starts the tune of `flags`, stops it with SIGTERM once a configuration finished: how many
/// had (the journal's lines).
fn stop_after_the_first(dir: &Path, flags: &[&str]) -> usize {
    let mut child = tune(dir, flags)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(120);
    while journal_lines(dir) == 0 {
        assert!(Instant::now() < deadline, "no configuration finished");
        assert!(child.try_wait().unwrap().is_none(), "the tune ended early");
        std::thread::sleep(Duration::from_millis(50));
    }
    let id = child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &id])
            .status()
            .unwrap()
            .success()
    );
    assert_eq!(child.wait().unwrap().code(), Some(130), "interrupted");
    journal_lines(dir)
}

#[test]
fn a_stopped_tune_resumes_without_starting_a_finished_configuration_again() {
    let _timed = timed();
    let dir = tempfile::tempdir().unwrap();
    fixed_configs(dir.path(), &[1, 2, 4]);
    let out = out_dir(dir.path());
    let grid = ["--grid", "mode=ok;slots=1,2,4"];
    let finished = stop_after_the_first(dir.path(), &[&grid[..], &["--out", &out]].concat());
    assert_nothing_left(dir.path());
    assert!(
        (1..3).contains(&finished),
        "{finished} configurations finished"
    );
    let started = starts(dir.path()).len();
    let report = read_json(&dir.path().join("out/report.json"));
    assert_eq!(report["run"]["end_reason"], "interrupted");
    validate_against_schema(&report);

    let again = tune(dir.path(), &[&grid[..], &["--out", &out]].concat())
        .output()
        .unwrap();
    assert_eq!(
        again.status.code(),
        Some(2),
        "the journal is refused without --resume"
    );
    assert!(String::from_utf8_lossy(&again.stderr).contains("--resume"));
    let other = ["--grid", "mode=ok;slots=1,2", "--resume", &out];
    let other = tune(dir.path(), &other).output().unwrap();
    assert_eq!(other.status.code(), Some(2), "another grid is refused");

    ok(tune(dir.path(), &[&grid[..], &["--resume", &out]].concat())
        .output()
        .unwrap());
    assert_nothing_left(dir.path());
    let restarted = starts(dir.path()).len() - started;
    assert_eq!(
        restarted,
        3 - finished,
        "only the unfinished configurations start again"
    );
    assert_eq!(journal_lines(dir.path()), 3);
    let report = read_json(&dir.path().join("out/report.json"));
    validate_against_schema(&report);
    assert_eq!(report["run"]["end_reason"], "completed");
    assert_eq!(report["tune"]["best"]["name"], "mode=ok,slots=4");
}

#[test]
fn placeholders_are_checked_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let out = out_dir(dir.path());
    let refused = |command: &mut Command, says: &str| {
        let output = command.output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    };
    let unknown = format!(
        "sh {}/x.sh {{{{mode}}}} {{{{port}}}} {{{{ctx}}}}",
        dir.path().display()
    );
    refused(
        goodput().args([
            "tune",
            "--grid",
            "mode=ok",
            "--server-cmd",
            &unknown,
            "--out",
            &out,
        ]),
        "{{ctx}} is neither a grid key",
    );
    refused(
        &mut tune(
            dir.path(),
            &["--grid", "mode=ok;slots=1;np=2", "--out", &out],
        ),
        "grid key `np`",
    );
    let grid = dir.path().join("grid.toml");
    let text = "[[configuration]]\nmode = \"ok\"\nslots = 1\n[[configuration]]\nmode = \"ok\"\n";
    std::fs::write(&grid, text).unwrap();
    refused(
        &mut tune(
            dir.path(),
            &["--grid-file", grid.to_str().unwrap(), "--out", &out],
        ),
        "gives no value for {{slots}}",
    );
    refused(
        &mut tune(
            dir.path(),
            &["--grid", "mode=ok;slots=1;port=2", "--out", &out],
        ),
        "free port",
    );
    assert!(starts(dir.path()).is_empty(), "a server started");
    assert!(!dir.path().join("out/tune.json").exists());
}

#[test]
fn a_reset_is_posted_before_every_step_and_a_failed_one_fails_the_configuration() {
    let _timed = timed();
    let dir = tempfile::tempdir().unwrap();
    fixed_configs(dir.path(), &[2]);
    let resets = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = std::sync::Arc::clone(&resets);
    let address = support::spawn_server(move |stream| {
        let mut reader = std::io::BufReader::new(stream.try_clone().unwrap());
        let mut writer = stream;
        while let Some((path, _)) = support::read_request(&mut reader) {
            let reply = if path == "/reset" {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"
            } else {
                "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"
            };
            if std::io::Write::write_all(&mut writer, reply.as_bytes()).is_err() {
                return;
            }
        }
    });
    let out = out_dir(dir.path());
    let reset = format!("http://{address}/{{{{reset}}}}");
    let flags = [
        "--grid",
        "mode=ok;slots=2;reset=reset,nowhere",
        "--reset-url",
        &reset,
        "--out",
        &out,
    ];
    ok(tune(dir.path(), &flags).output().unwrap());
    assert_nothing_left(dir.path());
    let report = read_json(&dir.path().join("out/report.json"));
    let measured = configuration(&report, "mode=ok,slots=2,reset=reset");
    let own = dir
        .path()
        .join("out")
        .join(measured["run"]["dir"].as_str().unwrap());
    let steps = read_json(&own.join("report.json"))["steps"]
        .as_array()
        .unwrap()
        .len();
    assert_eq!(
        resets.load(std::sync::atomic::Ordering::SeqCst),
        steps,
        "one reset per step"
    );
    let failed = &configuration(&report, "mode=ok,slots=2,reset=nowhere")["run"]["failure"];
    assert_eq!(failed["stage"], "measure", "{failed}");
    assert!(
        failed["reason"].as_str().unwrap().contains("--reset-url"),
        "{failed}"
    );
    assert!(
        failed["reason"].as_str().unwrap().contains("404"),
        "{failed}"
    );
}
