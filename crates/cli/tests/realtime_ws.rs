//! `--api realtime` end to end against a WebSocket server written here with exact timing (an
//! OpenAI Realtime-style session): it times every `input_audio_buffer.append` as it arrives,
//! acknowledges the commit at once (`response.created`), and answers exactly 300 ms after the
//! commit with 5 text deltas 20 ms apart (a token each), then `response.done`. So: 2 s of audio in 100 ms
//! chunks takes 2 s to send (20 appends, the last 1.9 s after the first, 96 000 PCM16 bytes
//! at 24 kHz); the latency from the end of speech to the first delta is 300 ms; TPOT 20 ms.
//! A model named `surprise` gets an unknown event type, `hangup` a socket closed mid-session:
//! failures with the server's words. The embedded simulator serves both dialects (a fixed
//! engine: 40 ms from the end of speech to the first delta).
#![allow(clippy::unwrap_used, clippy::result_large_err)]

mod support;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use support::{goodput, read_json, validate_against_schema};
use tokio_tungstenite::tungstenite::Message;

/// Per session: the arrival of each append (since the session opened) and its audio bytes.
#[derive(Debug, Default, Clone)]
struct Session {
    appends: Vec<Duration>,
    bytes: usize,
    committed: bool,
}

type Seen = Arc<Mutex<Vec<Session>>>;

fn decode_base64(text: &str) -> usize {
    let digits = text.trim_end_matches('=').len();
    digits * 6 / 8
}

async fn session(stream: tokio::net::TcpStream, seen: Seen) {
    let mut path = String::new();
    let callback = |request: &http::Request<()>, response| {
        path = request.uri().to_string();
        Ok(response)
    };
    let Ok(mut socket) = tokio_tungstenite::accept_hdr_async(stream, callback).await else {
        return;
    };
    let opened = Instant::now();
    let mut record = Session::default();
    let _ = socket
        .send(Message::text(
            json!({"type": "session.created"}).to_string(),
        ))
        .await;
    while let Some(Ok(message)) = socket.next().await {
        let Message::Text(text) = message else {
            continue;
        };
        let event: Value = serde_json::from_str(text.as_str()).unwrap();
        match event["type"].as_str().unwrap() {
            "input_audio_buffer.append" => {
                record.appends.push(opened.elapsed());
                record.bytes += decode_base64(event["audio"].as_str().unwrap());
            }
            "input_audio_buffer.commit" => record.committed = true,
            "response.create" => break,
            _ => {}
        }
    }
    let committed = tokio::time::Instant::now();
    seen.lock().unwrap().push(record);
    let send = |event: Value| Message::text(event.to_string());
    let _ = socket.send(send(json!({"type": "response.created"}))).await;
    if path.contains("model=hangup") {
        let _ = socket.close(None).await;
        return;
    }
    if path.contains("model=surprise") {
        let _ = socket
            .send(send(
                json!({"type": "response.surprise", "detail": "not in any spec"}),
            ))
            .await;
    }
    for k in 0..5u32 {
        tokio::time::sleep_until(committed + Duration::from_millis(300 + 20 * u64::from(k))).await;
        let word = ["The", " cat", " sat", " on", " the"][k as usize];
        let delta = json!({"type": "response.text.delta", "delta": word});
        let _ = socket.send(send(delta)).await;
    }
    let done = json!({"type": "response.done", "response": {"status": "completed"}});
    let _ = socket.send(send(done)).await;
    while let Some(Ok(_)) = socket.next().await {}
}

/// Serves sessions on a loopback port (its own thread and runtime); the port.
fn start(seen: Seen) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            while let Ok((stream, _)) = listener.accept().await {
                let _ = stream.set_nodelay(true);
                tokio::spawn(session(stream, Arc::clone(&seen)));
            }
        });
    });
    port
}

fn run(port: u16, model: &str, extra: &[&str]) -> (bool, String, Value) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let target = format!("http://127.0.0.1:{port}/v1");
    let output = goodput()
        .args([
            "run", "--quiet", "--api", "realtime", "--target", &target, "--model", model,
        ])
        .args(["--warmup", "0", "--out", out.to_str().unwrap()])
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).to_string();
    let report = std::fs::read_to_string(out.join("report.json"))
        .map(|_| read_json(&out.join("report.json")))
        .unwrap_or(Value::Null);
    (output.status.success(), stderr, report)
}

fn ms(value: &Value) -> f64 {
    value.as_f64().unwrap()
}

#[test]
fn audio_is_paced_at_real_time_and_latency_runs_from_the_end_of_speech() {
    let seen: Seen = Arc::default();
    let port = start(Arc::clone(&seen));
    let args = [
        "--audio-seconds",
        "2",
        "--audio-chunk",
        "100ms",
        "--concurrency",
        "2",
        "--requests",
        "4",
    ];
    let (ok, stderr, report) = run(port, "m", &args);
    assert!(ok, "{stderr}");
    validate_against_schema(&report);
    let step = &report["steps"][0];
    assert_eq!(step["requests"]["completed"], 4, "{}", step["requests"]);
    let sessions = seen.lock().unwrap().clone();
    assert_eq!(sessions.len(), 4, "the server saw every session");
    for session in &sessions {
        assert!(session.committed);
        assert_eq!(session.appends.len(), 20, "{session:?}");
        assert_eq!(session.bytes, 96_000, "2 s of PCM16 at 24 kHz");
        let spoken = session.appends[19] - session.appends[0];
        assert!(
            spoken >= Duration::from_millis(1_890) && spoken < Duration::from_millis(2_100),
            "19 gaps of 100 ms: {spoken:?}"
        );
    }
    // From the end of speech to the first delta: the server's 300 ms.
    let from_speech = &step["latency_from_send_ms"]["ttft"];
    assert!(ms(&from_speech["min"]) >= 300.0, "{from_speech}");
    assert!(ms(&from_speech["p50"]) < 300.0 + 40.0, "{from_speech}");
    // The session's TTFT includes the 1.9 s of speech after the first chunk.
    assert!(ms(&step["latency_ms"]["ttft"]["min"]) >= 1_900.0 + 300.0);
    let tpot = &step["latency_ms"]["tpot"];
    assert!((ms(&tpot["p50"]) - 20.0).abs() < 3.0, "{tpot}");
}

#[test]
fn unknown_events_and_closed_sockets_are_failures_with_the_servers_words() {
    let seen: Seen = Arc::default();
    let port = start(Arc::clone(&seen));
    let args = [
        "--audio-seconds",
        "0.3",
        "--concurrency",
        "1",
        "--requests",
        "2",
    ];
    let (_, stderr, report) = run(port, "surprise", &args);
    let requests = &report["steps"][0]["requests"];
    assert_eq!(
        requests["failed_by_kind"]["protocol"], 2,
        "{requests} {stderr}"
    );
    assert!(
        requests["failure_examples"]
            .to_string()
            .contains("response.surprise"),
        "{requests}"
    );
    let (_, stderr, report) = run(port, "hangup", &args);
    let requests = &report["steps"][0]["requests"];
    assert_eq!(
        requests["failed_by_kind"]["transport"], 2,
        "{requests} {stderr}"
    );
    assert!(
        requests["failure_examples"]
            .to_string()
            .contains("closed mid-session"),
        "{requests}"
    );
}

#[test]
fn the_embedded_simulator_serves_realtime_sessions() {
    // A fixed-timing engine: 40 ms to the first token, 10 ms per token after it. Half a second
    // of audio is a 13-token prefill and a 2-token answer. (The simulator's very first
    // answer pays a one-off start-up cost: the median of 4 sessions in turn is read.)
    let dir = tempfile::tempdir().unwrap();
    let sim = support::fixed_sim(dir.path(), "fixed", 40, 10);
    for dialect in ["openai", "vllm"] {
        let out = dir.path().join(dialect);
        let output = goodput()
            .args([
                "run",
                "--quiet",
                "--api",
                "realtime",
                "--realtime-dialect",
                dialect,
            ])
            .args([
                "--sim-config",
                sim.to_str().unwrap(),
                "--audio-seconds",
                "1",
            ])
            .args(["--requests", "4", "--concurrency", "1", "--warmup", "0"])
            .args(["--out", out.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let report = read_json(&out.join("report.json"));
        let step = &report["steps"][0];
        assert_eq!(
            step["requests"]["completed"], 4,
            "{dialect}: {}",
            step["requests"]
        );
        let from_speech = &step["latency_from_send_ms"]["ttft"];
        assert!(ms(&from_speech["min"]) >= 40.0, "{dialect}: {from_speech}");
        assert!(
            ms(&from_speech["p50"]) < 40.0 + 30.0,
            "{dialect}: {from_speech}"
        );
        let e2e = &step["latency_from_send_ms"]["e2e"];
        assert!(ms(&e2e["min"]) >= 40.0 + 10.0, "{dialect}: {e2e}");
    }
}

#[test]
fn realtime_sessions_run_in_virtual_time_exactly_as_the_engine_times_them() {
    // The fixed engine (40 ms to the first token, 10 ms per token) in virtual time: one second
    // of audio in 100 ms chunks is spoken in exactly 1 s of target time, then the answer (3
    // tokens per audio second) comes 40 ms after the end of speech and ends 2 × 10 ms later.
    let dir = tempfile::tempdir().unwrap();
    let sim = support::fixed_sim(dir.path(), "fixed", 40, 10);
    for dialect in ["openai", "vllm"] {
        let out = dir.path().join(dialect);
        let output = goodput()
            .args(["run", "--quiet", "--virtual-time", "--api", "realtime"])
            .args(["--realtime-dialect", dialect, "--audio-seconds", "1"])
            .args(["--sim-config", sim.to_str().unwrap()])
            .args(["--requests", "4", "--concurrency", "2", "--warmup", "0"])
            .args(["--out", out.to_str().unwrap()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(output.status.success(), "{dialect}: {stderr}");
        let step = &read_json(&out.join("report.json"))["steps"][0];
        assert_eq!(step["requests"]["completed"], 4, "{dialect}");
        let exact = |figures: &Value, figure: &str, want: f64| {
            for at in ["min", "p50", "max"] {
                let got = ms(&figures[figure][at]);
                assert!(
                    (got - want).abs() < 0.01,
                    "{dialect} {figure}: {}",
                    figures[figure]
                );
            }
        };
        exact(&step["latency_from_send_ms"], "ttft", 40.0);
        exact(&step["latency_from_send_ms"], "e2e", 60.0);
        exact(&step["latency_ms"], "ttft", 1_040.0);
        exact(&step["latency_ms"], "tpot", 10.0);
    }
}

#[test]
fn realtime_is_refused_where_it_cannot_apply() {
    let refused = |args: &[&str], words: &str| {
        let output = goodput()
            .args(["run", "--quiet"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(words), "{args:?}: {stderr}");
    };
    refused(
        &["--api", "chat", "--audio-seconds", "2"],
        "goes with --api realtime or --api transcriptions",
    );
    refused(
        &["--api", "realtime", "--audio-seconds", "0"],
        "--audio-seconds",
    );
}
