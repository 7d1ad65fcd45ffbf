//! A minimal OpenAI-compatible server on a loopback port that records every request it reads
//! (method, path, headers, JSON body) and answers chat/completions with exactly `max_tokens`
//! one-word tokens, streamed or not, so a flag that only changes the wire is observable.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

/// One request as read from the socket.
#[derive(Debug, Clone)]
pub(crate) struct Captured {
    pub(crate) method: String,
    pub(crate) path: String,
    /// Header names lower-case, except the ones every client sends differently.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Value,
}

/// The running server; it lives until the test process ends.
#[derive(Debug, Clone)]
pub(crate) struct CaptureServer {
    pub(crate) url: String,
    requests: Arc<Mutex<Vec<Captured>>>,
}

impl CaptureServer {
    pub(crate) fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
        let url = format!("http://{}", listener.local_addr().expect("local address"));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&requests);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let sink = Arc::clone(&sink);
                std::thread::spawn(move || serve(stream, &sink));
            }
        });
        CaptureServer { url, requests }
    }

    /// Takes the requests read so far (completion requests only when `completions_only`).
    pub(crate) fn take(&self) -> Vec<Captured> {
        std::mem::take(&mut *self.requests.lock().expect("capture lock"))
    }
}

fn serve(stream: TcpStream, sink: &Mutex<Vec<Captured>>) {
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream);
    while let Some(request) = read_request(&mut reader) {
        let reply = answer(&request);
        sink.lock().expect("capture lock").push(request);
        if writer.write_all(&reply).is_err() {
            return;
        }
    }
}

fn read_request(reader: &mut BufReader<TcpStream>) -> Option<Captured> {
    let mut line = String::new();
    reader.read_line(&mut line).ok().filter(|n| *n > 0)?;
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_string(), parts.next()?.to_string());
    let (mut headers, mut length) = (Vec::new(), 0usize);
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).ok().filter(|n| *n > 0)?;
        let header = header.trim_end();
        if header.is_empty() {
            break;
        }
        let (name, value) = header.split_once(':')?;
        let (name, value) = (name.to_ascii_lowercase(), value.trim().to_string());
        if name == "content-length" {
            length = value.parse().ok()?;
        } else if !matches!(name.as_str(), "host" | "user-agent" | "accept") {
            headers.push((name, without_run_token(value)));
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
    headers.sort();
    Some(Captured {
        method,
        path,
        headers,
        body,
    })
}

/// A correlation id (`<run>-<step>-<index>`) with its run token, drawn anew by every run,
/// replaced by `RUN`; any other value as it is.
fn without_run_token(value: String) -> String {
    match value.split_once('-') {
        Some((run, rest)) if run.len() == 12 && run.bytes().all(|b| b.is_ascii_hexdigit()) => {
            format!("RUN-{rest}")
        }
        _ => value,
    }
}

fn answer(request: &Captured) -> Vec<u8> {
    let is_completion = request.path.ends_with("/completions");
    if request.path.starts_with("/monitor") && request.path.ends_with("metrics") {
        return plain(METRICS);
    }
    if request.path.ends_with("/models") {
        return whole("200 OK", &json!({"object": "list", "data": [{"id": "m"}]}));
    }
    if request.body.to_string().contains("fail-me") {
        return whole(
            "500 Internal Server Error",
            &json!({"error": {"message": "asked to fail"}}),
        );
    }
    if !is_completion {
        return whole("404 Not Found", &json!({"error": {"message": "not here"}}));
    }
    let chat = request.path.ends_with("/chat/completions");
    let tokens = request.body["max_tokens"]
        .as_u64()
        .or_else(|| request.body["max_completion_tokens"].as_u64())
        .unwrap_or(4);
    let usage =
        json!({"prompt_tokens": 8, "completion_tokens": tokens, "total_tokens": 8 + tokens});
    let piece = |text: &str| {
        if chat {
            json!({"index": 0, "delta": {"content": text}, "finish_reason": null})
        } else {
            json!({"index": 0, "text": text, "finish_reason": null})
        }
    };
    if request.body["stream"] != json!(true) {
        let text = vec!["a"; tokens as usize].join(" ");
        let choice = if chat {
            json!({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"})
        } else {
            json!({"index": 0, "text": text, "finish_reason": "length"})
        };
        return whole(
            "200 OK",
            &json!({"id": "x", "choices": [choice], "usage": usage}),
        );
    }
    let mut events = String::new();
    for n in 0..tokens {
        let text = if n == 0 { "a" } else { " a" };
        events += &format!("data: {}\n\n", json!({"id": "x", "choices": [piece(text)]}));
    }
    events += &format!(
        "data: {}\n\n",
        json!({"id": "x", "choices": [], "usage": usage})
    );
    events += "data: [DONE]\n\n";
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n",
        events.len()
    );
    [head.into_bytes(), events.into_bytes()].concat()
}

fn whole(status: &str, body: &Value) -> Vec<u8> {
    let body = body.to_string();
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// A quiet vLLM server's `/metrics`: nothing running, nothing finished.
const METRICS: &str = "# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name=\"m\"} 0
vllm:num_requests_waiting{model_name=\"m\"} 0
vllm:request_success_total{model_name=\"m\",finished_reason=\"stop\"} 0
vllm:generation_tokens_total{model_name=\"m\"} 0
vllm:prompt_tokens_total{model_name=\"m\"} 0
vllm:kv_cache_usage_perc{model_name=\"m\"} 0
";

fn plain(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}
