//! Whether a page is readable as drawn by headless Chromium at a desktop (1280 px) and a phone
//! (390 px) width: no JSON object text among the visible text, no element wider than the
//! viewport (tables that cannot fit scroll inside their own box, and that box must fit), every
//! chart drawn with data. A full-page screenshot at each width, and the page itself, are kept
//! under `target/artifacts/reports/` (or `$GOODPUT_ARTIFACTS/reports/`) for review.
//!
//! Chromium will not make a window narrower than 500 px, so the page is drawn in an iframe of
//! the exact width; an audit script appended to the page posts its findings to the frame.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The widths every page is checked at.
pub const WIDTHS: [u32; 2] = [1280, 390];

/// The audit, as a JavaScript expression whose value is its findings (also evaluated over the
/// DevTools protocol by [`super::browser`], on pages `goodput ui` serves).
pub const AUDIT_JS: &str = r##"(function () {
  var W = window.innerWidth, body = document.body, text = body.innerText;
  var json = text.match(/.{0,40}\{\s*"[^"]*"\s*:.{0,40}/);
  var wide = [];
  Array.prototype.forEach.call(body.querySelectorAll("*"), function (el) {
    if (el.closest(".scroll") && !el.classList.contains("scroll")) return;
    if (el.closest("svg") && el.tagName.toLowerCase() !== "svg") return;
    var r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) return;
    if (r.right > W + 1 || r.left < -1) wide.push(el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + "(" + Math.round(r.right) + "px)");
  });
  var empty = [], charts = document.querySelectorAll("svg.chart");
  Array.prototype.forEach.call(charts, function (svg) {
    if (!(Number(svg.getAttribute("data-points")) > 0)) empty.push(svg.getAttribute("data-title"));
  });
  var status = document.getElementById("render-status");
  return { width: W, page_width: document.documentElement.scrollWidth, height: document.documentElement.scrollHeight,
    json: json ? json[0] : "", wide: wide.slice(0, 12).join(" "), empty: empty.join(" | "), charts: charts.length,
    error: status ? status.getAttribute("data-error") || "" : "no render status" };
})()"##;

/// The audit as a script appended to a page drawn in a frame: it posts its findings to the
/// frame's page.
fn audit_script() -> String {
    format!(
        "<script>\nwindow.parent.postMessage(JSON.stringify({AUDIT_JS}), \"*\");\n</script>\n</body>"
    )
}

/// What the audit found at one width.
#[derive(Debug)]
pub struct Audit {
    /// The viewport width the page saw.
    pub width: u64,
    /// The page's scroll width (more than `width` means sideways scrolling).
    pub page_width: u64,
    /// The page's height, px.
    pub height: u64,
    /// Visible text that looks like a JSON object (empty when none).
    pub json: String,
    /// Elements wider than the viewport.
    pub wide: String,
    /// Titles of charts drawn without data.
    pub empty: String,
    /// Charts drawn.
    pub charts: u64,
    /// The page's render error (empty when none).
    pub error: String,
}

fn browser(dir: &Path) -> Command {
    let mut command = Command::new(super::chromium());
    command
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--disable-extensions",
            "--proxy-server=127.0.0.1:9",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()));
    command
}

/// Where screenshots go.
pub fn artifacts() -> PathBuf {
    let root = std::env::var_os("GOODPUT_ARTIFACTS").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/artifacts"),
        PathBuf::from,
    );
    let dir = root.join("reports");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn frame(dir: &Path, width: u32, height: u64) -> PathBuf {
    let path = dir.join(format!("frame-{width}.html"));
    std::fs::write(
        &path,
        format!(
            "<!DOCTYPE html><html><head><style>body{{margin:0}} iframe{{border:0;display:block}}</style></head>\
             <body id=\"audit\"><iframe src=\"page.html\" style=\"width:{width}px;height:{height}px\"></iframe>\
             <script>window.addEventListener(\"message\", function (e) {{ var r = JSON.parse(e.data);\
             Object.keys(r).forEach(function (k) {{ document.body.setAttribute(\"data-\" + k.replace(/_/g, \"-\"), String(r[k])); }}); }});</script>\
             </body></html>"
        ),
    )
    .unwrap();
    path
}

fn attribute(dom: &str, name: &str) -> String {
    let key = format!("data-{name}=\"");
    let Some(start) = dom.find(&key).map(|i| i + key.len()) else {
        return String::new();
    };
    let end = start + dom[start..].find('"').unwrap_or(0);
    dom[start..end]
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

/// Draws `page` at `width` px, audits it and writes `<name>-<width>.png` among the artifacts.
pub fn audit(page: &Path, name: &str, width: u32) -> Audit {
    let dir = tempfile::tempdir().unwrap();
    let html = std::fs::read_to_string(page).unwrap();
    std::fs::write(artifacts().join(format!("{name}.html")), &html).unwrap();
    std::fs::write(
        dir.path().join("page.html"),
        html.replacen("</body>", &audit_script(), 1),
    )
    .unwrap();
    let first = frame(dir.path(), width, 2000);
    let output = browser(dir.path())
        .arg("--window-size=1300,1000")
        .arg("--dump-dom")
        .arg(format!("file://{}", first.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&output.stdout);
    let number = |name: &str| attribute(&dom, name).parse::<u64>().unwrap_or(0);
    let audit = Audit {
        width: number("width"),
        page_width: number("page-width"),
        height: number("height"),
        json: attribute(&dom, "json"),
        wide: attribute(&dom, "wide"),
        empty: attribute(&dom, "empty"),
        charts: number("charts"),
        error: attribute(&dom, "error"),
    };
    assert_eq!(
        audit.width,
        u64::from(width),
        "the audit did not run: {dom}"
    );
    let height = audit.height.clamp(600, 16_000);
    let shot = frame(dir.path(), width, height);
    let png = artifacts().join(format!("{name}-{width}.png"));
    let output = browser(dir.path())
        .arg(format!("--window-size={},{height}", width.max(500)))
        .arg(format!("--screenshot={}", png.display()))
        .arg(format!("file://{}", shot.display()))
        .output()
        .unwrap();
    assert!(
        output.status.success() && png.is_file(),
        "no screenshot: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    audit
}

/// Fails on anything a reader would trip over at one width: a render error, JSON text shown,
/// an element wider than the viewport, sideways scrolling, a chart without data; with
/// `charts`, no chart at all.
pub fn assert_audit(a: &Audit, name: &str, width: u32, charts: bool) {
    assert_eq!(a.error, "", "{name} at {width} px: render error");
    assert_eq!(
        a.json, "",
        "{name} at {width} px: JSON object text is visible"
    );
    assert_eq!(
        a.wide, "",
        "{name} at {width} px: elements wider than the viewport"
    );
    assert!(
        a.page_width <= a.width,
        "{name} at {width} px: the page scrolls sideways ({} px)",
        a.page_width
    );
    assert_eq!(a.empty, "", "{name} at {width} px: charts without data");
    if charts {
        assert!(a.charts > 0, "{name} at {width} px: no chart drawn");
    }
}

/// The audit's findings from its JSON value.
pub fn audit_of(value: &serde_json::Value) -> Audit {
    let number = |key: &str| value[key].as_u64().unwrap_or(0);
    let text = |key: &str| value[key].as_str().unwrap_or_default().to_string();
    Audit {
        width: number("width"),
        page_width: number("page_width"),
        height: number("height"),
        json: text("json"),
        wide: text("wide"),
        empty: text("empty"),
        charts: number("charts"),
        error: text("error"),
    }
}

/// Audits `page` at every width and fails on anything a reader would trip over. Returns the
/// number of charts drawn.
pub fn assert_readable(page: &Path, name: &str) -> u64 {
    let mut charts = 0;
    for width in WIDTHS {
        let a = audit(page, name, width);
        assert_audit(&a, name, width, true);
        charts = a.charts;
    }
    charts
}
