//! A streaming chat server written for the tests with exact timing: one engine thread runs
//! steps of a fixed time plus a time a token, every running answer's next token first, then
//! up to a budget of tokens in all of waiting prompts (a number of slots at most, a free slot
//! taking the waiting request its [`Order`] puts first), a prompt longer than what is left cut
//! into chunks over several steps; a prompt's first token comes with the step that finished it.

use std::collections::VecDeque;
use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{EVENT_STREAM_HEAD, other_reply, prompt_words, read_request, token_event};

/// Which waiting request a free slot takes.
#[derive(Clone, Copy, Debug, Default)]
pub enum Order {
    /// The one that came first.
    #[default]
    Fifo,
    /// The one with the shortest prompt (the first of those).
    ShortestPrompt,
}

/// What the server is: its step's timing, its limits, its order and what its `/metrics` says.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    /// Fixed time of every step, ms.
    pub step_ms: f64,
    /// Time of every token a step carries, ms.
    pub token_ms: f64,
    /// Tokens one step carries at most.
    pub budget: u32,
    /// Sequences at once.
    pub slots: usize,
    /// Context of a sequence, as vLLM's model card says it (`max_model_len`).
    pub context: u32,
    /// Which waiting request a free slot takes.
    pub order: Order,
    /// The body of `/metrics` (none: 404).
    pub metrics: Option<&'static str>,
}

/// One request in the engine: its prompt, prompt tokens still to run, answer tokens still to
/// give, and where its tokens go.
struct Sequence {
    prompt: u32,
    prompt_left: u32,
    answer_left: u32,
    tokens: Sender<()>,
}

struct Engine {
    spec: Spec,
    waiting: VecDeque<Sequence>,
    running: Vec<Sequence>,
}

impl Engine {
    /// The waiting request a free slot takes.
    fn next(&mut self) -> Option<Sequence> {
        let at = match self.spec.order {
            Order::Fifo => 0,
            Order::ShortestPrompt => {
                (0..self.waiting.len()).min_by_key(|&i| self.waiting[i].prompt)?
            }
        };
        self.waiting.remove(at)
    }
}

type Shared = Arc<(Mutex<Engine>, Condvar)>;

/// Forms the next step: every decoding sequence's token, then prompt tokens up to the budget
/// (sequences mid-prompt first, then waiting ones while a slot is free). Returns the tokens
/// and each sequence's prompt tokens in it.
fn form_step(engine: &mut Engine) -> (u32, Vec<u32>) {
    while engine.running.len() < engine.spec.slots
        && let Some(next) = engine.next()
    {
        engine.running.push(next);
    }
    let decoding = engine.running.iter().filter(|s| s.prompt_left == 0).count() as u32;
    let mut left = engine.spec.budget.saturating_sub(decoding);
    let chunks: Vec<u32> = engine
        .running
        .iter()
        .map(|s| {
            let chunk = s.prompt_left.min(left);
            left -= chunk;
            chunk
        })
        .collect();
    (decoding + chunks.iter().sum::<u32>(), chunks)
}

/// Ends a step: a token for every sequence that decoded or finished its prompt in it.
fn end_step(engine: &mut Engine, chunks: &[u32]) {
    for (sequence, chunk) in engine.running.iter_mut().zip(chunks) {
        let decoded = sequence.prompt_left == 0;
        sequence.prompt_left -= chunk;
        if decoded || (*chunk > 0 && sequence.prompt_left == 0) {
            let _ = sequence.tokens.send(());
            sequence.answer_left = sequence.answer_left.saturating_sub(1);
        }
    }
    engine.running.retain(|s| s.answer_left > 0);
}

/// The engine thread: steps back to back by absolute deadlines while there is work, each
/// step starting where the last was due to end (a wake-up late on a loaded machine delays
/// that step's tokens, not every later one), or when work arrives at an idle engine.
fn run_engine(shared: &Shared) {
    let (lock, work) = &**shared;
    let mut end = Instant::now();
    loop {
        let mut engine = lock.lock().unwrap();
        if engine.waiting.is_empty() && engine.running.is_empty() {
            while engine.waiting.is_empty() && engine.running.is_empty() {
                engine = work.wait(engine).unwrap();
            }
            end = Instant::now();
        }
        let (tokens, chunks) = form_step(&mut engine);
        let spec = engine.spec;
        drop(engine);
        end += Duration::from_secs_f64((spec.step_ms + spec.token_ms * f64::from(tokens)) / 1e3);
        std::thread::sleep(end.saturating_duration_since(Instant::now()));
        end_step(&mut lock.lock().unwrap(), &chunks);
    }
}

/// A 4-slot server whose every step takes `step_ms` (nothing a token): a streamed answer's
/// tokens come `step_ms` apart; its `/v1` URL.
pub fn steps_of(step_ms: f64) -> String {
    start(Spec {
        step_ms,
        token_ms: 0.0,
        budget: 512,
        slots: 4,
        context: 2048,
        order: Order::Fifo,
        metrics: None,
    })
}

/// Starts a server as `spec` says; its `/v1` URL.
pub fn start(spec: Spec) -> String {
    let shared: Shared = Arc::new((
        Mutex::new(Engine {
            spec,
            waiting: VecDeque::new(),
            running: Vec::new(),
        }),
        Condvar::new(),
    ));
    let engine = Arc::clone(&shared);
    std::thread::spawn(move || run_engine(&engine));
    let address = super::spawn_server(move |stream| serve(stream, &shared, spec));
    format!("http://{address}/v1")
}

fn serve(stream: TcpStream, shared: &Shared, spec: Spec) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    while let Some((path, body)) = read_request(&mut reader) {
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        if path.ends_with("/chat/completions") && request["stream"] == true {
            let answer = request["max_tokens"].as_u64().unwrap_or(16).max(1) as u32;
            let prompt = u32::try_from(prompt_words(&request)).unwrap().max(1);
            let (tokens, arrived) = channel();
            let (lock, work) = &**shared;
            lock.lock().unwrap().waiting.push_back(Sequence {
                prompt,
                prompt_left: prompt,
                answer_left: answer,
                tokens,
            });
            work.notify_one();
            stream_answer(&mut writer, &arrived, (prompt, answer));
            return;
        }
        let reply = match spec.metrics {
            Some(body) if path == "/metrics" => format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\n\
                 content-length: {}\r\n\r\n{body}",
                body.len()
            ),
            _ => other_reply(&path, &format!(r#","max_model_len":{}"#, spec.context)),
        };
        if writer.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

/// Writes a chunk as each token arrives from the engine; the last carries the usage.
fn stream_answer(writer: &mut TcpStream, arrived: &Receiver<()>, (prompt, answer): (u32, u32)) {
    let _ = writer.write_all(EVENT_STREAM_HEAD.as_bytes());
    let _ = writer.flush();
    for k in 0..answer {
        if arrived.recv().is_err() {
            return;
        }
        let usage = (k + 1 == answer).then_some((u64::from(prompt), u64::from(answer)));
        if writer.write_all(token_event(usage).as_bytes()).is_err() {
            return;
        }
        let _ = writer.flush();
    }
    let _ = writer.write_all(b"data: [DONE]\n\n");
    let _ = writer.flush();
}
