//! What people read after a run: `report.html` drawn in headless Chromium with no network,
//! the exports beside it, `report.json` against the committed schema with its metadata, and
//! the HTML rendering of sections other parts of goodput add (buckets, server, capacity).
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
    let titles: Vec<&str> = charts.iter().map(|(t, _)| t.as_str()).collect();
    assert_eq!(
        titles,
        [
            "Throughput vs latency",
            "Goodput vs load",
            "TTFT distribution (CDF)",
            "TPOT distribution (CDF)",
            "E2E distribution (CDF)",
            "Requests per window (1 s)",
            "Output tokens per second"
        ]
    );
    for (title, points) in &charts {
        assert!(*points > 0, "chart {title} has no data");
    }
    assert_eq!(
        attribute_of(&dom, "render-status", "data-charts").as_deref(),
        Some("7")
    );
    assert_eq!(
        attribute_of(&dom, "render-status", "data-charts-with-data").as_deref(),
        Some("7")
    );
    for section in ["warnings", "summary", "latency", "metadata"] {
        assert!(
            dom.contains(&format!("id=\"{section}\"")),
            "section {section} missing"
        );
    }
    assert!(
        dom.contains("precision") && dom.contains("fp8"),
        "tags are shown"
    );
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
fn sections_added_by_sweeps_server_metrics_and_capacity_are_rendered_when_present() {
    let dir = tempfile::tempdir().unwrap();
    let out = fixed_run(dir.path());
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let mut report = read_json(&out.join("report.json"));
    let mut second = report["steps"][0].clone();
    second["load"]["rate_per_sec"] = json!(80.0);
    second["throughput"]["requests_per_sec"] = json!(75.0);
    second["buckets"] = json!([{"name": "short", "requests": 40, "ttft_p99_ms": 41.5},
                               {"name": "long", "requests": 30, "ttft_p99_ms": 90.0}]);
    second["server"] = json!({"kv_cache_usage": {"max": 0.87, "mean": 0.5}});
    report["steps"].as_array_mut().unwrap().push(second);
    report["capacity"] =
        json!({"verdict": "sustains 64 req/s under the SLO", "max_rate_per_sec": 64.0});
    let page = dir.path().join("extended.html");
    std::fs::write(&page, with_data(&html, &report)).unwrap();
    let dom = rendered_dom(&page);
    assert_eq!(attribute_of(&dom, "render-status", "data-error"), None);
    for section in ["capacity", "buckets", "server"] {
        assert!(
            dom.contains(&format!("id=\"{section}\"")),
            "section {section} missing"
        );
    }
    assert!(dom.contains("sustains 64 req/s under the SLO"));
    assert!(dom.contains("kv_cache_usage") && dom.contains("0.87"));
    let curves: Vec<(String, usize)> = charts(&dom);
    let throughput = curves
        .iter()
        .find(|(t, _)| t == "Throughput vs latency")
        .unwrap();
    assert_eq!(throughput.1, 8, "4 series × 2 steps");
}
