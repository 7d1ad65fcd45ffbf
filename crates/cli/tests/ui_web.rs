//! `goodput ui` used as a person uses it, in headless Chromium: the runs page drawn and
//! readable at 1280 and 390 px, filtered by clicking a tag and by submitting the filter form
//! (model, tag, dates), two runs ticked and compared (the verdict shown), a run's report with
//! its sweep and capacity charts, a figure's trend with its significance marks, a trend's
//! "compare" link; a non-loopback address refused; Ctrl-C stops the server with status 0. Also
//! the SQLite store itself: two writers at once, a store from before versioned migrations
//! taken up, a store from a newer goodput refused.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;
use std::process::Command;

use support::browser::Browser;
use support::goodput;
use support::ui_server::{RUN, UiServer, record};

/// The store of the browser test: a sweep and a capacity search (tag version=3), then three
/// runs — TTFT 200 ms (version=1), 240 ms (version=2), 200 ms (version=1) — ids 1 to 5.
fn recorded_store(dir: &Path) -> String {
    let store = dir.join("runs.db").to_str().unwrap().to_string();
    let sweep = ["sweep", "--concurrency-steps", "1,4,16", "--requests", "40"];
    record(
        dir,
        &store,
        &[&sweep[..], &["--warmup", "0"]].concat(),
        200,
        "version=3",
    );
    let slo = [
        "--slo",
        "ttft=300ms",
        "--attainment",
        "0.9",
        "--confidence",
        "0.9",
    ];
    record(
        dir,
        &store,
        &[&["capacity"][..], &slo].concat(),
        200,
        "version=3",
    );
    record(dir, &store, &RUN, 200, "version=1");
    record(dir, &store, &RUN, 240, "version=2");
    record(dir, &store, &RUN, 200, "version=1");
    store
}

fn run_ids(browser: &mut Browser) -> Vec<String> {
    browser.texts("#runs tbody tr td:first-child a")
}

#[test]
fn the_web_app_lists_filters_compares_and_trends_runs_in_a_browser() {
    let dir = tempfile::tempdir().unwrap();
    let store = recorded_store(dir.path());
    let ui = UiServer::start(&store);
    let mut browser = Browser::start();

    browser.open(&format!("{}/", ui.url));
    assert_eq!(run_ids(&mut browser), ["#1", "#2", "#3", "#4", "#5"]);
    browser.assert_readable("ui-runs", false);
    runs_filter_by_clicking_and_by_the_form(&mut browser);

    // Two runs ticked, compare pressed: the comparison's verdict.
    browser.click("#clear-filters");
    assert!(browser.eval("document.getElementById('compare-button').disabled") == true);
    browser.tick("#select-3");
    browser.tick("#select-4");
    assert_eq!(browser.text("#selected-count"), "2 selected");
    browser.click("#compare-button");
    assert!(
        browser.location().ends_with("/compare?run=3&run=4"),
        "{}",
        browser.location()
    );
    let verdict = browser.text("#summary .verdict");
    assert!(
        verdict.starts_with("#4 against #3: regression") && verdict.contains("TTFT p50 +20.0 %"),
        "{verdict}"
    );
    browser.assert_readable("ui-compare", true);

    // A run's report: the sweep's and the capacity search's charts.
    browser.click(".ui-nav a[href='/']");
    browser.click("#run-1");
    assert!(browser.location().ends_with("/runs/1"));
    let titles = chart_titles(&mut browser);
    assert!(titles.iter().any(|t| t == "Goodput vs load"), "{titles:?}");
    browser.assert_readable("ui-sweep", true);
    browser.open(&format!("{}/runs/2", ui.url));
    let titles = chart_titles(&mut browser);
    assert!(
        titles.iter().any(|t| t == "Probes on the load axis"),
        "{titles:?}"
    );
    browser.assert_readable("ui-capacity", true);

    trend_marks_and_compare_link(&mut browser, &ui.url);
    drop(browser);
    assert_eq!(ui.stop().code(), Some(0), "Ctrl-C stops goodput ui cleanly");
}

fn chart_titles(browser: &mut Browser) -> Vec<String> {
    let titles = browser.eval(
        "Array.prototype.map.call(document.querySelectorAll('svg.chart'), function (s) { return s.getAttribute('data-title'); })",
    );
    serde_json::from_value(titles).unwrap()
}

fn runs_filter_by_clicking_and_by_the_form(browser: &mut Browser) {
    // A tag clicked: only its runs, and the address says so.
    browser.click("#runs a.tag[href$='version%3D1']");
    assert!(browser.location().contains("tag=version%3D1"));
    assert_eq!(run_ids(browser), ["#3", "#5"]);
    assert_eq!(
        browser.eval("document.getElementById('filter-tag').value"),
        "version=1"
    );
    // The form: another tag, then a model, then dates, each submitted.
    browser.fill("#filter-tag", "version=3");
    browser.click("#apply-filters");
    assert_eq!(run_ids(browser), ["#1", "#2"]);
    browser.fill("#filter-tag", "");
    browser.fill("#filter-model", "no-such-model");
    browser.click("#apply-filters");
    assert!(browser.location().contains("model=no-such-model"));
    assert!(browser.text("#no-runs").starts_with("No run matches"));
    browser.fill("#filter-model", "");
    browser.fill("#filter-until", "2000-01-01");
    browser.click("#apply-filters");
    assert!(browser.text("#no-runs").starts_with("No run matches"));
    browser.fill("#filter-until", "");
    browser.fill("#filter-since", "2000-01-01");
    browser.fill("#filter-last", "2");
    browser.click("#apply-filters");
    assert_eq!(
        run_ids(browser),
        ["#4", "#5"],
        "the last two of all since 2000"
    );
    assert!(
        browser
            .text(".sub")
            .contains("5 runs match, the last 2 shown")
    );
}

fn trend_marks_and_compare_link(browser: &mut Browser, url: &str) {
    // The three runs as one series: the slower run worse than the one before, the next better.
    browser.open(&format!("{url}/trend?metric=ttft.p50&last=3"));
    let verdicts = browser.texts("#marks tbody td:nth-child(7)");
    assert_eq!(verdicts, ["first", "worse", "better"]);
    assert_eq!(
        browser.eval("document.querySelectorAll('#trend svg.chart').length"),
        1
    );
    browser.assert_readable("ui-trend", true);
    // A series per version, chosen in the form: no change is significant within a version.
    browser.eval("document.getElementById('filter-by').value = 'tag:version'");
    browser.click("#apply-filters");
    assert!(browser.location().contains("by=tag%3Aversion"));
    let series = browser.texts("#series tbody td:first-child");
    assert_eq!(series, ["1", "2"]);
    let verdicts = browser.texts("#marks tbody td:nth-child(7)");
    assert_eq!(verdicts, ["first", "first", "not significant"]);
    // An unknown figure is said so, on the page.
    browser.fill("#filter-metric", "no_such_figure");
    browser.click("#apply-filters");
    assert!(browser.text("#trend-error").contains("unknown report path"));
    // From a mark to the comparison of the two runs.
    browser.open(&format!("{url}/trend?metric=ttft.p50&last=3"));
    browser.click("#marks a.compare-link[href*='run=4']");
    assert!(browser.text("#summary .verdict").contains("regression"));
}

#[test]
fn a_non_loopback_address_needs_allow_remote() {
    let output = goodput()
        .args(["ui", "--store", "unused.db", "--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--allow-remote"), "{stderr}");
}

/// Rows of `sql` in a SQLite file, through Python's sqlite3 (one line per row).
fn sqlite(path: &Path, sql: &str) -> String {
    let script = "import sqlite3, sys\nc = sqlite3.connect(sys.argv[1])\nrows = c.execute(sys.argv[2]).fetchall()\nc.commit()\nfor row in rows: print(*row)\n";
    let output = Command::new("python3")
        .args(["-c", script, path.to_str().unwrap(), sql])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// One report file, from a virtual-time run.
pub fn one_report(dir: &Path) -> std::path::PathBuf {
    let out = dir.join("one");
    support::ok(
        goodput()
            .args([
                "run",
                "--virtual-time",
                "--requests",
                "20",
                "--warmup",
                "0",
                "--quiet",
            ])
            .args(["--out", out.to_str().unwrap()])
            .output()
            .unwrap(),
    );
    out.join("report.json")
}

#[test]
fn two_writers_at_once_both_land_in_a_new_sqlite_store() {
    let dir = tempfile::tempdir().unwrap();
    let report = one_report(dir.path());
    let store = dir.path().join("shared.db");
    let writer = || {
        let mut command = goodput();
        command.args(["history", "--store", store.to_str().unwrap(), "--last", "1"]);
        for _ in 0..15 {
            command.arg("--add").arg(&report);
        }
        command.spawn().unwrap()
    };
    let (a, b) = (writer(), writer());
    for child in [a, b] {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success());
    }
    assert_eq!(
        sqlite(&store, "SELECT COUNT(DISTINCT id), MAX(id) FROM runs"),
        "30 30\n"
    );
    assert_eq!(
        sqlite(
            &store,
            "SELECT version FROM goodput_schema_migrations ORDER BY version"
        ),
        "1\n2\n",
        "each migration applied once"
    );
}

#[test]
fn an_unversioned_store_is_migrated_and_a_newer_one_refused() {
    let dir = tempfile::tempdir().unwrap();
    let report = one_report(dir.path());
    let old = dir.path().join("old.db");
    sqlite(
        &old,
        "CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, started_at TEXT NOT NULL, \
         model TEXT NOT NULL, target TEXT NOT NULL, tags TEXT NOT NULL, tool_version TEXT NOT NULL, \
         report TEXT NOT NULL)",
    );
    let history = |store: &Path| {
        goodput()
            .args(["history", "--store", store.to_str().unwrap(), "--add"])
            .arg(&report)
            .output()
            .unwrap()
    };
    support::ok(history(&old));
    assert_eq!(
        sqlite(&old, "SELECT MAX(version) FROM goodput_schema_migrations"),
        "2\n"
    );
    sqlite(
        &old,
        "INSERT INTO goodput_schema_migrations VALUES (99, 'from the future', '2099-01-01T00:00:00Z')",
    );
    let refused = history(&old);
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("schema version 99") && stderr.contains("upgrade goodput"),
        "{stderr}"
    );
}
