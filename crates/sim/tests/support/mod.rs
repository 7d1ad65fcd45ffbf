//! Test helpers: a minimal hyper HTTP/1.1 client, SSE parsing, simulator configurations,
//! engine requests and the table of published checks ([`published`]).
#![allow(clippy::unwrap_used, dead_code, unreachable_pub)]

pub mod published;
pub mod sharegpt;

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use goodput_sim::SimConfig;
use goodput_sim::config::{EngineConfig, FixedTimingConfig};
use goodput_sim::engine::{EngineEvent, EngineRequest};
use goodput_sim::virtual_time::Simulation;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::HeaderMap;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// A fixed-timing simulator with the given timings (ms), slots and context.
pub fn fixed_config(ttft_ms: u64, itl_ms: u64) -> SimConfig {
    let fixed = FixedTimingConfig {
        ttft: Duration::from_millis(ttft_ms),
        itl: Duration::from_millis(itl_ms),
        slots: 16,
        max_model_len: 4096,
        ..FixedTimingConfig::default()
    };
    SimConfig {
        engine: EngineConfig::Fixed(fixed),
        ..SimConfig::default()
    }
}

/// Opens an HTTP/1.1 client connection over any transport.
pub async fn handshake<I>(io: I) -> SendRequest<Full<Bytes>>
where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, connection) = http1::handshake(TokioIo::new(io)).await.unwrap();
    tokio::spawn(async move {
        let _ = connection.await;
    });
    sender
}

/// Opens an HTTP/1.1 client connection to `addr`.
pub async fn connect(addr: SocketAddr) -> SendRequest<Full<Bytes>> {
    handshake(TcpStream::connect(addr).await.unwrap()).await
}

/// Builds a request with an optional JSON body.
pub fn request(method: Method, path: &str, body: Option<&Value>) -> Request<Full<Bytes>> {
    let bytes = body.map_or_else(Bytes::new, |body| {
        Bytes::from(serde_json::to_vec(body).unwrap())
    });
    Request::builder()
        .method(method)
        .uri(path)
        .header("host", "sim")
        .header("content-type", "application/json")
        .body(Full::new(bytes))
        .unwrap()
}

/// Sends a request and returns the response head (the body is read by the caller).
pub async fn send(
    sender: &mut SendRequest<Full<Bytes>>,
    request: Request<Full<Bytes>>,
) -> hyper::Result<Response<Incoming>> {
    sender.ready().await?;
    sender.send_request(request).await
}

/// A whole response.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.text()))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(|value| value.to_str().unwrap())
    }

    /// The `data:` payloads of an event stream.
    pub fn events(&self) -> Vec<String> {
        sse_payloads(&self.text())
    }

    /// The JSON payloads of an event stream (everything but `[DONE]`).
    pub fn json_events(&self) -> Vec<Value> {
        self.events()
            .iter()
            .filter(|e| *e != "[DONE]")
            .map(|e| serde_json::from_str(e).unwrap())
            .collect()
    }
}

/// Sends a request on a new connection to `addr` and reads the whole response.
pub async fn call(addr: SocketAddr, method: Method, path: &str, body: Option<&Value>) -> Reply {
    let mut sender = connect(addr).await;
    let response = send(&mut sender, request(method, path, body))
        .await
        .unwrap();
    read_reply(response).await.unwrap()
}

/// `POST path` with a JSON body.
pub async fn post(addr: SocketAddr, path: &str, body: &Value) -> Reply {
    call(addr, Method::POST, path, Some(body)).await
}

/// Reads a whole response; `Err` if the body is cut off.
pub async fn read_reply(response: Response<Incoming>) -> hyper::Result<Reply> {
    let (parts, body) = response.into_parts();
    let body = body.collect().await?.to_bytes();
    Ok(Reply {
        status: parts.status,
        headers: parts.headers,
        body,
    })
}

/// The payloads of `data:` lines, one per event.
pub fn sse_payloads(text: &str) -> Vec<String> {
    text.split("\n\n")
        .filter(|event| !event.is_empty())
        .map(|event| {
            event
                .strip_prefix("data: ")
                .unwrap_or_else(|| panic!("not an SSE event: {event:?}"))
                .to_string()
        })
        .collect()
}

/// `cl100k_base` token count of `text`.
pub fn cl100k_count(text: &str) -> usize {
    tiktoken_rs::cl100k_base_singleton()
        .encode_ordinary(text)
        .len()
}

/// OpenAI's chat counting rule: 3 + role + content per message, plus 3 for the reply.
pub fn chat_prompt_tokens(messages: &[(&str, &str)]) -> u64 {
    let per_message: usize = messages
        .iter()
        .map(|(role, content)| 3 + cl100k_count(role) + cl100k_count(content))
        .sum();
    (per_message + 3) as u64
}

/// An engine request of `prompt` tokens (no prefix to share) asking for `output` tokens, all
/// generated (EOS ignored).
pub fn engine_request(id: u64, prompt: u32, output: u32) -> EngineRequest {
    EngineRequest {
        id,
        prompt_tokens: prompt,
        block_hashes: Vec::new(),
        max_output_tokens: output,
        stop_after_tokens: output,
    }
}

/// Drives a closed loop on `sim`: `concurrency` clients, the k-th sending its first request at
/// `k · spacing`, each sending its next the instant its last finishes, until `total` requests
/// (ids in send order, `prompt`/`output` tokens each) were sent and every one has ended.
pub fn run_closed_loop(
    sim: &mut Simulation,
    (concurrency, total): (u64, u64),
    spacing: Duration,
    (prompt, output): (u32, u32),
) {
    let mut next = 0;
    while next < concurrency.min(total) {
        let start = spacing * u32::try_from(next).unwrap();
        sim.submit(start, engine_request(next, prompt, output));
        next += 1;
    }
    loop {
        let events = sim.run_next();
        if events.is_empty() {
            break;
        }
        let finished = events
            .iter()
            .filter(|e| {
                matches!(
                    e,
                    EngineEvent::Tokens {
                        finished: Some(_),
                        ..
                    }
                )
            })
            .count();
        for _ in 0..finished {
            if next < total {
                let now = sim.now();
                sim.submit(now, engine_request(next, prompt, output));
                next += 1;
            }
        }
    }
}
