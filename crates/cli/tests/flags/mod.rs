//! The machinery of `flags_everywhere`: each subcommand's flags read from its clap-generated
//! `--help`, a probe per flag, and an observation of a run (exit status, stdout's kind, the
//! files written, `run.json`, the report's sections, the requests on the wire) to compare.
#![allow(dead_code)]

pub(crate) mod apis;
pub(crate) mod calibrate;
pub(crate) mod capture;
pub(crate) mod exports;
pub(crate) mod fixtures;
pub(crate) mod fleet;
pub(crate) mod load;
pub(crate) mod offline;
pub(crate) mod probes;
pub(crate) mod serve;
pub(crate) mod shard;
pub(crate) mod tune;

pub(crate) use fixtures::{add_runs, fixtures};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::{Map, Value, json};

use crate::support::goodput;
use capture::CaptureServer;

/// How much of stdout is deterministic, so observed as text (its kind is observed always).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Stdout {
    /// Only its kind (a live run's figures vary).
    #[default]
    Kind,
    /// All of it.
    Whole,
    /// Its first line (a watch's header).
    FirstLine,
    /// The value at this JSON pointer of stdout (the deterministic part of a JSON answer).
    Pointer(&'static str),
}

/// How a variant's commands run and what is observed of them.
#[derive(Debug, Clone, Default)]
pub(crate) struct How {
    /// What of stdout is observed as text.
    pub(crate) stdout: Stdout,
    /// The command is a server (`goodput sim --listen`): start it, run this client command
    /// (`{target}` → its URL) against it, and observe the client's run.
    pub(crate) client: Option<Vec<String>>,
}

/// What a flag must do.
#[derive(Debug, Clone)]
pub(crate) enum Expect {
    /// The observation differs from the baseline's.
    Changes,
    /// The value at this JSON pointer into the observation differs from the baseline's.
    At(&'static str),
    /// Exit status 2 with a message containing this text (and no panic).
    Refused(&'static str),
    /// Only visible on a terminal: the probe and the base without `--quiet`, each under a
    /// pseudo-terminal (`script`), differ in whether they draw with escape sequences.
    OnTerminal,
}

/// One probe of one flag.
#[derive(Debug, Clone)]
pub(crate) struct Probe {
    pub(crate) flag: &'static str,
    /// Arguments added to the base (`{dir}`: the fixtures, `{url}`: the capture server).
    pub(crate) args: Vec<String>,
    /// Base flags removed first (with their values).
    pub(crate) without: Vec<&'static str>,
    pub(crate) expect: Expect,
    /// When set, the probe is compared with the base plus these arguments instead of the
    /// baseline (a flag that needs another one: `--think-time` against `--turns` alone).
    pub(crate) against: Option<Vec<String>>,
}

impl Probe {
    /// Compares with the base plus `args` instead of the plain baseline.
    pub(crate) fn against(mut self, args: &[&str]) -> Probe {
        self.against = Some(args.iter().map(|a| a.to_string()).collect());
        self
    }

    /// Also drops these base flags.
    pub(crate) fn without(mut self, flags: &[&'static str]) -> Probe {
        self.without.extend_from_slice(flags);
        self
    }
}

pub(crate) fn probe(flag: &'static str, args: &[&str], expect: Expect) -> Probe {
    Probe {
        flag,
        args: args.iter().map(|a| a.to_string()).collect(),
        without: Vec::new(),
        expect,
        against: None,
    }
}

pub(crate) fn probe_without(flag: &'static str, without: &[&'static str], expect: Expect) -> Probe {
    Probe {
        flag,
        args: Vec::new(),
        without: without.to_vec(),
        expect,
        against: None,
    }
}

/// The flags `goodput <sub> --help` lists (clap renders every visible argument).
pub(crate) fn flags_of(sub: &str) -> BTreeSet<String> {
    let output = goodput()
        .args([sub, "--help"])
        .output()
        .expect("goodput runs");
    let help = String::from_utf8_lossy(&output.stdout);
    let mut flags = BTreeSet::new();
    for line in help.lines() {
        let trimmed = line.trim_start();
        // Flags sit at 2 (with a short form) or 6 spaces; descriptions further in.
        let indent = line.len() - trimmed.len();
        if !(2..=6).contains(&indent) {
            continue;
        }
        // `-c, --criteria <FILE>`: skip the short form.
        let bytes = trimmed.as_bytes();
        let trimmed =
            if bytes.len() > 4 && bytes[0] == b'-' && bytes[1] != b'-' && &bytes[2..4] == b", " {
                &trimmed[4..]
            } else {
                trimmed
            };
        let Some(name) = trimmed.strip_prefix("--") else {
            continue;
        };
        let name: String = name
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        if !name.is_empty() && name != "help" && name != "version" {
            flags.insert(format!("--{name}"));
        }
    }
    flags
}

/// Everything a run shows that does not depend on wall-clock timing.
pub(crate) fn observe(
    output: &Output,
    out: &Path,
    wire: &[capture::Captured],
    seen: Stdout,
) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stdout_kind = if stdout.trim().is_empty() {
        "empty"
    } else if serde_json::from_str::<Value>(&stdout).is_ok() {
        "json"
    } else if stdout.starts_with("## ") {
        "markdown"
    } else if stdout.contains("TTFT from send") || stdout.contains("Each configuration in detail") {
        "text with details"
    } else {
        "text"
    };
    let mut files: Vec<String> = walk(out);
    files.sort();
    // A set: how many scrapes a watch makes depends on timing, what it asks does not.
    let requests: BTreeSet<String> = wire
        .iter()
        .map(|r| json!([r.method, r.path, r.headers, r.body]).to_string())
        .collect();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let says_something = !stderr.trim().is_empty();
    // A tune's run is its first configuration's (its own run.json, report and analysis).
    let tune = read(out, "report.json").and_then(|r| r.get("tune").map(tune_settings));
    let run_dir = tune_run_dir(out).unwrap_or_else(|| out.to_path_buf());
    let out = run_dir.as_path();
    let report = read(out, "report.json");
    json!({
        "code": output.status.code(),
        "stdout": stdout_kind,
        "stdout_text": match seen {
            Stdout::Kind => None,
            Stdout::Whole => Some(stdout.to_string()),
            Stdout::FirstLine => Some(stdout.lines().next().unwrap_or("").to_string()),
            Stdout::Pointer(pointer) => serde_json::from_str::<Value>(&stdout)
                .ok()
                .and_then(|v| v.pointer(pointer).map(Value::to_string)),
        },
        "stderr": if says_something { "text" } else { "empty" },
        "files": files,
        "run_json": read(out, "run.json").map(strip_run),
        "report_run": read(out, "report.json").map(|r| strip_run(json!({"run": r["run"]}))),
        "report": report.as_ref().map(skeleton),
        "report_settings": report.as_ref().map(settings),
        "analysis": read(out, "analysis.json"),
        "tune": tune,
        "sim": read(out, "sim.json"),
        "wire": requests,
    })
}

/// The first configuration's directory of a tune written in `out`.
fn tune_run_dir(out: &Path) -> Option<PathBuf> {
    let manifest = read(out, "tune.json")?;
    let dir = manifest["configurations"][0]["dir"].as_str()?;
    Some(out.join(dir))
}

/// A tune section without its measurements: the plan and each configuration's name, values,
/// accelerators, directory and failure.
fn tune_settings(tune: &Value) -> Value {
    let configurations: Vec<Value> = tune["configurations"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            json!([
                c["name"],
                c["values"],
                c["accelerators"],
                c["run"]["dir"],
                c["run"]["failure"]
            ])
        })
        .collect();
    let mut settings = tune.clone();
    if let Some(map) = settings.as_object_mut() {
        for key in [
            "configurations",
            "pareto_front",
            "best",
            "verification",
            "conclusion",
        ] {
            map.remove(key);
        }
        map.insert("configurations".into(), json!(configurations));
    }
    settings
}

/// What a served simulator answered, request by request but as a set (arrival order
/// varies): tokens, reasoning tokens, finish reason, tool calls and failure kind, from the
/// client's journal. Deterministic for a seeded server, unlike anything timed.
fn answers(out: &Path) -> Value {
    let text = std::fs::read_to_string(out.join("requests.jsonl")).unwrap_or_default();
    let answers: BTreeSet<String> = text
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .map(|r| {
            json!([
                r["output_tokens"],
                r["reasoning_tokens"],
                r["finish_reason"],
                r["tool_calls"],
                r["failure"]["kind"]
            ])
            .to_string()
        })
        .collect();
    json!(answers)
}

fn walk(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if entry.path().is_dir() {
            names.extend(
                walk(&entry.path())
                    .into_iter()
                    .map(|n| format!("{name}/{n}")),
            );
        } else {
            names.push(name);
        }
    }
    names
}

fn read(dir: &Path, name: &str) -> Option<Value> {
    let text = std::fs::read_to_string(dir.join(name)).ok()?;
    serde_json::from_str(&text).ok()
}

/// `run.json` (or a report's `run`) without what differs between identical invocations.
fn strip_run(mut value: Value) -> Value {
    if let Some(run) = value.get_mut("run").and_then(Value::as_object_mut) {
        for key in ["started_at", "command_line", "client_host", "end_reason"] {
            run.remove(key);
        }
    }
    if let Some(object) = value.as_object_mut() {
        object.remove("tool");
        // A sweep records its knee (a measurement) beside its plan.
        if let Some(sweep) = object.get_mut("sweep").and_then(Value::as_object_mut) {
            sweep.remove("knee");
        }
    }
    value
}

/// The set of key paths (array indices collapsed) of a JSON value: its shape, not its figures.
pub(crate) fn skeleton(value: &Value) -> Value {
    let mut paths = BTreeSet::new();
    collect(value, String::new(), &mut paths);
    Value::Array(paths.into_iter().map(Value::String).collect())
}

/// Report sections made of measurements whose shape depends on timing (a scrape landing in
/// a window or not): only their presence counts.
const MEASURED: [&str; 7] = [
    "measurement",
    "stability",
    "series",
    "run_totals",
    "agreement",
    "windows",
    "client",
];

fn collect(value: &Value, path: String, paths: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                if MEASURED.contains(&key.as_str()) {
                    paths.insert(format!("{path}/{key}"));
                } else {
                    collect(child, format!("{path}/{key}"), paths);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                collect(item, format!("{path}/[]"), paths);
            }
        }
        Value::Null => {
            paths.insert(format!("{path}=null"));
        }
        _ => {
            paths.insert(path);
        }
    }
}

/// `text` with every loopback port replaced by `PORT`.
fn without_ports(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("127.0.0.1:") {
        let (head, tail) = rest.split_at(at + "127.0.0.1:".len());
        out.push_str(head);
        out.push_str("PORT");
        rest = tail.trim_start_matches(|c: char| c.is_ascii_digit());
    }
    out.push_str(rest);
    out
}

/// Keys whose values in a report are settings, not measurements.
const SETTINGS: [&str; 8] = [
    "interval_ms",
    "metrics_url",
    "model",
    "accelerator",
    "accelerators",
    "tensor_parallel",
    "replicas",
    "name",
];

/// `path=value` of every setting in a report (see `SETTINGS`).
fn settings(report: &Value) -> Value {
    let mut found = BTreeSet::new();
    find_settings(report, String::new(), &mut found);
    Value::Array(found.into_iter().map(Value::String).collect())
}

fn find_settings(value: &Value, path: String, found: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let here = format!("{path}/{key}");
                if SETTINGS.contains(&key.as_str()) && !child.is_object() && !child.is_array() {
                    found.insert(format!("{here}={child}"));
                } else {
                    find_settings(child, here, found);
                }
            }
        }
        Value::Array(items) => items
            .iter()
            .for_each(|item| find_settings(item, format!("{path}/[]"), found)),
        _ => {}
    }
}

/// Which top-level parts of two observations differ.
pub(crate) fn differences(a: &Value, b: &Value) -> Vec<String> {
    let empty = Map::new();
    let (a, b) = (
        a.as_object().unwrap_or(&empty),
        b.as_object().unwrap_or(&empty),
    );
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .map(|k| k.to_string())
        .collect()
}

/// What differs between two observations, briefly.
pub(crate) fn describe_differences(a: &Value, b: &Value) -> String {
    let mut lines = Vec::new();
    for key in differences(a, b) {
        let (x, y) = (&a[&key], &b[&key]);
        let line = match (x.as_array(), y.as_array()) {
            (Some(x), Some(y)) => {
                let only = |p: &Vec<Value>, q: &Vec<Value>| -> Vec<String> {
                    p.iter()
                        .filter(|v| !q.contains(v))
                        .take(8)
                        .map(Value::to_string)
                        .collect()
                };
                format!(
                    "{key}: only first {:?}; only second {:?}",
                    only(x, y),
                    only(y, x)
                )
            }
            _ => {
                let brief = |v: &Value| v.to_string().chars().take(400).collect::<String>();
                let (x, y) = (brief(x), brief(y));
                format!("{key}: {x} vs {y}")
            }
        };
        lines.push(line);
    }
    lines.join("\n")
}

/// Replaces `{dir}` and `{url}` in an argument.
pub(crate) fn expand(arg: &str, fixtures: &BTreeMap<&'static str, PathBuf>, url: &str) -> String {
    let mut arg = arg.replace("{url}", url);
    for (name, path) in fixtures {
        arg = arg.replace(&format!("{{{name}}}"), &path.display().to_string());
    }
    arg
}

/// The base with `probe.without`'s flags and every flag `extra` sets again removed, then
/// `extra` appended.
pub(crate) fn command(base: &[String], without: &[&str], extra: &[String]) -> Vec<String> {
    let mut drop: Vec<&str> = without.to_vec();
    drop.extend(
        extra
            .iter()
            .filter(|a| a.starts_with("--"))
            .map(String::as_str),
    );
    let mut all = base_without(base, &drop);
    all.extend(extra.iter().cloned());
    all
}

/// The base arguments with `without`'s flags (and their values) removed.
pub(crate) fn base_without(base: &[String], without: &[&str]) -> Vec<String> {
    let mut kept = Vec::new();
    let mut skip_value = false;
    for arg in base {
        if skip_value {
            skip_value = false;
            if !arg.starts_with("--") {
                continue;
            }
        }
        if without.contains(&arg.as_str()) {
            skip_value = true;
            continue;
        }
        kept.push(arg.clone());
    }
    kept
}

/// Runs `goodput` with `args` (`{out}` → `out`) against a fresh capture server.
pub(crate) fn run(
    args: &[String],
    out: &Path,
    fixtures: &BTreeMap<&'static str, PathBuf>,
    how: &How,
) -> (Output, Value) {
    let server = CaptureServer::start();
    std::fs::create_dir_all(out).expect("create the probe's directory");
    let args: Vec<String> = args
        .iter()
        .map(|a| expand(a, fixtures, &server.url).replace("{out}", &out.display().to_string()))
        .map(|a| a.replace("{now}", &now_unix()))
        .collect();
    let output = match &how.client {
        Some(client) => serve::run_client(&args, client, out, fixtures, &server.url),
        None => goodput()
            .args(&args)
            .env_remove("GOODPUT_TARGET")
            .env_remove("GOODPUT_STORE")
            .env_remove("GOODPUT_API_KEY")
            // Credentials for --aws-region/--aws-service's signatures (never a real account).
            .env("AWS_ACCESS_KEY_ID", "AKIDPROBEEXAMPLE")
            .env("AWS_SECRET_ACCESS_KEY", "probe-secret-never-written")
            .env_remove("AWS_SESSION_TOKEN")
            .env_remove("AWS_PROFILE")
            .output()
            .expect("goodput runs"),
    };
    let mut observation = observe(&output, out, &server.take(), how.stdout);
    if how.client.is_some()
        && let Some(object) = observation.as_object_mut()
    {
        object.insert("answers".into(), answers(out));
    }
    // The capture server's (and the embedded simulator's) port changes from run to run, and
    // so does the probe's output directory.
    let text = observation
        .to_string()
        .replace(&server.url, "{url}")
        .replace(&out.display().to_string(), "{out}");
    let text = without_ports(&text);
    (
        output,
        serde_json::from_str(&text).expect("observation re-parses"),
    )
}

/// The time now as Unix seconds (for `--start-at`).
fn now_unix() -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    format!("{:.3}", now.map_or(0.0, |d| d.as_secs_f64()))
}

/// Whether `goodput args` (no `--quiet`) draws with escape sequences under a pseudo-terminal.
pub(crate) fn draws_on_terminal(
    args: &[String],
    out: &Path,
    fixtures: &BTreeMap<&'static str, PathBuf>,
) -> bool {
    let server = CaptureServer::start();
    let binary = assert_cmd::cargo::cargo_bin("goodput");
    let mut line = shell_quote(&binary.display().to_string());
    for arg in base_without(args, &["--quiet"]) {
        let arg = expand(&arg, fixtures, &server.url).replace("{out}", &out.display().to_string());
        line.push(' ');
        line.push_str(&shell_quote(&arg));
    }
    let output = std::process::Command::new("script")
        .args(["-qfec", &line, "/dev/null"])
        .env("TERM", "xterm-256color")
        .env("COLUMNS", "120")
        .env("LINES", "40")
        .output()
        .expect("script runs");
    // The live view takes the alternate screen; plain output never does.
    output.stdout.windows(8).any(|w| w == b"\x1b[?1049h")
}

fn shell_quote(arg: &str) -> String {
    format!("'{}'", arg.replace('\'', "'\\''"))
}
