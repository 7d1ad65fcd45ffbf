//! A vision chat server for the image tests: it reads the size of every `image_url` part from
//! the PNG header inside its `data:` URL (with its own base64 decoder, independent of
//! goodput's encoder), logs them per message, and answers after a delay that depends on the
//! images' pixels — whole JSON, or streamed as two SSE events with a fixed gap.

use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

/// One request's messages as `(role, sizes of its images)`.
pub type Request = Vec<(String, Vec<(u32, u32)>)>;

/// What the server saw, one entry per request.
pub type Seen = Arc<Mutex<Vec<Request>>>;

/// Gap between a streamed answer's first and last event.
pub const STREAM_GAP: Duration = Duration::from_millis(10);

/// How long the server waits before the first token of a request with these image sizes.
pub type Delay = fn(&[(u32, u32)]) -> Duration;

/// No delay.
pub fn instant(_: &[(u32, u32)]) -> Duration {
    Duration::ZERO
}

/// Starts the server; returns its `/v1` URL.
pub fn server(seen: Seen, delay: Delay) -> String {
    let address = super::spawn_server(move |stream| serve(stream, &seen, delay));
    format!("http://{address}/v1")
}

fn serve(stream: TcpStream, seen: &Seen, delay: Delay) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let Some((_, body)) = super::read_request(&mut reader) else {
            return;
        };
        // goodput also scrapes `GET /metrics`: no body, no metrics here.
        let Ok(request) = serde_json::from_slice::<Value>(&body) else {
            let missing = "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n";
            if writer.write_all(missing.as_bytes()).is_err() {
                return;
            }
            continue;
        };
        let messages = messages(&request);
        let all: Vec<(u32, u32)> = messages.iter().flat_map(|m| m.1.clone()).collect();
        seen.lock().unwrap().push(messages);
        let wait = delay(&all);
        if request["stream"] == true {
            stream_answer(&mut writer, wait);
            return;
        }
        std::thread::sleep(wait);
        let answer = r#"{"id":"x","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"a cat"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}"#;
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
            answer.len()
        );
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

/// The head at once, the first token after `wait`, the last [`STREAM_GAP`] later; then the
/// connection closes (the body ends with it).
fn stream_answer(writer: &mut TcpStream, wait: Duration) {
    let event = |content: &str, finish: &str| {
        format!(
            "data: {{\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"created\":0,\"model\":\"m\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{content}\"}},\"finish_reason\":{finish}}}]}}\n\n"
        )
    };
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
    let _ = writer.write_all(head.as_bytes());
    let _ = writer.flush();
    std::thread::sleep(wait);
    let _ = writer.write_all(event("a", "null").as_bytes());
    let _ = writer.flush();
    std::thread::sleep(STREAM_GAP);
    let last = format!("{}data: [DONE]\n\n", event(" cat", "\"stop\""));
    let _ = writer.write_all(last.as_bytes());
    let _ = writer.flush();
}

/// Each message's role and the sizes of its images, read from their PNG headers.
fn messages(request: &Value) -> Request {
    let mut out = Vec::new();
    for message in request["messages"].as_array().unwrap() {
        let mut sizes = Vec::new();
        for part in message["content"].as_array().into_iter().flatten() {
            if part["type"] == "image_url" {
                let url = part["image_url"]["url"].as_str().unwrap();
                let png = decode(url.strip_prefix("data:image/png;base64,").unwrap());
                assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
                let be = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().unwrap());
                sizes.push((be(16), be(20)));
            }
        }
        let role = message["role"].as_str().unwrap_or("").to_string();
        out.push((role, sizes));
    }
    out
}

/// Standard base64, independent of goodput's encoder.
pub fn decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let mut out = Vec::new();
    for group in text.as_bytes().chunks(4) {
        let data: Vec<u8> = group
            .iter()
            .filter(|&&c| c != b'=')
            .map(|&c| value(c))
            .collect();
        let n = data
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &v)| n | (u32::from(v) << (18 - 6 * i)));
        for i in 0..data.len().saturating_sub(1) {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    out
}
