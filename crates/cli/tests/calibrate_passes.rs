//! `goodput calibrate --passes` against a streaming chat server written here with exact
//! timing: four slots, a request waiting for a free one in arrival order, its first token a
//! fixed delay after it got one, each next a fixed gap later (by absolute deadlines, so no
//! sleep's overshoot accumulates). The server does not report its slots: calibrate must find
//! them from a wave of requests sent together (four of eight ran at once). A server that slows by
//! a quarter after the first pass must be reported with the repeatability computed by hand;
//! a steady one with none, and its misfit (a first token sooner the longer the prompt) then put
//! down to the engine's form, not noise, while the plain server is fitted well, its fixed
//! first-token delay read as a latency holding the slot; one
//! that fails in the second pass leaves the first pass (and what the second measured) to fit.
#![allow(clippy::unwrap_used)]

mod support;

use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{
    EVENT_STREAM_HEAD, calibrate_json, goodput, ok, other_reply, prompt_words, read_request,
    token_event,
};

/// Timing of the first pass (and of a steady server): first token, then the gap per token.
const FAST: (u64, f64) = (100, 6.0);
/// A quarter slower.
const SLOW: (u64, f64) = (125, 7.5);
/// Requests the server runs at once.
const SLOTS: u32 = 4;
/// The first wave calibrate sends to find them (`goodput_core`'s `WAVES[0]`).
const WAVE: u64 = 8;
/// Requests of the probes after the passes: the step budget's (one decoding, one long
/// prompt), then the queue order's two rounds (a request per slot, four queued behind them).
const AFTER_THE_PASSES: u64 = 2 + 2 * (SLOTS as u64 + 4);

/// The server's free slots, taken in arrival order: a request draws a ticket and waits until
/// it is the next to serve and a slot is free (a plain condition would let a request arriving
/// the moment a slot frees take it before the one woken for it, which on a loaded machine
/// moved a queued probe's median TTFT by a round).
struct Slots {
    state: Mutex<SlotState>,
    freed: Condvar,
}

/// Free slots, the next ticket to draw, and the ticket served next.
struct SlotState {
    free: u32,
    drawn: u64,
    next: u64,
}

impl Slots {
    fn new(free: u32) -> Self {
        let state = SlotState {
            free,
            drawn: 0,
            next: 0,
        };
        Slots {
            state: Mutex::new(state),
            freed: Condvar::new(),
        }
    }

    fn take(&self) {
        let mut state = self.state.lock().unwrap();
        let ticket = state.drawn;
        state.drawn += 1;
        while state.next != ticket || state.free == 0 {
            state = self.freed.wait(state).unwrap();
        }
        state.free -= 1;
        state.next += 1;
        drop(state);
        self.freed.notify_all();
    }

    fn release(&self) {
        self.state.lock().unwrap().free += 1;
        self.freed.notify_all();
    }
}

/// Chat completions served so far, from which one on the server is [`SLOW`], and from which
/// one on it fails them (HTTP 500).
struct Counter {
    served: AtomicU64,
    slow_from: AtomicU64,
    fail_from: AtomicU64,
    slots: Slots,
    /// Whether a longer prompt gets its first token sooner (4 s / its words more): no
    /// engine's prefill does that.
    sooner_for_longer: AtomicBool,
}

/// Holds the other tests of this file off: their servers time answers by sleeping, and the
/// server without a limit's fit (its Jacobian on every core, minutes long) made a concurrent
/// pass's timings late by enough to move the slowed server's repeatability by 2 points.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static ALONE: Mutex<()> = Mutex::new(());
    ALONE.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Starts the server; its `/v1` URL and its counter.
fn server() -> (String, Arc<Counter>) {
    server_with(SLOTS)
}

/// Starts the server with `slots` slots.
fn server_with(slots: u32) -> (String, Arc<Counter>) {
    let counter = Arc::new(Counter {
        served: AtomicU64::new(0),
        slow_from: AtomicU64::new(u64::MAX),
        fail_from: AtomicU64::new(u64::MAX),
        slots: Slots::new(slots),
        sooner_for_longer: AtomicBool::new(false),
    });
    let shared = Arc::clone(&counter);
    let address = support::spawn_server(move |stream| serve(stream, &shared));
    (format!("http://{address}/v1"), counter)
}

fn serve(stream: TcpStream, counter: &Counter) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    while let Some((path, body)) = read_request(&mut reader) {
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        if path.ends_with("/chat/completions") && request["stream"] == true {
            let index = counter.served.fetch_add(1, Ordering::SeqCst);
            if index >= counter.fail_from.load(Ordering::SeqCst) {
                let failed = "HTTP/1.1 500 Internal Server Error\r\ncontent-length: 0\r\n\r\n";
                let _ = writer.write_all(failed.as_bytes());
                return;
            }
            let slow = index >= counter.slow_from.load(Ordering::SeqCst);
            counter.slots.take();
            let started = Instant::now();
            let timing = if slow { SLOW } else { FAST };
            let sooner = counter.sooner_for_longer.load(Ordering::SeqCst);
            stream_answer(&mut writer, &request, started, (timing, sooner));
            counter.slots.release();
            return;
        }
        let reply = other_reply(&path, "");
        if writer.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

/// `max_tokens` tokens, the first `ttft_ms` after `read` (its slot taken), the k-th `k · gap_ms` after the
/// first; the prompt counted as its words; then the connection closes.
fn stream_answer(
    writer: &mut TcpStream,
    request: &Value,
    read: Instant,
    ((ttft_ms, gap_ms), sooner_for_longer): ((u64, f64), bool),
) {
    let tokens = request["max_tokens"]
        .as_u64()
        .or(request["max_completion_tokens"].as_u64())
        .unwrap_or(16)
        .max(1);
    let prompt = prompt_words(request);
    let _ = writer.write_all(EVENT_STREAM_HEAD.as_bytes());
    let _ = writer.flush();
    let inverse = if sooner_for_longer {
        4000 / prompt.max(1)
    } else {
        0
    };
    let first = read + Duration::from_millis(ttft_ms + inverse);
    for k in 0..tokens {
        let due = first + Duration::from_secs_f64(k as f64 * gap_ms / 1e3);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        let usage = (k + 1 == tokens).then_some((prompt, tokens));
        if writer.write_all(token_event(usage).as_bytes()).is_err() {
            return;
        }
        let _ = writer.flush();
    }
    let _ = writer.write_all(b"data: [DONE]\n\n");
    let _ = writer.flush();
}

/// `goodput calibrate --json` on `url` with `passes`; its JSON and what it printed on stderr.
fn calibrate_with_log(url: &str, passes: &str, dir: &std::path::Path) -> (Value, String) {
    let out = dir.join(format!("calibrated-{passes}.toml"));
    calibrate_json(url, ("3", passes), &out)
}

fn calibrate(url: &str, passes: &str, dir: &std::path::Path) -> Value {
    calibrate_with_log(url, passes, dir).0
}

/// One pass's relative standard deviation when the passes measured `a` and `b`.
fn relative_sd(a: f64, b: f64) -> f64 {
    2f64.sqrt() * (a - b).abs() / (a + b)
}

#[test]
fn a_server_that_slows_after_the_first_pass_is_reported_by_its_repeatability() {
    let _alone = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let (url, counter) = server();
    // One pass: the wave that finds the slots, how many chat requests a pass sends, and no
    // repeatability to report.
    let one = calibrate(&url, "1", dir.path());
    assert!(one["repeatability"].is_null(), "{one}");
    assert!(one["fit"]["server_noise"].is_null(), "{one}");
    assert_eq!(one["facts"]["slots"], SLOTS, "{}", one["facts"]);
    let served = counter.served.swap(0, Ordering::SeqCst);
    let residuals = one["fit"]["residuals"].as_array().unwrap();
    let planned: u64 = residuals
        .iter()
        .filter(|r| r["metric"] == "ttft")
        .map(|r| r["shape"]["requests"].as_u64().unwrap())
        .sum();
    assert_eq!(served, WAVE + planned + AFTER_THE_PASSES, "{one}");
    // Each request timed alone: a long prompt never slows another's stream, so the server's
    // step budget stays unknown.
    assert!(one["facts"]["batch_tokens"].is_null(), "{}", one["facts"]);
    let sources = one["facts"]["sources"].to_string();
    assert!(sources.contains("did not slow its steps"), "{sources}");
    counter.slow_from.store(WAVE + planned, Ordering::SeqCst);

    let two = calibrate(&url, "2", dir.path());
    assert_eq!(
        counter.served.load(Ordering::SeqCst),
        WAVE + 2 * planned + AFTER_THE_PASSES
    );
    let r = &two["repeatability"];
    assert_eq!(r["passes"], 2, "{r}");
    assert_eq!(r["probes"], residuals.len() / 2);
    // TTFT 100 → 125 ms, TPOT 6 → 7.5 ms, E2E in the same ratio: 15.7 % each.
    let want = relative_sd(100.0, 125.0);
    for figure in ["ttft", "tpot", "e2e"] {
        let got = r[figure].as_f64().unwrap();
        assert!(
            (got - want).abs() < 0.012,
            "{figure}: {got} against {want}: {r}"
        );
    }
    let noise = two["fit"]["server_noise"].as_f64().unwrap();
    assert!((noise - want).abs() < 0.012, "{noise}");
    // The fit sees each probe's mean of the two passes: TTFT 112.5 ms, 12.5 ms from either
    // pass's; ±6 ms leaves room for a loaded machine's late wake-ups (+3.2 ms seen once while
    // another server started) and still tells the mean from a pass.
    let ttft = two["fit"]["residuals"][0]["measured"].as_f64().unwrap();
    assert!((ttft - 0.1125).abs() < 0.006, "{ttft}");
}

#[test]
fn a_steady_server_repeats_itself_and_its_misfit_is_the_engines_form() {
    let _alone = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let (url, counter) = server();
    counter.sooner_for_longer.store(true, Ordering::SeqCst);
    let two = calibrate(&url, "2", dir.path());
    let r = &two["repeatability"];
    // Sleeps of a few ms on a loaded 2-core machine: a prefill probe's TPOT (three gaps of
    // 6 ms, one woken 1 ms late moves it by 5.6 %) repeats within a few per cent (6.0 % in
    // the clean-clone CI of 2026-12-05), well below the 15.7 % of a server that slowed.
    for figure in ["ttft", "tpot", "e2e"] {
        let got = r[figure].as_f64().unwrap();
        assert!(got < 0.10, "{figure}: {r}");
    }
    // A first token sooner for a longer prompt is no engine's prefill: the fit is poor, and
    // the passes agreeing says why.
    let fit = &two["fit"];
    assert_eq!(fit["poor"], true, "{fit}");
    let problems = fit["problems"].to_string();
    assert!(
        problems.contains("the misfit is the engine's form"),
        "{problems}"
    );
}

#[test]
fn a_server_failing_in_the_second_pass_leaves_the_first_to_fit() {
    let _alone = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let (url, counter) = server();
    let one = calibrate(&url, "1", dir.path());
    let per_pass = counter.served.swap(0, Ordering::SeqCst);
    // The second pass's third probe fails: its first two are measured twice.
    let first_two: u64 = one["fit"]["residuals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["metric"] == "ttft")
        .take(2)
        .map(|r| r["shape"]["requests"].as_u64().unwrap())
        .sum();
    counter
        .fail_from
        .store(per_pass - AFTER_THE_PASSES + first_two, Ordering::SeqCst);
    let (two, log) = calibrate_with_log(&url, "2", dir.path());
    assert!(log.contains("pass 2 stopped at probe 3"), "{log}");
    assert_eq!(two["repeatability"]["probes"], 2, "{two}");
    assert_eq!(
        two["fit"]["residuals"].as_array().unwrap().len(),
        one["fit"]["residuals"].as_array().unwrap().len()
    );
}

/// The plain server (a first token 100 ms after a slot is free, whatever the prompt, then 6
/// ms a token) is close to the engine's form: four slots found by the wave, the fixed delay
/// read as a latency that holds the slot (the queued requests of the probe at twice the slots
/// wait for it after a slot frees: before the engine could place it there, it was read as
/// latency before the queue and their TTFT came out a third low, 328 ms against 482), a good
/// fit (RMS under 10 %), every figure of one client and of the queued probe within 5 %.
#[test]
fn a_fixed_first_token_delay_is_fitted_as_a_latency_holding_the_slot() {
    let _alone = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let (url, _) = server();
    let out = dir.path().join("calibrated.toml");
    let output = ok(goodput()
        .args([
            "calibrate",
            "--target",
            &url,
            "--seed",
            "3",
            "--repeats",
            "3",
        ])
        .args(["--passes", "1", "--json", "--out"])
        .arg(&out)
        .output()
        .unwrap());
    let fit: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(fit["facts"]["slots"], SLOTS, "{}", fit["facts"]);
    let fit = &fit["fit"];
    assert_eq!(fit["poor"], false, "{fit}");
    for r in fit["residuals"].as_array().unwrap() {
        let concurrency = r["shape"]["concurrency"].as_u64().unwrap();
        if concurrency == 1 || concurrency == 2 * u64::from(SLOTS) {
            let error = r["relative_error"].as_f64().unwrap();
            assert!(error.abs() < 0.05, "{r}");
        }
    }
    assert_eq!(fit["constants"]["latency_holds_slot"], true, "{fit}");
    let latency = fit["table"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "slot_setup_latency")
        .unwrap();
    let ms = latency["value"].as_f64().unwrap();
    // The server's 100 ms and the loopback's round trip: 100.1 ms, or 92 where the fit
    // trades some of it against the four 512-token prompts, which the engine prefills in
    // chunks of its step budget and this server at once (their TTFT +15 %).
    assert!((85.0..=110.0).contains(&ms), "{latency}: {fit}");
}

/// A server without a limit (every request served at once, its first token 100 ms after it
/// arrives, then 6 ms a token): the waves find all 128 at once, the plan's probe at 256 does
/// not queue either, so it is calibrated as running at least 256; its prompts cost nothing
/// however many arrive together, so its steps are left unbounded. Before, it was modelled
/// with 128 slots and a 2,048-token step: the 256 clients queued and 128 prompts of 512
/// tokens took 460 ms to a first token against 102 (RMS 88 %). The step-budget probe's long
/// prompt runs beside its decoding stream, which now decides a near tie: on CI (2026-12-07)
/// the unbounded fit did not come a fifth lower in squared RMS error than the bounded one
/// (13.1 %), and the bound was kept. Here: robust losses 0.0060 bounded, 0.0021 unbounded
/// (RMS 14.3 % and 1.4 %).
#[test]
fn a_server_without_a_limit_is_calibrated_without_one() {
    let _alone = one_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let (url, _) = server_with(u32::MAX);
    let out = dir.path().join("calibrated.toml");
    let output = ok(goodput()
        .args(["calibrate", "--target", &url, "--seed", "5"])
        .args(["--repeats", "1", "--passes", "1", "--json", "--out"])
        .arg(&out)
        .output()
        .unwrap());
    let fit: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(fit["facts"]["slots"], 256, "{}", fit["facts"]);
    let sources = fit["facts"]["sources"].to_string();
    assert!(
        sources.contains("prompts take nothing from the decodes' steps"),
        "{sources}"
    );
    let fit = &fit["fit"];
    assert_eq!(fit["poor"], false, "{fit}");
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("max_num_seqs = 256"), "{text}");
    assert!(!text.contains("max_num_batched_tokens = 2048"), "{text}");
}
