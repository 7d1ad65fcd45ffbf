//! Server-side metrics for `GET /metrics`: Prometheus text exposition with vLLM's metric names,
//! labels and histogram buckets, fed by engine events and [`EngineStats`].
//!
//! All times are simulated seconds. Token counters count exactly what the engine delivered to
//! clients: generation tokens per `Tokens` event, prompt tokens once per request when its first
//! token is produced. Requests that a client abandoned or the engine dropped are counted in
//! `vllm:request_success_total{finished_reason="abort"}`.

pub mod replicas;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use crate::engine::{EngineEvent, EngineStats, FinishReason, RequestId, SimTime, StepSummary};

/// vLLM's time-to-first-token buckets, seconds.
pub const TTFT_BUCKETS: [f64; 22] = [
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
/// vLLM's inter-token latency buckets, seconds.
pub const ITL_BUCKETS: [f64; 19] = [
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
    40.0, 80.0,
];
/// vLLM's request-duration buckets (e2e, queue), seconds.
pub const REQUEST_TIME_BUCKETS: [f64; 21] = [
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
    480.0, 960.0, 1920.0, 7680.0,
];
/// vLLM's tokens-per-step buckets.
pub const ITERATION_TOKEN_BUCKETS: [f64; 13] = [
    1.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0, 16384.0,
];

/// `1, 2, 5, 10, 20, 50, …` up to and including `max` (vLLM's token-count buckets).
pub fn one_two_five_buckets(max: u32) -> Vec<f64> {
    let mut buckets = Vec::new();
    let mut decade = 1u64;
    loop {
        for mantissa in [1, 2, 5] {
            let value = mantissa * decade;
            if value > u64::from(max) {
                return buckets;
            }
            buckets.push(value as f64);
        }
        decade *= 10;
    }
}

/// What `vllm:cache_config_info` reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheConfigInfo {
    /// Tokens per KV block (0 for engines without a KV model).
    pub block_size: u32,
    /// KV blocks in one engine's pool.
    pub num_gpu_blocks: u64,
    /// Whether prefix caching is on.
    pub prefix_caching: bool,
    /// Engines (replicas) with a pool each: more than one writes one sample per engine,
    /// labelled `engine` as vLLM's data-parallel engines are (0 and 1 write one, unlabelled).
    pub engines: u32,
}

/// A Prometheus histogram with fixed upper bounds.
#[derive(Debug, Clone, PartialEq)]
struct Histogram {
    bounds: Vec<f64>,
    /// Observations per bucket (not cumulative); the last entry is `+Inf`.
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    fn new(bounds: &[f64]) -> Self {
        Histogram {
            bounds: bounds.to_vec(),
            counts: vec![0; bounds.len() + 1],
            sum: 0.0,
            count: 0,
        }
    }

    fn observe(&mut self, value: f64) {
        let bucket = self
            .bounds
            .iter()
            .position(|&bound| value <= bound)
            .unwrap_or(self.bounds.len());
        self.counts[bucket] += 1;
        self.sum += value;
        self.count += 1;
    }
}

/// What the server remembers about a request in flight.
#[derive(Debug, Clone, Copy)]
struct Tracked {
    arrival: SimTime,
    prompt_tokens: u32,
    last_token: Option<SimTime>,
    generated: u32,
}

/// Cumulative token counters, as exposed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenCounters {
    /// `vllm:prompt_tokens_total`.
    pub prompt_tokens: u64,
    /// `vllm:generation_tokens_total`.
    pub generation_tokens: u64,
}

/// Every server-side metric the simulator exposes.
#[derive(Debug, Clone)]
pub struct ServerMetrics {
    labels: String,
    cache: CacheConfigInfo,
    requests: HashMap<RequestId, Tracked>,
    tokens: TokenCounters,
    finished: BTreeMap<&'static str, u64>,
    rejected: BTreeMap<String, u64>,
    ttft: Histogram,
    itl: Histogram,
    e2e: Histogram,
    queue_time: Histogram,
    prompt_lengths: Histogram,
    generation_lengths: Histogram,
    iteration_tokens: Histogram,
}

impl ServerMetrics {
    /// Empty metrics for `model_name`; token-count buckets go up to `max_model_len`.
    pub fn new(model_name: &str, max_model_len: u32, cache: CacheConfigInfo) -> Self {
        let length_buckets = one_two_five_buckets(max_model_len);
        let finished = ["stop", "length", "abort"]
            .into_iter()
            .map(|reason| (reason, 0))
            .collect();
        let rejected = ["queue_full", "too_long", "invalid"]
            .into_iter()
            .map(|reason| (reason.to_string(), 0))
            .collect();
        ServerMetrics {
            labels: format!("model_name=\"{}\"", escape_label(model_name)),
            cache,
            requests: HashMap::new(),
            tokens: TokenCounters::default(),
            finished,
            rejected,
            ttft: Histogram::new(&TTFT_BUCKETS),
            itl: Histogram::new(&ITL_BUCKETS),
            e2e: Histogram::new(&REQUEST_TIME_BUCKETS),
            queue_time: Histogram::new(&REQUEST_TIME_BUCKETS),
            prompt_lengths: Histogram::new(&length_buckets),
            generation_lengths: Histogram::new(&length_buckets),
            iteration_tokens: Histogram::new(&ITERATION_TOKEN_BUCKETS),
        }
    }

    /// The labels every series carries (`model_name`).
    pub fn labels(&self) -> &str {
        &self.labels
    }

    /// The token counters so far.
    pub fn token_counters(&self) -> TokenCounters {
        self.tokens
    }

    /// A request was accepted by the engine at `at`.
    pub fn record_arrival(&mut self, id: RequestId, at: SimTime, prompt_tokens: u32) {
        let tracked = Tracked {
            arrival: at,
            prompt_tokens,
            last_token: None,
            generated: 0,
        };
        self.requests.insert(id, tracked);
    }

    /// Forgets a request without counting it (its submission was rolled back).
    pub fn forget(&mut self, id: RequestId) {
        self.requests.remove(&id);
    }

    /// A request was refused before it reached the engine, or by the engine.
    pub fn record_rejection(&mut self, reason: &str) {
        *self.rejected.entry(reason.to_string()).or_insert(0) += 1;
    }

    /// A request ended without finishing (client went away, or the engine dropped it).
    pub fn record_abort(&mut self, id: RequestId) {
        if self.requests.remove(&id).is_some() {
            *self.finished.entry("abort").or_insert(0) += 1;
        }
    }

    /// Applies one engine event.
    pub fn record_event(&mut self, event: &EngineEvent) {
        match event {
            EngineEvent::Scheduled { id, at, .. } => self.record_scheduled(*id, *at),
            EngineEvent::Tokens {
                id,
                at,
                count,
                finished,
            } => {
                self.record_tokens(*id, *at, *count, *finished);
            }
            EngineEvent::Aborted { id, .. } => self.record_abort(*id),
            EngineEvent::Step(summary) => self.record_step(summary),
            EngineEvent::Preempted { .. } => {}
        }
    }

    fn record_scheduled(&mut self, id: RequestId, at: SimTime) {
        if let Some(tracked) = self.requests.get(&id) {
            self.queue_time
                .observe(at.saturating_sub(tracked.arrival).as_secs_f64());
        }
    }

    fn record_tokens(
        &mut self,
        id: RequestId,
        at: SimTime,
        count: u32,
        finished: Option<FinishReason>,
    ) {
        let Some(tracked) = self.requests.get_mut(&id) else {
            return;
        };
        match tracked.last_token {
            None => {
                self.ttft
                    .observe(at.saturating_sub(tracked.arrival).as_secs_f64());
                self.tokens.prompt_tokens += u64::from(tracked.prompt_tokens);
            }
            Some(previous) => self.itl.observe(at.saturating_sub(previous).as_secs_f64()),
        }
        tracked.last_token = Some(at);
        tracked.generated += count;
        self.tokens.generation_tokens += u64::from(count);
        let Some(reason) = finished else { return };
        let tracked = *tracked;
        self.requests.remove(&id);
        self.e2e
            .observe(at.saturating_sub(tracked.arrival).as_secs_f64());
        self.prompt_lengths
            .observe(f64::from(tracked.prompt_tokens));
        self.generation_lengths
            .observe(f64::from(tracked.generated));
        *self.finished.entry(reason.as_str()).or_insert(0) += 1;
    }

    fn record_step(&mut self, summary: &StepSummary) {
        self.iteration_tokens
            .observe(f64::from(summary.batched_tokens));
    }

    /// The Prometheus text exposition of every metric, with the engine's current `stats`.
    pub fn render(&self, stats: &EngineStats) -> String {
        let mut out = String::with_capacity(16 * 1024);
        self.render_gauges(&mut out, stats);
        self.render_counters(&mut out, stats);
        self.render_speculative(&mut out, stats);
        self.render_histograms(&mut out);
        out
    }

    fn render_gauges(&self, out: &mut String, stats: &EngineStats) {
        let labels = &self.labels;
        let gauges = [
            (
                "vllm:num_requests_running",
                "Number of requests in model execution batches.",
                stats.running as f64,
            ),
            (
                "vllm:num_requests_waiting",
                "Number of requests waiting to be processed.",
                stats.waiting as f64,
            ),
            (
                "vllm:kv_cache_usage_perc",
                "KV-cache usage. 1 means 100 percent usage.",
                stats.kv_usage,
            ),
        ];
        for (name, help, value) in gauges {
            header(out, name, help, "gauge");
            let _ = writeln!(out, "{name}{{{labels}}} {}", number(value));
        }
        let name = "vllm:cache_config_info";
        header(
            out,
            name,
            "Information of the KV cache configuration.",
            "gauge",
        );
        let CacheConfigInfo {
            block_size,
            num_gpu_blocks,
            prefix_caching,
            engines,
        } = self.cache;
        let prefix = if prefix_caching { "True" } else { "False" };
        let engine_labels: Vec<String> = if engines > 1 {
            (0..engines).map(|i| format!(",engine=\"{i}\"")).collect()
        } else {
            vec![String::new()]
        };
        for engine in engine_labels {
            let _ = writeln!(
                out,
                "{name}{{{labels}{engine},block_size=\"{block_size}\",\
                 num_gpu_blocks=\"{num_gpu_blocks}\",enable_prefix_caching=\"{prefix}\"}} 1"
            );
        }
    }

    fn render_counters(&self, out: &mut String, stats: &EngineStats) {
        let labels = &self.labels;
        let counters = [
            (
                "vllm:prompt_tokens_total",
                "Number of prefill tokens processed.",
                self.tokens.prompt_tokens,
            ),
            (
                "vllm:generation_tokens_total",
                "Number of generation tokens processed.",
                self.tokens.generation_tokens,
            ),
            (
                "vllm:num_preemptions_total",
                "Cumulative number of preemptions.",
                stats.preemptions_total,
            ),
            (
                "vllm:prefix_cache_queries_total",
                "Prefix cache queries, in tokens.",
                stats.prefix_queries_tokens,
            ),
            (
                "vllm:prefix_cache_hits_total",
                "Prefix cache hits, in tokens.",
                stats.prefix_hits_tokens,
            ),
        ];
        for (name, help, value) in counters {
            header(out, name, help, "counter");
            let _ = writeln!(out, "{name}{{{labels}}} {value}");
        }
        let name = "vllm:request_success_total";
        header(
            out,
            name,
            "Count of finished requests by finish reason.",
            "counter",
        );
        for (reason, value) in &self.finished {
            let _ = writeln!(
                out,
                "{name}{{{labels},finished_reason=\"{reason}\"}} {value}"
            );
        }
        let name = "goodput_sim:requests_rejected_total";
        header(
            out,
            name,
            "Requests refused by the simulator, by reason.",
            "counter",
        );
        for (reason, value) in &self.rejected {
            let reason = escape_label(reason);
            let _ = writeln!(out, "{name}{{{labels},reason=\"{reason}\"}} {value}");
        }
    }

    fn render_speculative(&self, out: &mut String, stats: &EngineStats) {
        let labels = &self.labels;
        let spec = &stats.speculative;
        let counters = [
            (
                "vllm:spec_decode_num_drafts_total",
                "Number of spec decoding drafts.",
                spec.drafts,
            ),
            (
                "vllm:spec_decode_num_draft_tokens_total",
                "Number of draft tokens.",
                spec.draft_tokens,
            ),
            (
                "vllm:spec_decode_num_accepted_tokens_total",
                "Number of accepted tokens.",
                spec.accepted_tokens,
            ),
        ];
        for (name, help, value) in counters {
            header(out, name, help, "counter");
            let _ = writeln!(out, "{name}{{{labels}}} {value}");
        }
        let name = "vllm:spec_decode_num_accepted_tokens_per_pos_total";
        header(out, name, "Accepted tokens per draft position.", "counter");
        for (position, value) in spec.accepted_per_position.iter().enumerate() {
            let _ = writeln!(out, "{name}{{{labels},position=\"{position}\"}} {value}");
        }
    }

    fn render_histograms(&self, out: &mut String) {
        let histograms = [
            (
                "vllm:time_to_first_token_seconds",
                "Histogram of time to first token in seconds.",
                &self.ttft,
            ),
            (
                "vllm:inter_token_latency_seconds",
                "Histogram of inter-token latency in seconds.",
                &self.itl,
            ),
            (
                "vllm:e2e_request_latency_seconds",
                "Histogram of e2e request latency in seconds.",
                &self.e2e,
            ),
            (
                "vllm:request_queue_time_seconds",
                "Histogram of time spent waiting in the queue.",
                &self.queue_time,
            ),
            (
                "vllm:request_prompt_tokens",
                "Number of prefill tokens processed per request.",
                &self.prompt_lengths,
            ),
            (
                "vllm:request_generation_tokens",
                "Number of generation tokens per request.",
                &self.generation_lengths,
            ),
            (
                "vllm:iteration_tokens_total",
                "Histogram of number of tokens per engine step.",
                &self.iteration_tokens,
            ),
        ];
        for (name, help, histogram) in histograms {
            header(out, name, help, "histogram");
            self.render_histogram(out, name, histogram);
        }
    }

    fn render_histogram(&self, out: &mut String, name: &str, histogram: &Histogram) {
        let labels = &self.labels;
        let mut cumulative = 0;
        for (bound, count) in histogram.bounds.iter().zip(&histogram.counts) {
            cumulative += count;
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels},le=\"{}\"}} {cumulative}",
                bucket_label(*bound)
            );
        }
        let _ = writeln!(
            out,
            "{name}_bucket{{{labels},le=\"+Inf\"}} {}",
            histogram.count
        );
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", number(histogram.sum));
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", histogram.count);
    }
}

fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A sample value: finite numbers as Rust prints them, `NaN`/`±Inf` in Prometheus spelling.
fn number(value: f64) -> String {
    if value.is_nan() {
        "NaN".to_string()
    } else if value.is_infinite() {
        if value > 0.0 { "+Inf" } else { "-Inf" }.to_string()
    } else {
        format!("{value}")
    }
}

/// A bucket bound as Python's Prometheus client prints it (`1.0`, `0.25`).
fn bucket_label(bound: f64) -> String {
    if bound.fract() == 0.0 {
        format!("{bound:.1}")
    } else {
        format!("{bound}")
    }
}

/// Escapes a label value (backslash, double quote, newline).
fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
