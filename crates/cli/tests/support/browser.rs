//! Headless Chromium driven like a person would use it, for the pages `goodput ui` serves:
//! open an address, click links and buttons, fill and submit forms, read what the page shows,
//! and audit its layout at a width ([`super::layout`]'s checks, with a screenshot among the
//! artifacts). Chromium is driven over the DevTools protocol through a pipe
//! (`--remote-debugging-pipe`: commands on its descriptor 3, replies and events on 4, each
//! message ended by a NUL byte), so no extra library or port is needed; every wait is bounded.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::layout::{self, Audit};

/// The longest any one wait may take.
const WAIT: Duration = Duration::from_secs(30);

/// A headless Chromium with one page attached.
pub struct Browser {
    child: Child,
    input: ChildStdin,
    replies: Receiver<Value>,
    next_id: u64,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts Chromium (no network but loopback) and attaches to a blank page 1280 px wide.
    pub fn start() -> Browser {
        let profile = tempfile::tempdir().unwrap();
        // The shell hands our pipes to Chromium as descriptors 3 and 4.
        let script = format!(
            "exec {} --headless --no-sandbox --disable-gpu --hide-scrollbars \
             --disable-background-networking --disable-component-update --disable-sync \
             --no-first-run --disable-extensions --proxy-server=127.0.0.1:9 \
             --remote-debugging-pipe --user-data-dir={} about:blank \
             3<&0 4>&1 </dev/null >/dev/null 2>/dev/null",
            super::chromium(),
            profile.path().display()
        );
        let mut child = Command::new("bash")
            .arg("-c")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let input = child.stdin.take().unwrap();
        let mut output = BufReader::new(child.stdout.take().unwrap());
        let (send, replies) = channel();
        std::thread::spawn(move || {
            let mut message = Vec::new();
            while output.read_until(0, &mut message).is_ok_and(|n| n > 0) {
                message.pop_if(|b| *b == 0);
                if let Ok(value) = serde_json::from_slice::<Value>(&message)
                    && send.send(value).is_err()
                {
                    return;
                }
                message.clear();
            }
        });
        let mut browser = Browser {
            child,
            input,
            replies,
            next_id: 0,
            session: String::new(),
            _profile: profile,
        };
        let target = browser.call("Target.createTarget", json!({"url": "about:blank"}));
        let target_id = target["targetId"].as_str().unwrap().to_string();
        let attached = browser.call(
            "Target.attachToTarget",
            json!({"targetId": target_id, "flatten": true}),
        );
        browser.session = attached["sessionId"].as_str().unwrap().to_string();
        browser.call("Page.enable", json!({}));
        browser.set_width(1280);
        browser
    }

    /// Sends a command (to the page once attached) and returns its result.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.try_call(method, params)
            .unwrap_or_else(|error| panic!("{method} failed: {error}"))
    }

    /// Sends a command and returns its result, or the error Chromium answered with.
    fn try_call(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if !self.session.is_empty() {
            message["sessionId"] = json!(self.session);
        }
        let mut bytes = serde_json::to_vec(&message).unwrap();
        bytes.push(0);
        self.input.write_all(&bytes).unwrap();
        self.input.flush().unwrap();
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let reply = self
                .replies
                .recv_timeout(left)
                .unwrap_or_else(|e| panic!("Chromium did not answer {method}: {e}"));
            if reply["id"] == id {
                return match reply.get("error") {
                    Some(error) => Err(error.clone()),
                    None => Ok(reply["result"].clone()),
                };
            }
        }
    }

    /// The value of a JavaScript expression in the page.
    pub fn eval(&mut self, expression: &str) -> Value {
        self.eval_across_navigation(expression)
            .unwrap_or_else(|error| panic!("{expression}: the page went away ({error})"))
    }

    /// The value of a JavaScript expression, or `Err` when the page was being replaced while
    /// it ran: Chromium then answers "Inspected target navigated or closed" or "Execution
    /// context was destroyed" — not a failure while a navigation is awaited. An exception the
    /// expression threw still fails.
    fn eval_across_navigation(&mut self, expression: &str) -> Result<Value, Value> {
        let result = self.try_call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        )?;
        if let Some(exception) = result.get("exceptionDetails") {
            let text = exception.to_string();
            if text.contains("Execution context was destroyed") {
                return Err(exception.clone());
            }
            panic!("{expression}: {exception}");
        }
        Ok(result["result"]["value"].clone())
    }

    /// Waits until `condition` (a JavaScript expression) is true; while it waits the page may
    /// be replaced (an evaluation cut by a navigation is asked again).
    pub fn wait_for(&mut self, condition: &str, what: &str) {
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            if self.eval_across_navigation(&format!("!!({condition})")) == Ok(json!(true)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!(
            "{what}: still not true after {WAIT:?} ({condition}); the page shows: {}",
            self.text("body")
        );
    }

    /// Does `action` (JavaScript that leads to another page) and waits for that page to be
    /// drawn.
    pub fn navigate_by(&mut self, action: &str) {
        self.eval("window.__goodputLeft = true");
        // The action may replace the page before its own evaluation answers.
        let _ = self.eval_across_navigation(action);
        self.wait_for(
            "!window.__goodputLeft && document.readyState === 'complete' && \
             (document.getElementById('render-status') || document.getElementById('error'))",
            &format!("the page after `{action}`"),
        );
    }

    /// Opens `url` and waits for it to be drawn.
    pub fn open(&mut self, url: &str) {
        let url = serde_json::to_string(url).unwrap();
        self.navigate_by(&format!("location.href = {url}"));
    }

    /// Clicks the element `selector` picks (a link or button) and waits for the next page.
    pub fn click(&mut self, selector: &str) {
        let s = serde_json::to_string(selector).unwrap();
        self.navigate_by(&format!(
            "(function () {{ var e = document.querySelector({s}); if (!e) throw new Error('no ' + {s}); e.click(); }})()"
        ));
    }

    /// Ticks the checkbox `selector` picks, as a click does (its change handlers run).
    pub fn tick(&mut self, selector: &str) {
        let s = serde_json::to_string(selector).unwrap();
        self.eval(&format!("document.querySelector({s}).click()"));
    }

    /// Types `value` into the field `selector` picks.
    pub fn fill(&mut self, selector: &str, value: &str) {
        let (s, v) = (
            serde_json::to_string(selector).unwrap(),
            serde_json::to_string(value).unwrap(),
        );
        self.eval(&format!(
            "(function () {{ var e = document.querySelector({s}); e.value = {v}; \
             e.dispatchEvent(new Event('input', {{bubbles: true}})); }})()"
        ));
    }

    /// The text the element `selector` picks shows (empty when there is none).
    pub fn text(&mut self, selector: &str) -> String {
        let s = serde_json::to_string(selector).unwrap();
        self.eval(&format!(
            "(function () {{ var e = document.querySelector({s}); return e ? e.innerText : ''; }})()"
        ))
        .as_str()
        .unwrap_or_default()
        .to_string()
    }

    /// The texts of every element `selector` picks.
    pub fn texts(&mut self, selector: &str) -> Vec<String> {
        let s = serde_json::to_string(selector).unwrap();
        let list = self.eval(&format!(
            "Array.prototype.map.call(document.querySelectorAll({s}), function (e) {{ return e.innerText; }})"
        ));
        list.as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// The page's address.
    pub fn location(&mut self) -> String {
        self.eval("location.href").as_str().unwrap().to_string()
    }

    /// Draws pages `width` px wide (phones included: no window minimum).
    pub fn set_width(&mut self, width: u32) {
        self.call(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": false}),
        );
    }

    /// Redraws the current page at `width` px, audits it, and keeps a full-page screenshot
    /// (`<name>-<width>.png`) and the page among the artifacts.
    pub fn audit(&mut self, name: &str, width: u32) -> Audit {
        self.set_width(width);
        self.navigate_by("location.reload()");
        let audit = layout::audit_of(&self.eval(layout::AUDIT_JS));
        assert_eq!(audit.width, u64::from(width), "the audit saw another width");
        let html = self.eval("document.documentElement.outerHTML");
        let dir = layout::artifacts();
        std::fs::write(
            dir.join(format!("{name}.html")),
            html.as_str().unwrap_or_default(),
        )
        .unwrap();
        let shot = self.call(
            "Page.captureScreenshot",
            json!({"format": "png", "captureBeyondViewport": true}),
        );
        let png = decode_base64(shot["data"].as_str().unwrap());
        std::fs::write(dir.join(format!("{name}-{width}.png")), png).unwrap();
        audit
    }

    /// Audits the current page at every width ([`layout::WIDTHS`]) and fails on anything a
    /// reader would trip over; with `charts`, a page without a chart fails too. Leaves the page
    /// drawn 1280 px wide.
    pub fn assert_readable(&mut self, name: &str, charts: bool) {
        for width in layout::WIDTHS {
            let audit = self.audit(name, width);
            layout::assert_audit(&audit, name, width, charts);
        }
        self.set_width(1280);
        self.navigate_by("location.reload()");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Standard base64 (what the protocol sends a screenshot as).
fn decode_base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let digits: Vec<u8> = text
        .bytes()
        .filter(|c| c.is_ascii_alphanumeric() || *c == b'+' || *c == b'/')
        .map(value)
        .collect();
    let mut out = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let bits = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, d)| acc | (u32::from(*d) << (18 - 6 * i)));
        let bytes = bits.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    out
}
