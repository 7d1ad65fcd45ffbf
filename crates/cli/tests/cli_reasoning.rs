//! `goodput run` with a reasoning, tool-calling simulator and agentic sessions: the report's
//! reasoning, tool-call, session and prefix-reuse sections are filled, valid against the schema
//! and rebuilt exactly from the journal; flags that cannot apply are refused with exit 2.
#![allow(clippy::unwrap_used)]

mod support;

use serde_json::Value;
use support::{goodput, ok, read_json, validate_against_schema};

#[test]
fn an_agentic_run_reports_reasoning_tools_sessions_and_prefix_reuse() {
    let dir = tempfile::tempdir().unwrap();
    let sim = dir.path().join("sim.json");
    std::fs::write(
        &sim,
        r#"{"engine": {"kind": "batching"}, "time_scale": 20,
            "agent": {"reasoning_tokens": 8, "tool_call_probability": 0.5,
                      "prompt_tokens_details": true}}"#,
    )
    .unwrap();
    let out = dir.path().join("run");
    ok(goodput()
        .args(["run", "--quiet", "--sim-config", sim.to_str().unwrap()])
        .args(["--turns", "3", "--agent", "tool-prob=0.5,tool-latency=20ms,result-tokens=64"])
        .args(["--concurrency", "2", "--requests", "12", "--warmup", "0"])
        .args(["--input-tokens", "64", "--output-tokens", "24", "--slo", "ttfat=5s"])
        .args(["--extra-body", r#"{"tools": [{"type": "function", "function": {"name": "lookup", "parameters": {}}}]}"#])
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap());
    let report = read_json(&out.join("report.json"));
    validate_against_schema(&report);
    let step = &report["steps"][0];
    assert_eq!(
        step["reasoning"]["reasoning_tokens_per_request"]["mean"],
        8.0
    );
    assert!(
        step["tool_calls"]["ended_in_tool_call"].as_u64().unwrap() > 0,
        "{step}"
    );
    assert_eq!(step["sessions"]["turns"], 12);
    assert!(step["prefix_reuse"]["cached_fraction"].as_f64().unwrap() > 0.0);
    let rebuilt = goodput()
        .args(["report", out.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    assert!(rebuilt.status.success());
    let rebuilt: Value = serde_json::from_slice(&rebuilt.stdout).unwrap();
    for key in [
        "reasoning",
        "tool_calls",
        "sessions",
        "prefix_reuse",
        "goodput",
    ] {
        assert_eq!(
            rebuilt["steps"][0][key], step[key],
            "{key} rebuilt from the journal"
        );
    }
    assert_exports(&out, step);
}

/// `v` (already at most one decimal) as the page's `fmt(v, 1)` writes it: no decimal when it
/// is zero, thousands separated by commas (128 → "128", 1234.5 → "1,234.5").
fn page_number(v: f64) -> String {
    let text = format!("{v:.1}");
    let text = text.strip_suffix(".0").unwrap_or(&text).to_string();
    let (whole, fraction) = text
        .split_once('.')
        .map_or((text.as_str(), None), |(w, f)| (w, Some(f)));
    let digits: Vec<char> = whole.chars().collect();
    let mut grouped = String::new();
    for (i, c) in digits.iter().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) && *c != '-' && digits[i - 1] != '-' {
            grouped.push(',');
        }
        grouped.push(*c);
    }
    match fraction {
        Some(f) => format!("{grouped}.{f}"),
        None => grouped,
    }
}

/// The HTML page (in Chromium), `summary.md`, `summary.csv` and `requests.csv` show the
/// reasoning, tool-call, session and prefix-reuse figures of `step`.
fn assert_exports(out: &std::path::Path, step: &Value) {
    let page = out.join("report.html");
    let dom = support::rendered_dom(&page);
    let ttfat_p50 = step["reasoning"]["time_to_first_answer_ms"]["p50"]
        .as_f64()
        .unwrap();
    // The page rounds half away from zero, Rust's formatting to even: accept either neighbour.
    let ttfat = [(ttfat_p50 * 10.0).floor(), (ttfat_p50 * 10.0).ceil()]
        .map(|tenths| format!("{} ms", page_number(tenths / 10.0)));
    assert!(
        ttfat.iter().any(|needle| dom.contains(needle.as_str())),
        "report.html lacks {ttfat:?}"
    );
    for needle in [
        "time to first answer token p50".to_string(),
        "answers starved by thinking".to_string(),
        "ended in a tool call".to_string(),
        "session duration p50".to_string(),
        "expected shareable".to_string(),
        "reported cached".to_string(),
    ] {
        assert!(dom.contains(&needle), "report.html lacks {needle:?}");
    }
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    for needle in [
        "Reasoning (TTFAT",
        "| step | requests calling |",
        "| step | sessions |",
        "Prefix reuse (expected",
    ] {
        assert!(md.contains(needle), "summary.md lacks {needle:?}:\n{md}");
    }
    let csv = std::fs::read_to_string(out.join("requests.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let at = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (reasoning, ttfat, session) = (at("reasoning_tokens"), at("ttfat_ms"), at("session"));
    for line in lines.filter(|l| l.contains(",measure,")) {
        let row: Vec<&str> = line.split(',').collect();
        assert_eq!(row.len(), header.len(), "{line}");
        assert_eq!(row[reasoning], "8", "{line}");
        assert!(row[ttfat].parse::<f64>().unwrap() > 0.0, "{line}");
        assert!(row[session].parse::<u64>().is_ok(), "{line}");
    }
    let summary = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    assert!(summary.contains("reasoning.time_to_first_answer_ms.p50"));
}

/// Two recorded agent sessions of 3 requests each, 2 + 1 of them tool results.
const AGENT_TRACE: &str = r#"{"id": "a", "system": "You are an agent.", "turns": [{"role": "user", "content": "fix the test", "output_tokens": 12}, {"role": "assistant", "content": "reading"}, {"role": "tool", "content": "fn main() {} and more source text here", "latency_ms": 30}, {"role": "tool", "content": "test result: failed", "latency_ms": 10, "output_tokens": 9}]}
{"id": "b", "turns": [{"role": "user", "content": "search the notes"}, {"role": "assistant", "content": "one two three four five six seven"}, {"role": "tool", "content": "release notes text", "latency_ms": 20}, {"role": "user", "content": "summarise", "think_time_ms": 40, "output_tokens": 6}]}
"#;

#[test]
fn an_agent_trace_dataset_replays_its_sessions_with_session_figures() {
    let dir = tempfile::tempdir().unwrap();
    let sim = dir.path().join("sim.json");
    std::fs::write(
        &sim,
        r#"{"engine": {"kind": "batching"}, "time_scale": 20,
            "agent": {"prompt_tokens_details": true, "reasoning_tokens": 3}}"#,
    )
    .unwrap();
    let trace = dir.path().join("agent.jsonl");
    std::fs::write(&trace, AGENT_TRACE).unwrap();
    let out = dir.path().join("run");
    ok(goodput()
        .args(["run", "--quiet", "--sim-config", sim.to_str().unwrap()])
        .args(["--dataset", trace.to_str().unwrap(), "--output-tokens", "7"])
        .args(["--concurrency", "1", "--requests", "6", "--warmup", "0"])
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap());
    let report = read_json(&out.join("report.json"));
    validate_against_schema(&report);
    assert_eq!(report["run"]["workload"]["kind"], "agent_trace");
    assert_eq!(report["run"]["workload"]["tool_result_turns"], 3);
    let step = &report["steps"][0];
    let sessions = &step["sessions"];
    assert_eq!(sessions["turns"], 6, "{sessions}");
    assert_eq!(sessions["sessions"], 2, "{sessions}");
    assert_eq!(sessions["tool_result_turns"], 3, "{sessions}");
    assert_eq!(sessions["turns_per_session"]["max"], 3.0, "{sessions}");
    let reuse = &step["prefix_reuse"];
    assert!(
        reuse["expected_shareable_tokens_total"].as_u64().unwrap() > 0,
        "{reuse}"
    );
    assert!(
        reuse["cached_tokens_total"].as_u64().unwrap() > 0,
        "{reuse}"
    );
    // Answer lengths: the turn's output_tokens, else the reference reply's length, else
    // --output-tokens: 12 + 7 + 9 (session a), 7 ("one … seven") + 7 + 6 (session b).
    let records = std::fs::read_to_string(out.join("requests.jsonl")).unwrap();
    let mut asked: Vec<(u64, u64, u64)> = records
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|r| r["index"].is_u64())
        .map(|r| {
            let n = |k: &str| r[k].as_u64().unwrap_or(u64::MAX);
            (n("session"), n("turn"), n("requested_output_tokens"))
        })
        .collect();
    asked.sort_unstable();
    let lengths: Vec<u64> = asked.iter().map(|a| a.2).collect();
    assert_eq!(lengths, [12, 7, 9, 7, 7, 6], "{asked:?}");
    // (The agentic run's page shows its --extra-body JSON in the command line, which the
    // layout audit flags; this run's page has none.)
    let page = out.join("report.html");
    let dom = support::rendered_dom(&page);
    assert!(dom.contains("time to first answer token p50") && dom.contains("expected shareable"));
    support::layout::assert_readable(&page, "agent-trace");
}

#[test]
fn a_bad_agent_trace_names_its_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("agent.jsonl");
    let bad = r#"{"turns": [{"role": "user", "content": "hi", "latency_ms": 5}]}"#;
    std::fs::write(&trace, format!("{AGENT_TRACE}{bad}\n")).unwrap();
    let output = goodput()
        .args(["run", "--quiet", "--requests", "2", "--dataset"])
        .arg(&trace)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr
            .contains("agent.jsonl:3: field `turns[0].latency_ms`: unknown field for a user turn"),
        "{stderr}"
    );
}

#[test]
fn a_single_turn_shared_prefix_run_shows_the_expected_prefix_beside_the_cached_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let sim = dir.path().join("sim.json");
    std::fs::write(
        &sim,
        r#"{"engine": {"kind": "batching"}, "time_scale": 20,
            "agent": {"prompt_tokens_details": true}}"#,
    )
    .unwrap();
    let out = dir.path().join("run");
    let output = ok(goodput()
        .args(["run", "--details", "--sim-config", sim.to_str().unwrap()])
        .args([
            "--shared-prefix",
            "groups=2,tokens=96",
            "--input-tokens",
            "32",
        ])
        .args(["--concurrency", "1", "--requests", "10", "--warmup", "0"])
        .args(["--output-tokens", "4", "--out", out.to_str().unwrap()])
        .output()
        .unwrap());
    let report = read_json(&out.join("report.json"));
    validate_against_schema(&report);
    let reuse = &report["steps"][0]["prefix_reuse"];
    assert_eq!(reuse["requests"], 10, "{reuse}");
    assert_eq!(reuse["expected_shareable_tokens_total"], 960, "{reuse}");
    assert_eq!(reuse["expected_input_tokens_total"], 1280, "{reuse}");
    assert_eq!(reuse["expected_shareable_fraction"], 0.75, "{reuse}");
    // The simulator caches whole 16-token blocks of the prefix once its group was seen.
    let cached = reuse["cached_tokens_total"].as_u64().unwrap();
    assert!(cached > 0 && cached <= 960, "{reuse}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("Prefix reuse: expected 75.0 % of prompt tokens re-sent (960 of 1280)"),
        "{stdout}"
    );
}

/// A run against a fixed-timing simulator (TTFT 20 ms, ITL 5 ms) that thinks `reasoning`
/// tokens first (none: no reasoning channel at all).
fn thinking_run(dir: &std::path::Path, name: &str, reasoning: Option<u32>) -> std::path::PathBuf {
    let sim = dir.join(format!("{name}.json"));
    let agent = reasoning.map_or(String::new(), |n| {
        format!(r#", "agent": {{"reasoning_tokens": {n}}}"#)
    });
    let config = format!(
        r#"{{"engine": {{"kind": "fixed", "ttft": 20, "itl": 5, "slots": 64}},
            "prompt_tokenizer": "words"{agent}}}"#
    );
    std::fs::write(&sim, config).unwrap();
    let out = dir.join(name);
    ok(goodput()
        .args(["run", "--quiet", "--sim-config", sim.to_str().unwrap()])
        .args(["--concurrency", "4", "--requests", "40", "--warmup", "0"])
        .args([
            "--input-tokens",
            "16",
            "--output-tokens",
            "24",
            "--seed",
            "3",
        ])
        .args(["--out", out.to_str().unwrap()])
        .output()
        .unwrap());
    out
}

fn compare_json(a: &std::path::Path, b: &std::path::Path) -> Value {
    let output = ok(goodput()
        .args(["compare", a.to_str().unwrap(), b.to_str().unwrap()])
        .args(["--format", "json"])
        .output()
        .unwrap());
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn compare_tests_ttfat_when_both_runs_reasoned_and_omits_it_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let short = thinking_run(dir.path(), "short", Some(4));
    let long = thinking_run(dir.path(), "long", Some(12));
    let plain = thinking_run(dir.path(), "plain", None);
    let c = compare_json(&short, &long);
    let distributions = c["distributions"].as_array().unwrap();
    let ttfat = distributions
        .iter()
        .find(|d| d["metric"] == "ttfat")
        .unwrap();
    assert_eq!(ttfat["test"]["method"], "mann_whitney", "{ttfat}");
    assert_eq!(ttfat["verdict"], "regression", "{ttfat}");
    let figures = |c: &Value| c["headline"]["figures"].as_array().unwrap().clone();
    let named = |c: &Value, name: &str| figures(c).into_iter().find(|f| f["name"] == name);
    let p50 = named(&c, "TTFAT p50").unwrap();
    assert_eq!(p50["verdict"], "worse", "{p50}");
    // TTFT 20 ms + 4 (12) reasoning tokens × 5 ms: 40 ms against 80 ms.
    let (a, b) = (p50["a"].as_f64().unwrap(), p50["b"].as_f64().unwrap());
    assert!(
        (40.0..60.0).contains(&a) && (80.0..100.0).contains(&b),
        "{p50}"
    );
    assert!(named(&c, "reasoning tokens/s").is_some());
    assert!(c["headline"]["summary"].as_str().unwrap().contains("TTFAT"));
    let c = compare_json(&plain, &long);
    assert!(
        named(&c, "TTFAT p50").is_none(),
        "absent from the baseline: omitted"
    );
    assert!(named(&c, "reasoning tokens/s").is_none());
    let distributions = c["distributions"].as_array().unwrap();
    assert!(distributions.iter().all(|d| d["metric"] != "ttfat"));
}

#[test]
fn flags_that_cannot_apply_are_refused_with_status_2() {
    for (args, needle) in [
        (
            vec![
                "run",
                "--agent",
                "tool-prob=0.5,tool-latency=1s,result-tokens=5",
            ],
            "--turns",
        ),
        (
            vec![
                "run",
                "--turns",
                "2",
                "--agent",
                "tool-prob=3,tool-latency=1s,result-tokens=5",
            ],
            "between 0 and 1",
        ),
        (vec!["run", "--api", "responses"], "--target"),
        (
            vec!["sim", "--reasoning-format", "xml"],
            "unknown reasoning format",
        ),
        (
            vec!["sim", "--tool-call-probability", "1.5", "--explain"],
            "between 0 and 1",
        ),
        (vec!["run", "--slo", "ttfat=fast"], "ttfat"),
    ] {
        let requests: &[&str] = if args[0] != "run" {
            &[]
        } else {
            &["--requests", "1"]
        };
        let output = goodput().args(&args).args(requests).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

/// The reasoning and tool-call run of the test below, live or in virtual time: its step.
fn reasoning_run(virtual_time: bool) -> Value {
    let mut command = goodput();
    command.args([
        "run",
        "--quiet",
        "--json",
        "--requests",
        "12",
        "--concurrency",
        "3",
    ]);
    command.args([
        "--sim-reasoning-tokens",
        "6",
        "--sim-tool-calls",
        "0.5",
        "--seed",
        "4",
    ]);
    command.args([
        "--extra-body",
        r#"{"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}"#,
    ]);
    command.args([
        "--input-tokens",
        "16",
        "--output-tokens",
        "12",
        "--warmup",
        "0",
    ]);
    if virtual_time {
        command.arg("--virtual-time");
    }
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    report["steps"][0].clone()
}

#[test]
fn virtual_time_reasons_and_calls_tools_as_the_live_simulator_does() {
    // The same run live against the embedded simulator and in virtual time: one runner, one
    // wire, so the reasoning and tool-call figures are the same requests' (virtual time has no
    // jitter of this machine's clock, so only counts are compared).
    let run = reasoning_run;
    let (live, virtual_time) = (run(false), run(true));
    for path in [
        "/requests/completed",
        "/reasoning/reasoning_tokens_total",
        "/reasoning/answer_tokens_total",
        "/tool_calls/tool_calls",
        "/tool_calls/requests_with_tool_calls",
    ] {
        assert_eq!(live.pointer(path), virtual_time.pointer(path), "{path}");
        assert!(
            virtual_time.pointer(path).is_some(),
            "{path} in {virtual_time}"
        );
    }
}
