//! An OpenAI-compatible chat/completions server with exact timing that measures itself, for
//! goodput's benchmarks. It shares no code with goodput (plain tokio, hand-written HTTP/1.1), so
//! a figure that goodput's client and this server agree on is checked independently.
//!
//! Every request is answered after a fixed time to first token and a fixed inter-token latency
//! (no slots, nothing queues): streamed answers as chunked SSE (`data:` events, one token each,
//! a final event with `usage`, then `[DONE]`), non-streamed ones as one JSON body after
//! TTFT + (n − 1) × ITL. The server records, per request, when it had read the whole request
//! and when each token's write returned: its *own* first-token delay and token gaps, i.e. what
//! a client can at best observe. `GET /stats` returns their percentiles as JSON (requests that
//! arrived in the first `--skip` seconds after the first request are left out, like a client's
//! warm-up); `POST /reset` clears them.
//!
//! On Linux the server also knows when each request *reached* it (the kernel's receive
//! timestamp of the segment that completed it, `SO_TIMESTAMPNS`), before its own busy loop got
//! round to reading it: `inbound_ms` is that wait (arrival → read) and
//! `first_token_from_arrival_ms` the first-token delay a perfect client would measure — the
//! figure to hold a client to when the server itself is short of CPU.
//!
//! Usage: `exact-server --listen 127.0.0.1:8000 --ttft 100 --itl 10 --tokens 64 [--threads 2]
//! [--skip 3]` (times in milliseconds).

use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg, setsockopt, sockopt};
use nix::sys::time::TimeSpec;
use tokio::io::{AsyncWriteExt, Interest};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, sleep_until};

#[derive(Clone, Copy)]
struct Config {
    ttft: Duration,
    itl: Duration,
    tokens: u32,
    skip: Duration,
}

/// What the server observed of its own timing.
#[derive(Default)]
struct Stats {
    first_request: Option<Instant>,
    /// Request read → first token written, µs.
    first_token_us: Vec<u32>,
    /// Gaps between successive token writes, µs.
    gaps_us: Vec<u32>,
    /// Request read → last byte written, µs.
    e2e_us: Vec<u32>,
    /// Request arrived (kernel) → request read, µs.
    inbound_us: Vec<u32>,
    /// Request arrived (kernel) → first token written, µs.
    first_from_arrival_us: Vec<u32>,
    completed: u64,
    skipped: u64,
}

type Shared = Arc<Mutex<Stats>>;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let get = |name: &str, default: &str| -> String {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
            .unwrap_or_else(|| default.to_string())
    };
    let number = |name: &str, default: &str| -> f64 {
        let text = get(name, default);
        text.parse().unwrap_or_else(|_| {
            eprintln!("{name}: not a number: {text}");
            std::process::exit(2)
        })
    };
    let config = Config {
        ttft: Duration::from_secs_f64(number("--ttft", "100") / 1000.0),
        itl: Duration::from_secs_f64(number("--itl", "10") / 1000.0),
        tokens: number("--tokens", "64") as u32,
        skip: Duration::from_secs_f64(number("--skip", "0")),
    };
    let threads = number("--threads", "2") as usize;
    let listen = get("--listen", "127.0.0.1:8000");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .enable_all()
        .build();
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("cannot start the runtime: {error}");
            std::process::exit(1)
        }
    };
    runtime.block_on(serve(listen, config));
}

async fn serve(listen: String, config: Config) {
    let listener = match TcpListener::bind(&listen).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!("cannot listen on {listen}: {error}");
            std::process::exit(1)
        }
    };
    eprintln!("exact-server on {listen}");
    let stats: Shared = Arc::default();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    let _ = stream.set_nodelay(true);
                    let _ = setsockopt(&stream, sockopt::ReceiveTimestampns, &true);
                    tokio::spawn(connection(stream, config, stats.clone()));
                }
            }
            _ = tokio::signal::ctrl_c() => return,
        }
    }
}

/// One keep-alive connection: requests one after another.
async fn connection(mut stream: TcpStream, config: Config, stats: Shared) {
    let mut buffer = Vec::with_capacity(4096);
    let mut arrived = None;
    loop {
        let Some((head_end, body_len)) = read_head(&stream, &mut buffer, &mut arrived).await
        else {
            return;
        };
        while buffer.len() < head_end + body_len {
            if !read_more(&stream, &mut buffer, &mut arrived).await {
                return;
            }
        }
        let read_at = Instant::now();
        let arrived_at = arrived.take().unwrap_or(read_at);
        let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
        let body = String::from_utf8_lossy(&buffer[head_end..head_end + body_len]).into_owned();
        buffer.drain(..head_end + body_len);
        let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
        let ok = match path.as_str() {
            "/stats" => respond(&mut stream, "200 OK", &report(&stats)).await,
            "/reset" => {
                *lock(&stats) = Stats::default();
                respond(&mut stream, "200 OK", "{}").await
            }
            "/v1/models" => respond(&mut stream, "200 OK", MODELS).await,
            "/health" | "/v1/health" => respond(&mut stream, "200 OK", "{}").await,
            p if p.ends_with("/chat/completions") || p.ends_with("/completions") => {
                let chat = p.ends_with("/chat/completions");
                let at = At { arrived: arrived_at, read: read_at };
                answer(&mut stream, &body, chat, at, config, &stats).await
            }
            _ => respond(&mut stream, "404 Not Found", "{\"error\":\"not found\"}").await,
        };
        if !ok {
            return;
        }
    }
}

const MODELS: &str =
    "{\"object\":\"list\",\"data\":[{\"id\":\"exact\",\"object\":\"model\",\"owned_by\":\"bench\"}]}";

/// Reads until a whole request head is buffered; returns its length and the body's length.
async fn read_head(
    stream: &TcpStream,
    buffer: &mut Vec<u8>,
    arrived: &mut Option<Instant>,
) -> Option<(usize, usize)> {
    loop {
        if let Some(end) = find(buffer, b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .and_then(|value| value.trim().parse().ok())
                .unwrap_or(0);
            return Some((end + 4, length));
        }
        if !read_more(stream, buffer, arrived).await {
            return None;
        }
    }
}

/// One read into `buffer`, noting when its bytes reached the host (the kernel's stamp, else
/// now); `false` at the end of the stream or on an error.
async fn read_more(stream: &TcpStream, buffer: &mut Vec<u8>, arrived: &mut Option<Instant>) -> bool {
    let mut chunk = [0u8; 4096];
    let mut control = nix::cmsg_space!(TimeSpec);
    let fd = stream.as_raw_fd();
    let read = stream
        .async_io(Interest::READABLE, || {
            let mut iov = [std::io::IoSliceMut::new(&mut chunk)];
            let message = recvmsg::<()>(fd, &mut iov, Some(&mut control), MsgFlags::empty())?;
            let stamp = message.cmsgs().ok().and_then(|mut cmsgs| {
                cmsgs.find_map(|cmsg| match cmsg {
                    ControlMessageOwned::ScmTimestampns(stamp) => Some(stamp),
                    _ => None,
                })
            });
            Ok((message.bytes, stamp))
        })
        .await;
    match read {
        Ok((0, _)) | Err(_) => false,
        Ok((n, stamp)) => {
            buffer.extend_from_slice(&chunk[..n]);
            *arrived = Some(stamp.and_then(monotonic).unwrap_or_else(Instant::now));
            true
        }
    }
}

/// The monotonic instant of a wall-clock kernel stamp, by its age now.
fn monotonic(stamp: TimeSpec) -> Option<Instant> {
    let (now, wall) = (Instant::now(), SystemTime::now().duration_since(UNIX_EPOCH).ok()?);
    let at = Duration::new(stamp.tv_sec().try_into().ok()?, stamp.tv_nsec().try_into().ok()?);
    now.checked_sub(wall.saturating_sub(at).min(Duration::from_secs(60)))
}

/// When a request reached the host and when the server had read it.
#[derive(Clone, Copy)]
struct At {
    arrived: Instant,
    read: Instant,
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The value after `"key":` in a JSON text (whitespace allowed), as raw text up to `,` or `}`.
fn field<'a>(body: &'a str, key: &str) -> Option<&'a str> {
    let at = body.find(&format!("\"{key}\""))? + key.len() + 2;
    let rest = body[at..].trim_start().strip_prefix(':')?.trim_start();
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    Some(rest[..end].trim())
}

async fn respond(stream: &mut TcpStream, status: &str, body: &str) -> bool {
    let text = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(text.as_bytes()).await.is_ok()
}

async fn answer(
    stream: &mut TcpStream,
    body: &str,
    chat: bool,
    at: At,
    config: Config,
    stats: &Shared,
) -> bool {
    let read_at = at.read;
    let tokens = field(body, "max_tokens")
        .or_else(|| field(body, "max_completion_tokens"))
        .and_then(|v| v.parse().ok())
        .unwrap_or(config.tokens)
        .max(1);
    let streamed = field(body, "stream") == Some("true");
    let mut timing = Timing::default();
    let ok = if streamed {
        stream_tokens(stream, chat, tokens, read_at, config, &mut timing).await
    } else {
        sleep_until(read_at + config.ttft + config.itl * (tokens - 1)).await;
        let text = whole(chat, tokens);
        let ok = respond(stream, "200 OK", &text).await;
        timing.first = Some(Instant::now());
        ok
    };
    if ok {
        timing.finish(at, config, stats);
    }
    ok
}

#[derive(Default)]
struct Timing {
    first: Option<Instant>,
    last: Option<Instant>,
    gaps_us: Vec<u32>,
}

impl Timing {
    fn token_written(&mut self) {
        let now = Instant::now();
        match self.last {
            Some(last) => self.gaps_us.push(micros(now - last)),
            None => self.first = Some(now),
        }
        self.last = Some(now);
    }

    fn finish(self, at: At, config: Config, stats: &Shared) {
        let (read_at, done) = (at.read, Instant::now());
        let mut stats = lock(stats);
        let first_request = *stats.first_request.get_or_insert(read_at);
        if read_at < first_request + config.skip {
            stats.skipped += 1;
            return;
        }
        let first = self.first.unwrap_or(done);
        stats.first_token_us.push(micros(first - read_at));
        stats.inbound_us.push(micros(read_at.saturating_duration_since(at.arrived)));
        stats.first_from_arrival_us.push(micros(first.saturating_duration_since(at.arrived)));
        stats.e2e_us.push(micros(done - read_at));
        stats.gaps_us.extend(self.gaps_us);
        stats.completed += 1;
    }
}

fn micros(duration: Duration) -> u32 {
    duration.as_micros().min(u32::MAX as u128) as u32
}

async fn stream_tokens(
    stream: &mut TcpStream,
    chat: bool,
    tokens: u32,
    read_at: Instant,
    config: Config,
    timing: &mut Timing,
) -> bool {
    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                transfer-encoding: chunked\r\n\r\n";
    if stream.write_all(head.as_bytes()).await.is_err() {
        return false;
    }
    for i in 0..tokens {
        sleep_until(read_at + config.ttft + config.itl * i).await;
        let event = if chat {
            format!(
                "data: {{\"id\":\"x\",\"object\":\"chat.completion.chunk\",\"model\":\"exact\",\
                 \"choices\":[{{\"index\":0,\"delta\":{{\"content\":\" t{i}\"}},\
                 \"finish_reason\":null}}]}}\n\n"
            )
        } else {
            format!(
                "data: {{\"id\":\"x\",\"object\":\"text_completion\",\"model\":\"exact\",\
                 \"choices\":[{{\"index\":0,\"text\":\" t{i}\",\"finish_reason\":null}}]}}\n\n"
            )
        };
        if !chunk(stream, &event).await {
            return false;
        }
        timing.token_written();
    }
    let last = format!(
        "data: {{\"id\":\"x\",\"model\":\"exact\",\"choices\":[{{\"index\":0,{},\
         \"finish_reason\":\"length\"}}],\"usage\":{{\"prompt_tokens\":1,\
         \"completion_tokens\":{tokens},\"total_tokens\":{}}}}}\n\ndata: [DONE]\n\n",
        if chat { "\"delta\":{}" } else { "\"text\":\"\"" },
        tokens + 1
    );
    chunk(stream, &last).await && stream.write_all(b"0\r\n\r\n").await.is_ok()
}

async fn chunk(stream: &mut TcpStream, data: &str) -> bool {
    let framed = format!("{:x}\r\n{data}\r\n", data.len());
    stream.write_all(framed.as_bytes()).await.is_ok()
}

fn whole(chat: bool, tokens: u32) -> String {
    let text: String = (0..tokens).map(|i| format!(" t{i}")).collect();
    let choice = if chat {
        format!("{{\"index\":0,\"message\":{{\"role\":\"assistant\",\"content\":\"{text}\"}},\"finish_reason\":\"length\"}}")
    } else {
        format!("{{\"index\":0,\"text\":\"{text}\",\"finish_reason\":\"length\"}}")
    };
    format!(
        "{{\"id\":\"x\",\"model\":\"exact\",\"choices\":[{choice}],\"usage\":{{\"prompt_tokens\":1,\
         \"completion_tokens\":{tokens},\"total_tokens\":{}}}}}",
        tokens + 1
    )
}

fn lock(stats: &Shared) -> std::sync::MutexGuard<'_, Stats> {
    stats.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Percentiles (nearest rank) and mean of µs samples, in milliseconds.
fn summary(samples: &mut [u32]) -> String {
    if samples.is_empty() {
        return "null".to_string();
    }
    samples.sort_unstable();
    let at = |q: f64| {
        let rank = ((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len());
        samples[rank - 1] as f64 / 1000.0
    };
    let mean = samples.iter().map(|&v| v as f64).sum::<f64>() / samples.len() as f64 / 1000.0;
    format!(
        "{{\"count\":{},\"mean\":{mean:.4},\"p50\":{},\"p90\":{},\"p99\":{},\"max\":{}}}",
        samples.len(),
        at(0.5),
        at(0.9),
        at(0.99),
        at(1.0)
    )
}

fn report(stats: &Shared) -> String {
    let mut stats = lock(stats);
    let completed = stats.completed;
    let skipped = stats.skipped;
    format!(
        "{{\"completed\":{completed},\"skipped\":{skipped},\"first_token_ms\":{},\"itl_ms\":{},\"e2e_ms\":{},\"inbound_ms\":{},\"first_token_from_arrival_ms\":{}}}",
        summary(&mut stats.first_token_us),
        summary(&mut stats.gaps_us),
        summary(&mut stats.e2e_us),
        summary(&mut stats.inbound_us),
        summary(&mut stats.first_from_arrival_us)
    )
}
