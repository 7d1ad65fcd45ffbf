//! What people read after a run: `report.html` drawn in headless Chromium with no network and
//! checked for readability at desktop and phone widths (screenshots kept as artefacts), the
//! exports beside it, `report.json` against the committed schema with its metadata, sections
//! the page has no dedicated view for shown as figures (never JSON), and the terminal summary
//! on one screen with the rest behind `--details`.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::Path;

use serde_json::{Value, json};
use support::{
    attribute_of, charts, fixed_sim, read_json, rendered_dom, run_ok, validate_against_schema,
};

fn fixed_run(dir: &Path) -> std::path::PathBuf {
    let out = dir.join("run");
    let sim = fixed_sim(dir, "sim", 30, 3);
    run_ok(&[
        "--rate",
        "40",
        "--requests",
        "80",
        "--warmup",
        "10",
        "--input-tokens",
        "32",
        "--output-tokens",
        "16",
        "--seed",
        "11",
        "--tag",
        "precision=fp8",
        "--sim-config",
        sim.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    out
}

/// Splices `report` into a rendered page in place of its embedded data.
fn with_data(html: &str, report: &Value) -> String {
    let marker = "id=\"goodput-data\">";
    let start = html.find(marker).unwrap() + marker.len();
    let end = start + html[start..].find("</script>").unwrap();
    let data = json!({"mode": "report", "report": report})
        .to_string()
        .replace('<', "\\u003c");
    format!("{}{}{}", &html[..start], data, &html[end..])
}

/// The charts of a one-step page: distributions, time series and server gauges, all with data;
/// none of those that need several steps.
fn assert_one_step_charts(charts: &[(String, usize)]) {
    let titles: Vec<&str> = charts.iter().map(|(t, _)| t.as_str()).collect();
    for title in [
        "TTFT distribution (CDF)",
        "TPOT distribution (CDF)",
        "E2E distribution (CDF)",
        "Requests per window (1 s)",
        "Output tokens per second",
        "Latency per window",
        "Queue: server vs client",
    ] {
        assert!(titles.contains(&title), "chart {title} missing: {titles:?}");
    }
    for several_steps in [
        "Goodput vs load",
        "Latency vs load",
        "Throughput vs latency",
    ] {
        assert!(
            !titles.contains(&several_steps),
            "{several_steps} needs several steps: {titles:?}"
        );
    }
    for (title, points) in charts {
        assert!(*points > 0, "chart {title} has no data");
    }
}

#[test]
fn the_html_report_draws_every_chart_with_data_in_headless_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let out = fixed_run(dir.path());
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    for external in ["src=\"http", "href=\"http", "<link", "url(http", "@import"] {
        assert!(
            !html.contains(external),
            "report.html must load nothing: found {external}"
        );
    }
    let dom = rendered_dom(&out.join("report.html"));
    assert_eq!(
        attribute_of(&dom, "render-status", "data-error"),
        None,
        "{dom}"
    );
    let charts = charts(&dom);
    assert_one_step_charts(&charts);
    let drawn = charts.len().to_string();
    assert_eq!(
        attribute_of(&dom, "render-status", "data-charts").as_deref(),
        Some(drawn.as_str())
    );
    assert_eq!(
        attribute_of(&dom, "render-status", "data-charts-with-data").as_deref(),
        Some(drawn.as_str())
    );
    assert_eq!(
        attribute_of(&dom, "render-status", "data-charts-without-data").as_deref(),
        Some("0"),
        "a one-step run has the data of every chart the page would draw"
    );
    assert!(dom.contains("class=\"bar\""), "buckets are drawn with bars");
    for section in [
        "warnings", "summary", "latency", "buckets", "server", "metadata",
    ] {
        assert!(
            dom.contains(&format!("id=\"{section}\"")),
            "section {section} missing"
        );
    }
    assert!(
        dom.contains("precision") && dom.contains("fp8"),
        "tags are shown"
    );
    support::layout::assert_readable(&out.join("report.html"), "one-step");
}

#[test]
fn report_json_validates_and_carries_metadata_distributions_and_exports() {
    let dir = tempfile::tempdir().unwrap();
    let out = fixed_run(dir.path());
    let report = read_json(&out.join("report.json"));
    validate_against_schema(&report);
    let run = &report["run"];
    assert!(run["client_host"]["logical_cores"].as_u64().unwrap() >= 1);
    assert!(
        run["client_host"]["os"]
            .as_str()
            .is_some_and(|os| !os.is_empty())
    );
    assert_eq!(
        run["server_info"]["models"],
        json!(["sim-fixed"]),
        "{}",
        run["server_info"]
    );
    assert!(
        run["server_info"]["headers"]["server"][0]
            .as_str()
            .unwrap()
            .starts_with("goodput-sim/")
    );
    let step = &report["steps"][0];
    let ttft = step["distributions_ms"]["ttft"].as_array().unwrap();
    assert_eq!(ttft.len(), 104);
    assert_eq!(
        ttft[50][1], step["latency_ms"]["ttft"]["p50"],
        "p50 point equals the summary p50"
    );
    assert!(
        ttft[0][1].as_f64().unwrap() >= 30.0,
        "fixed TTFT is 30 ms: {}",
        ttft[0][1]
    );

    let summary_csv = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    let mut lines = summary_csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(header.len(), row.len());
    let column = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];
    assert_eq!(column("requests.completed"), "70");
    assert_eq!(
        column("latency_ms.ttft.p50").parse::<f64>().unwrap(),
        step["latency_ms"]["ttft"]["p50"].as_f64().unwrap()
    );
    let requests_csv = std::fs::read_to_string(out.join("requests.csv")).unwrap();
    assert_eq!(
        requests_csv.lines().count(),
        81,
        "header + one row per journaled request"
    );
    let summary_md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(summary_md.contains("| step | load |") && summary_md.contains("| 0 | TTFT |"));
}

#[test]
fn sections_without_a_dedicated_view_are_figures_never_json() {
    let dir = tempfile::tempdir().unwrap();
    let out = fixed_run(dir.path());
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let mut report = read_json(&out.join("report.json"));
    report["steps"][0]["cost"] = json!({"price_per_hour": 2.5, "per_million_output_tokens": {"usd": 1.25, "basis": "measured"}});
    report["future_section"] =
        json!({"nested": {"depth": {"value": 42}}, "list": [{"a": 1}, {"a": 2}]});
    let page = dir.path().join("extended.html");
    std::fs::write(&page, with_data(&html, &report)).unwrap();
    let dom = rendered_dom(&page);
    assert_eq!(attribute_of(&dom, "render-status", "data-error"), None);
    for section in ["cost", "extra-future_section"] {
        assert!(
            dom.contains(&format!("id=\"{section}\"")),
            "section {section} missing"
        );
    }
    assert!(
        dom.contains("nested · depth · value") && dom.contains(">42<"),
        "nested figures are rows"
    );
    assert!(dom.contains("per million output tokens · usd"));
    support::layout::assert_readable(&page, "unknown-sections");
}

#[test]
fn the_terminal_summary_fits_one_screen_and_details_and_formats_give_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let out = fixed_run(dir.path());
    let report = |extra: &[&str]| {
        let output = support::goodput()
            .args(["report", out.to_str().unwrap()])
            .args(extra)
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8(output.stdout).unwrap(),
        )
    };
    let (status, short) = report(&[]);
    assert_eq!(status, Some(0));
    let lines = short.lines().count();
    assert!(lines <= 40, "one screen: {lines} lines\n{short}");
    for part in [
        "Throughput:",
        "Latency (ms)",
        "Goodput",
        "Stability:",
        "Server agreement:",
        "--details",
    ] {
        assert!(short.contains(part), "{part} missing:\n{short}");
    }
    assert!(
        !short.contains("TTFT from send"),
        "from-send rows only with --details"
    );
    let (_, long) = report(&["--details"]);
    assert!(long.lines().count() > lines, "--details shows more");
    for part in ["TTFT from send", "Server side", "By prompt length"] {
        assert!(
            long.contains(part),
            "{part} missing with --details:\n{long}"
        );
    }
    let (_, markdown) = report(&["--format", "markdown"]);
    assert!(markdown.starts_with("## goodput"), "{markdown}");
    let (_, json) = report(&["--format", "json"]);
    let value: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(value["steps"].as_array().unwrap().len(), 1);
    let (status, _) = report(&["--format", "json", "--details"]);
    assert_eq!(status, Some(2), "--details with JSON is a usage error");
}
