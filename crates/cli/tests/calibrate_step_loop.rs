//! `goodput calibrate` finds the step budget and the queue order of a server that reports
//! neither, against a streaming chat server written here with exact timing: one engine thread
//! runs steps of [`STEP_MS`] plus [`TOKEN_MS`] a token, every running answer's next token
//! first, then up to [`BUDGET`] tokens in all of waiting prompts ([`SLOTS`] sequences at most,
//! a free slot taking the waiting request its [`Order`] puts first), a prompt longer than what
//! is left cut into chunks over several steps; a prompt's first token comes with the step that
//! finished it. The probe must read the budget from the decoding stream's gaps (and size the
//! prompt by the context the model card gives, as vLLM's does); a server that never slows a
//! stream (each request timed alone, `calibrate_passes`) leaves it unknown. The queue-order
//! probe must read first come first served, or shortest prompt first. Serving vLLM's info
//! gauges on `/metrics`, its slots, step budget and KV cache must be read from them instead.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::VecDeque;
use std::io::{BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{
    EVENT_STREAM_HEAD, calibrate_json, other_reply, prompt_words, read_request, token_event,
};

/// Fixed time of every step, ms.
const STEP_MS: f64 = 4.0;
/// Time of every token a step carries, ms.
const TOKEN_MS: f64 = 0.25;
/// Tokens one step carries at most.
const BUDGET: u32 = 384;
/// Sequences at once.
const SLOTS: usize = 4;
/// Context of a sequence, as vLLM's model card says it (`max_model_len`).
const CONTEXT: u32 = 2048;

/// Which waiting request a free slot takes.
#[derive(Clone, Copy, Default)]
enum Order {
    /// The one that came first.
    #[default]
    Fifo,
    /// The one with the shortest prompt (the first of those).
    ShortestPrompt,
}

/// One request in the engine: its prompt, prompt tokens still to run, answer tokens still to
/// give, and where its tokens go.
struct Sequence {
    prompt: u32,
    prompt_left: u32,
    answer_left: u32,
    tokens: Sender<()>,
}

#[derive(Default)]
struct Engine {
    order: Order,
    waiting: VecDeque<Sequence>,
    running: Vec<Sequence>,
}

impl Engine {
    /// The waiting request a free slot takes.
    fn next(&mut self) -> Option<Sequence> {
        let at = match self.order {
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
    while engine.running.len() < SLOTS
        && let Some(next) = engine.next()
    {
        engine.running.push(next);
    }
    let decoding = engine.running.iter().filter(|s| s.prompt_left == 0).count() as u32;
    let mut left = BUDGET.saturating_sub(decoding);
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

/// The engine thread: steps back to back by absolute deadlines while there is work.
fn run_engine(shared: &Shared) {
    let (lock, work) = &**shared;
    let mut end = Instant::now();
    loop {
        let mut engine = lock.lock().unwrap();
        while engine.waiting.is_empty() && engine.running.is_empty() {
            engine = work.wait(engine).unwrap();
        }
        let (tokens, chunks) = form_step(&mut engine);
        drop(engine);
        end = end.max(Instant::now())
            + Duration::from_secs_f64((STEP_MS + TOKEN_MS * f64::from(tokens)) / 1e3);
        std::thread::sleep(end.saturating_duration_since(Instant::now()));
        end_step(&mut lock.lock().unwrap(), &chunks);
    }
}

/// Starts a server admitting in `order` and answering `/metrics` with `metrics` (none: 404);
/// its `/v1` URL.
fn server(order: Order, metrics: Option<&'static str>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let shared: Shared = Arc::new((
        Mutex::new(Engine {
            order,
            ..Engine::default()
        }),
        Condvar::new(),
    ));
    let engine = Arc::clone(&shared);
    std::thread::spawn(move || run_engine(&engine));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || serve(stream, &shared, metrics));
        }
    });
    format!("http://{address}/v1")
}

fn serve(stream: TcpStream, shared: &Shared, metrics: Option<&str>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    while let Some((path, body)) = read_request(&mut reader) {
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        if path.ends_with("/chat/completions") && request["stream"] == true {
            let answer = request["max_tokens"].as_u64().unwrap_or(16).max(1) as u32;
            let prompt = u32::try_from(prompt_words(&request)).unwrap();
            let (tokens, arrived) = channel();
            let (lock, work) = &**shared;
            lock.lock().unwrap().waiting.push_back(Sequence {
                prompt: prompt.max(1),
                prompt_left: prompt.max(1),
                answer_left: answer,
                tokens,
            });
            work.notify_one();
            stream_answer(&mut writer, &arrived, (prompt.max(1), answer));
            return;
        }
        let reply = match metrics {
            Some(body) if path == "/metrics" => format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\n\
                 content-length: {}\r\n\r\n{body}",
                body.len()
            ),
            _ => other_reply(&path, &format!(r#","max_model_len":{CONTEXT}"#)),
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

/// `goodput calibrate` (one pass, `seed`) against a server admitting in `order` and serving
/// `metrics`: its facts, its log and the configuration it wrote.
fn calibrated(order: Order, metrics: Option<&'static str>, seed: &str) -> (Value, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let url = server(order, metrics);
    let out = dir.path().join("calibrated.toml");
    let (report, log) = calibrate_json(&url, (seed, "1"), &out);
    let config = std::fs::read_to_string(&out).unwrap();
    (report["facts"].clone(), log, config)
}

#[test]
fn the_step_budget_is_read_from_a_stream_slowed_by_a_chunked_prompt() {
    let (facts, log, config) = calibrated(Order::Fifo, None, "5");
    assert_eq!(facts["slots"], SLOTS, "{facts}\n{log}");
    assert_eq!(facts["context_per_slot"], CONTEXT, "{facts}");
    // The probe's prompt (1,686 words: 85 % of the context less 64) took four steps of 383
    // prompt tokens and one of 154.
    // No power of two lies within what five steps allow (282–422), so the budget is the
    // estimate from the gaps' growth: within 3 % on a loaded machine (its wake-ups late by
    // up to a few ms on 100-ms chunks).
    let read = facts["batch_tokens"].as_u64().unwrap();
    assert!(
        read.abs_diff(u64::from(BUDGET)) * 100 <= 3 * u64::from(BUDGET),
        "{facts}\n{log}"
    );
    let line = log.lines().find(|l| l.starts_with("step budget:")).unwrap();
    assert!(
        line.contains("1686 tokens as the server counted them"),
        "{line}"
    );
    assert!(
        config.contains(&format!("max_num_batched_tokens = {read}\n")),
        "{config}"
    );
    // First come first served: read, and the engine's default (not written).
    assert_eq!(facts["queue_order"], "fifo", "{facts}\n{log}");
    assert!(!config.contains("queue_order"), "{config}");
}

#[test]
fn a_server_that_takes_the_shortest_prompt_first_is_read_so() {
    let (facts, log, config) = calibrated(Order::ShortestPrompt, None, "6");
    assert_eq!(facts["queue_order"], "shortest-prompt", "{facts}\n{log}");
    let line = log.lines().find(|l| l.starts_with("queue order:")).unwrap();
    // The queued requests' prompts rank 1 3 0 2, then 2 0 3 1 (shortest 0).
    assert!(
        line.contains("served 2 0 3 1, then 1 3 0 2: shortest prompt first"),
        "{line}"
    );
    assert!(
        config.contains("queue_order = \"shortest-prompt\"\n"),
        "{config}"
    );
}

/// vLLM's info gauges for this server: its scheduler's limits, and a KV cache of 200 blocks of
/// 16 tokens (less than its four slots' contexts: a vLLM server preempts when it runs out).
const VLLM_METRICS: &str = "\
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 0.0
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size=\"16\",cache_dtype=\"auto\",enable_prefix_caching=\"True\",\
engine=\"0\",num_cpu_blocks=\"None\",num_gpu_blocks=\"200\"} 1.0
# TYPE vllm:vllm_config_info gauge
vllm:vllm_config_info{scheduler_config_max_num_batched_tokens=\"384\",\
scheduler_config_max_num_seqs=\"4\"} 1.0
";

#[test]
fn a_vllm_servers_limits_are_read_from_its_metrics() {
    let (facts, log, config) = calibrated(Order::Fifo, Some(VLLM_METRICS), "7");
    // Stated, so neither measured: no waves, no step-budget probe.
    assert_eq!(facts["slots"], SLOTS, "{facts}\n{log}");
    assert_eq!(facts["batch_tokens"], BUDGET, "{facts}");
    assert!(!log.contains("batch limit:"), "{log}");
    assert!(!log.contains("step budget:"), "{log}");
    assert_eq!(facts["engine"], "vllm", "{facts}");
    assert_eq!(facts["kv_tokens"], 3200, "{facts}");
    assert_eq!(facts["prefix_caching"], true, "{facts}");
    let sources = facts["sources"].to_string();
    assert!(
        sources.contains(
            "/metrics (vllm: max_num_seqs, max_num_batched_tokens, KV cache, prefix caching)"
        ),
        "{sources}"
    );
    // The stated slots are exact: the queue-order probe runs.
    assert_eq!(facts["queue_order"], "fifo", "{facts}\n{log}");
    for line in [
        "max_num_seqs = 4\n",
        "max_num_batched_tokens = 384\n",
        // 3,200 tokens in blocks of 16, and one.
        "kv_blocks_override = 201\n",
        "prefix_caching = true\n",
        "policy = \"vllm\"\n",
    ] {
        assert!(config.contains(line), "{line}: {config}");
    }
}
