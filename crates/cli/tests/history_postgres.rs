//! The run history kept in a real PostgreSQL server (`--store postgres://…`), the one
//! `scripts/postgres-server.sh start` runs (`GOODPUT_POSTGRES_URL`; `scripts/test` starts and
//! stops it): two writers at once into a new database (every run lands, each migration is
//! applied once), runs recorded by `goodput run` listed and trended by `goodput history` and
//! compared in `goodput ui` in headless Chromium, a database from a newer goodput refused, a
//! wrong password named without showing it. Each test works in a database of its own, dropped
//! at the end. Built with `--features goodput/postgres-server`.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;
use std::process::Output;

use postgres::{Client, NoTls};
use support::browser::Browser;
use support::goodput;
use support::ui_server::{RUN, UiServer, record};

fn server_url() -> String {
    std::env::var("GOODPUT_POSTGRES_URL").unwrap_or_else(|_| {
        panic!(
            "GOODPUT_POSTGRES_URL is not set: start a server with \
             `eval \"$(scripts/postgres-server.sh start)\"` (scripts/test does this)"
        )
    })
}

/// A database of its own on the test server, dropped when the test ends.
struct Database {
    admin: String,
    name: String,
    url: String,
}

impl Database {
    fn new(name: &str) -> Database {
        let admin = server_url();
        let name = format!("goodput_{name}_{}", std::process::id());
        let mut client = Client::connect(&admin, NoTls).unwrap();
        // One statement each: a batch runs as one transaction, which these refuse.
        client
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .unwrap();
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap();
        let (server, _) = admin.rsplit_once('/').unwrap();
        let url = format!("{server}/{name}");
        Database { admin, name, url }
    }

    fn client(&self) -> Client {
        Client::connect(&self.url, NoTls).unwrap()
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        if let Ok(mut client) = Client::connect(&self.admin, NoTls) {
            let _ = client.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

fn one_report(dir: &Path) -> std::path::PathBuf {
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

fn history(store: &str, extra: &[&str]) -> Output {
    goodput()
        .args(["history", "--store", store])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn two_writers_at_once_both_land_in_a_new_database() {
    let db = Database::new("writers");
    let dir = tempfile::tempdir().unwrap();
    let report = one_report(dir.path());
    let writer = || {
        let mut command = goodput();
        command.args(["history", "--store", &db.url, "--last", "1"]);
        for _ in 0..15 {
            command.arg("--add").arg(&report);
        }
        command.spawn().unwrap()
    };
    let (a, b) = (writer(), writer());
    for child in [a, b] {
        let output = child.wait_with_output().unwrap();
        assert!(output.status.success(), "a writer failed");
    }
    let mut client = db.client();
    let row = client
        .query_one("SELECT COUNT(*), COUNT(DISTINCT id) FROM runs", &[])
        .unwrap();
    assert_eq!((row.get::<_, i64>(0), row.get::<_, i64>(1)), (30, 30));
    let versions: Vec<i64> = client
        .query(
            "SELECT version FROM goodput_schema_migrations ORDER BY version",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, [1, 2], "each migration applied once");
}

#[test]
fn runs_recorded_in_postgres_are_listed_trended_and_compared_in_the_web_app() {
    let db = Database::new("ui");
    let dir = tempfile::tempdir().unwrap();
    record(dir.path(), &db.url, &RUN, 200, "version=1");
    record(dir.path(), &db.url, &RUN, 240, "version=2");
    record(dir.path(), &db.url, &RUN, 200, "version=1");
    let listed = support::ok(history(&db.url, &[]));
    assert_eq!(String::from_utf8_lossy(&listed.stdout).lines().count(), 4);
    let trend = support::ok(history(&db.url, &["--metric", "ttft.p50"]));
    let trend = String::from_utf8_lossy(&trend.stdout).to_string();
    assert!(
        trend.contains("* worse") && trend.contains("* better"),
        "{trend}"
    );
    let filtered = support::ok(history(&db.url, &["--tag", "version=1"]));
    assert_eq!(String::from_utf8_lossy(&filtered.stdout).lines().count(), 3);

    let ui = UiServer::start(&db.url);
    let mut browser = Browser::start();
    browser.open(&format!("{}/", ui.url));
    assert!(
        browser.text(".sub").starts_with("postgres://goodput:***@"),
        "the password is hidden"
    );
    assert_eq!(
        browser.texts("#runs tbody tr td:first-child a"),
        ["#1", "#2", "#3"]
    );
    browser.click("#runs a.tag[href$='version%3D1']");
    assert_eq!(
        browser.texts("#runs tbody tr td:first-child a"),
        ["#1", "#3"]
    );
    browser.click("#clear-filters");
    browser.tick("#select-1");
    browser.tick("#select-2");
    browser.click("#compare-button");
    assert!(
        browser
            .text("#summary .verdict")
            .starts_with("#2 against #1: regression")
    );
    browser.assert_readable("ui-postgres-compare", true);
    drop(browser);
    assert_eq!(ui.stop().code(), Some(0));
}

#[test]
fn a_database_from_a_newer_goodput_is_refused_and_a_wrong_password_named() {
    let db = Database::new("newer");
    support::ok(history(&db.url, &[]));
    db.client()
        .execute(
            "INSERT INTO goodput_schema_migrations VALUES (99, 'from the future', '2099-01-01T00:00:00Z')",
            &[],
        )
        .unwrap();
    let refused = history(&db.url, &[]);
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("schema version 99") && stderr.contains("upgrade goodput"),
        "{stderr}"
    );

    let (user, rest) = db.url.split_once('@').unwrap();
    let (user, _) = user.rsplit_once(':').unwrap();
    let wrong = format!("{user}:not-the-password@{rest}");
    let denied = history(&wrong, &[]);
    assert_eq!(denied.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&denied.stderr);
    assert!(
        stderr.contains("password authentication failed"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("not-the-password") && stderr.contains(":***@"),
        "{stderr}"
    );
}
