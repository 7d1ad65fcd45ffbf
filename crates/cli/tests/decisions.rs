//! Decisions from finished runs: `goodput compare` (significance of a latency change between
//! two simulator configs, none for an identical rerun), `goodput gate` / `run --gate` (exit
//! codes and the failing condition named), and `goodput history` over a `--store`.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::{fixed_sim, goodput, run_ok};

/// A run of 150 measured requests at 40/s against a fixed-timing simulator with `ttft_ms`.
fn run_with_ttft(dir: &Path, name: &str, ttft_ms: u64, store: &Path, version: &str) -> PathBuf {
    let out = dir.join(name);
    let sim = fixed_sim(dir, name, ttft_ms, 2);
    run_ok(&[
        "--rate",
        "40",
        "--requests",
        "165",
        "--warmup",
        "15",
        "--input-tokens",
        "16",
        "--output-tokens",
        "8",
        "--seed",
        "5",
        "--sim-config",
        sim.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--store",
        store.to_str().unwrap(),
        "--tag",
        &format!("version={version}"),
    ]);
    out
}

fn compare_json(a: &Path, b: &Path) -> Value {
    let output = goodput()
        .args([
            "compare",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn verdict<'a>(comparison: &'a Value, metric: &str) -> &'a Value {
    comparison["distributions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["metric"] == metric)
        .unwrap()
}

/// The report alone (no journal beside it): compare must fall back to the bootstrap.
fn report_only(run: &Path, dir: &Path, name: &str) -> PathBuf {
    let path = dir.join(format!("{name}.json"));
    std::fs::copy(run.join("report.json"), &path).unwrap();
    path
}

#[test]
fn compare_flags_a_20_percent_ttft_regression_and_not_an_identical_rerun_and_history_shows_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("runs.db");
    let base = run_with_ttft(dir.path(), "base", 200, &store, "1");
    let slower = run_with_ttft(dir.path(), "slower", 240, &store, "2");
    let rerun = run_with_ttft(dir.path(), "rerun", 200, &store, "1");

    let regression = compare_json(&base, &slower);
    let ttft = verdict(&regression, "ttft");
    assert_eq!(ttft["test"]["method"], "mann_whitney");
    assert_eq!(ttft["verdict"], "regression", "{ttft}");
    assert!(ttft["test"]["p_value"].as_f64().unwrap() < 1e-6);
    let shift = ttft["test"]["relative_shift"].as_f64().unwrap();
    assert!((0.15..0.25).contains(&shift), "TTFT moved by {shift}");
    assert!(
        regression["warnings"].as_array().unwrap().is_empty(),
        "same workload and load"
    );

    assert_headline(&regression["headline"]);

    let same = compare_json(&base, &rerun);
    assert_eq!(same["headline"]["verdict"], "no significant change");
    for metric in ["ttft", "tpot", "e2e"] {
        assert_eq!(
            verdict(&same, metric)["verdict"],
            "no significant change",
            "{metric}: {same}"
        );
    }

    let (a, b, c) = (
        report_only(&base, dir.path(), "a"),
        report_only(&slower, dir.path(), "b"),
        report_only(&rerun, dir.path(), "c"),
    );
    let bootstrap = compare_json(&a, &b);
    assert_eq!(
        verdict(&bootstrap, "ttft")["test"]["method"],
        "bootstrap_quantiles"
    );
    assert_eq!(verdict(&bootstrap, "ttft")["verdict"], "regression");
    assert_eq!(
        verdict(&compare_json(&a, &c), "ttft")["verdict"],
        "no significant change"
    );

    assert_text_formats(&base, &slower);
    assert_history(&store);
}

/// The headline of a 20 % TTFT regression at the same load.
fn assert_headline(headline: &Value) {
    assert_eq!(headline["verdict"], "regression", "{headline}");
    let figure = |h: &Value, name: &str| {
        h["figures"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(figure(headline, "TTFT p50")["verdict"], "worse");
    assert_eq!(
        figure(headline, "throughput")["verdict"],
        "no significant change",
        "the same offered load completes the same requests"
    );
    assert!(
        headline["summary"]
            .as_str()
            .unwrap()
            .starts_with("Worse: TTFT p50 +"),
        "{headline}"
    );
}

fn assert_text_formats(base: &Path, slower: &Path) {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("compare.html");
    let text = goodput()
        .args([
            "compare",
            base.to_str().unwrap(),
            slower.to_str().unwrap(),
            "--fail-on-regression",
            "--html",
            page.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(text.status.code(), Some(1), "--fail-on-regression");
    let text = String::from_utf8(text.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[2].starts_with("Verdict: regression — Worse: TTFT p50"),
        "the verdict leads: {text}"
    );
    for figure in [
        "throughput",
        "goodput",
        "TTFT p99",
        "TPOT p50",
        "E2E p99",
        "error rate",
        "stability",
    ] {
        assert!(text.contains(figure), "headline figure {figure}: {text}");
    }
    assert!(
        lines.len() <= 30,
        "one screen: {} lines\n{text}",
        lines.len()
    );
    assert!(
        !text.contains("latency_ms.ttft.p50"),
        "every figure only with --details"
    );
    let details = goodput()
        .args([
            "compare",
            base.to_str().unwrap(),
            slower.to_str().unwrap(),
            "--details",
        ])
        .output()
        .unwrap();
    let details = String::from_utf8(details.stdout).unwrap();
    assert!(
        details.contains("Mann-Whitney U (journals)") && details.contains("latency_ms.ttft.p50"),
        "every figure side by side: {details}"
    );
    assert_page_and_more_runs(base, slower, &page);
}

/// The `--html` page (audited at both widths), the other formats, three runs, misuse.
fn assert_page_and_more_runs(base: &Path, slower: &Path, page: &Path) {
    let dom = support::rendered_dom(page);
    for section in [
        "summary",
        "distributions",
        "timeseries",
        "significance",
        "metrics",
        "metadata",
    ] {
        assert!(
            dom.contains(&format!("id=\"{section}\"")),
            "section {section} missing"
        );
    }
    assert!(
        dom.contains("slower against base: regression"),
        "the verdict names the runs"
    );
    support::layout::assert_readable(page, "compare");
    for format in ["markdown", "html"] {
        let output = goodput()
            .args([
                "compare",
                base.to_str().unwrap(),
                slower.to_str().unwrap(),
                "--format",
                format,
            ])
            .output()
            .unwrap();
        assert!(output.status.success());
        assert!(
            String::from_utf8(output.stdout)
                .unwrap()
                .contains("regression")
        );
    }
    assert_three_runs_and_misuse(base, slower);
}

fn assert_three_runs_and_misuse(base: &Path, slower: &Path) {
    let three = goodput()
        .args([
            "compare",
            base.to_str().unwrap(),
            slower.to_str().unwrap(),
            base.to_str().unwrap(),
        ])
        .args(["--format", "json"])
        .output()
        .unwrap();
    let three: Value = serde_json::from_slice(&three.stdout).unwrap();
    assert_eq!(
        three.as_array().unwrap().len(),
        2,
        "two candidates against the baseline"
    );
    assert_eq!(
        three[1]["comparison"]["headline"]["verdict"],
        "no significant change"
    );
    let misuse = goodput()
        .args([
            "compare",
            base.to_str().unwrap(),
            slower.to_str().unwrap(),
            "--format",
            "json",
            "--details",
        ])
        .output()
        .unwrap();
    assert_eq!(
        misuse.status.code(),
        Some(2),
        "--details with JSON is a usage error"
    );
}

fn assert_history(store: &Path) {
    let history = goodput()
        .args(["history", "--store", store.to_str().unwrap()])
        .output()
        .unwrap();
    let history = String::from_utf8(history.stdout).unwrap();
    assert_eq!(
        history.lines().count(),
        4,
        "a header and three runs: {history}"
    );
    let trend = goodput()
        .args([
            "history",
            "--store",
            store.to_str().unwrap(),
            "--metric",
            "ttft.p50",
            "--by",
            "tag:version",
        ])
        .output()
        .unwrap();
    assert!(
        trend.status.success(),
        "{}",
        String::from_utf8_lossy(&trend.stderr)
    );
    let trend = String::from_utf8(trend.stdout).unwrap();
    assert!(trend.contains("ttft.p50 (ms) across runs"), "{trend}");
    assert!(
        trend.contains("(2 runs)") && trend.contains("(1 runs)"),
        "grouped by version: {trend}"
    );
}

#[test]
fn gate_exits_1_naming_the_failing_condition_0_when_all_pass_and_2_on_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let sim = fixed_sim(dir.path(), "sim", 50, 2);
    let flags = "--rate 40 --requests 40 --warmup 0 --input-tokens 16 --output-tokens 8 --seed 3";
    let mut common: Vec<&str> = flags.split_whitespace().collect();
    common.extend(["--sim-config", sim.to_str().unwrap()]);
    run_ok(&[&common[..], &["--out", out.to_str().unwrap()]].concat());
    let criteria = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let passing = criteria(
        "pass.toml",
        "conditions = [\"ttft.p50 >= 50ms\", \"e2e.p95 <= 1.5s\", \"error_rate <= 0.1%\", \"requests_per_sec > 1\"]\n",
    );
    let failing = criteria(
        "fail.toml",
        "conditions = [\"ttft.p50 >= 50ms\", \"ttft.p99 <= 10ms\"]\n",
    );
    let gate = |file: &Path| {
        goodput()
            .args(["gate", "--criteria"])
            .arg(file)
            .arg(&out)
            .output()
            .unwrap()
    };

    let pass = gate(&passing);
    let stdout = String::from_utf8(pass.stdout).unwrap();
    assert_eq!(pass.status.code(), Some(0), "{stdout}");
    assert_eq!(stdout.matches("PASS  ").count(), 4, "{stdout}");
    assert!(
        stdout.contains("measured") && stdout.contains(" ms"),
        "values with units: {stdout}"
    );

    let fail = gate(&failing);
    let stdout = String::from_utf8(fail.stdout).unwrap();
    assert_eq!(fail.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("FAIL  ttft.p99 <= 10ms  measured"),
        "{stdout}"
    );
    assert!(
        stdout.contains("gate FAIL: 1 of 2 failed: ttft.p99 <= 10ms"),
        "{stdout}"
    );

    assert_unknown_path_refused(&gate(&criteria(
        "unknown.toml",
        "conditions = [\"ttft.p98 <= 1s\"]\n",
    )));
    let bad = gate(&criteria("bad.toml", "conditions = [\"ttft.p99 <=\"]\n"));
    assert_eq!(bad.status.code(), Some(2));

    assert_run_gate(&common, &failing);
}

/// An unknown report path in the criteria: exit 2, naming it with a suggestion.
fn assert_unknown_path_refused(unknown: &std::process::Output) {
    assert_eq!(unknown.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert!(
        stderr.contains("unknown report path `ttft.p98`") && stderr.contains("did you mean"),
        "{stderr}"
    );
}

/// `goodput run --gate`: the summary, then the failing condition, and exit status 1.
fn assert_run_gate(common: &[&str], failing: &Path) {
    let run_gated = goodput()
        .args(["run", "--quiet"])
        .args(common)
        .args(["--gate", failing.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8(run_gated.stdout).unwrap();
    assert_eq!(run_gated.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("Throughput") && stdout.contains("FAIL  ttft.p99 <= 10ms"),
        "{stdout}"
    );
}
