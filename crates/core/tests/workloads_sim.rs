//! Workloads that look like production, end to end against the simulator: the server-side
//! prompt counts of a log-normal workload follow the distribution; multi-turn sessions carry
//! growing histories with the server's actual replies; shared prefixes lower TTFT with prefix
//! caching on; the report breaks every metric down by input-length bucket and by turn. Trace
//! replay timing is in `replay_sim.rs`.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use goodput_core::backend::openai::{ApiKind, OpenAiBackend, OpenAiConfig};
use goodput_core::backend::{Activity, Backend, BoxFuture, RequestInput, RequestSpec};
use goodput_core::config::{Arrival, LoadSpec, RunConfig, Warmup};
use goodput_core::metrics::{LengthBuckets, StepAggregator};
use goodput_core::record::{Exchange, RequestRecord, TokenSource};
use goodput_core::report::{LoadReport, StepReport};
use goodput_core::runner::Runner;
use goodput_core::tokens::Tiktoken;
use goodput_core::workload::{
    GeneratedWorkload, PromptVocabulary, SharedPrefix, SyntheticConversations, ThinkTime, Workload,
};
use goodput_sim::SimServer;
use goodput_sim::config::{BatchingConfig, EngineConfig, PromptTokenizer, SimConfig};
use support::{Collect, fixed, in_memory_client, openai, run_with};
use tokio_util::sync::CancellationToken;

/// Tokens the simulator adds to a one-message chat prompt: 3 + role (`user`: 1) + 3.
const CHAT_OVERHEAD: u64 = 7;

fn open(rate: f64, requests: u64) -> RunConfig {
    RunConfig {
        load: LoadSpec::Open {
            rate_per_sec: rate,
            arrival: Arrival::Constant,
            max_concurrency: None,
        },
        max_requests: Some(requests),
        warmup: Warmup::None,
        ..RunConfig::default()
    }
}

fn vocabulary() -> Arc<PromptVocabulary> {
    Arc::new(PromptVocabulary::cl100k())
}

fn nearest_rank(sorted: &[f64], percentile: f64) -> f64 {
    let rank = ((percentile / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.max(1) - 1]
}

#[tokio::test(start_paused = true)]
async fn server_side_prompt_counts_of_a_lognormal_workload_match_the_distribution() {
    let (median, sigma) = (128.0f64, 0.4f64);
    let workload = Arc::new(GeneratedWorkload {
        input: format!("lognormal:median={median},sigma={sigma}")
            .parse()
            .unwrap(),
        output: Some("1".parse().unwrap()),
        prefix: None,
        vocabulary: vocabulary(),
        seed: 17,
    });
    let server = SimServer::new(fixed(1, 1, 4096)).unwrap();
    let model = server.model_name().to_string();
    let result = run_with(
        open(2000.0, 8000),
        in_memory_client(&server),
        openai(&model),
        workload,
        CancellationToken::new(),
    )
    .await;
    assert_eq!(result.step.requests.completed, 8000);
    let mut served: Vec<f64> = result
        .records
        .iter()
        .map(|r| {
            assert_eq!(r.input_tokens_source, TokenSource::Usage);
            let served = r.input_tokens.unwrap() - CHAT_OVERHEAD;
            assert_eq!(Some(served), r.expected_input_tokens, "exact per request");
            served as f64
        })
        .collect();
    served.sort_by(f64::total_cmp);
    let mean = served.iter().sum::<f64>() / served.len() as f64;
    let p99 = nearest_rank(&served, 99.0);
    let expected_mean = median * (sigma * sigma / 2.0).exp();
    let expected_p99 = median * (2.326_348 * sigma).exp();
    println!(
        "served mean {mean:.1} (expected {expected_mean:.1}), p99 {p99} (expected {expected_p99:.1})"
    );
    assert!(
        (mean / expected_mean - 1.0).abs() < 0.05,
        "mean {mean} vs {expected_mean}"
    );
    assert!(
        (p99 / expected_p99 - 1.0).abs() < 0.05,
        "p99 {p99} vs {expected_p99}"
    );
    let stats = &result.step.workload_stats;
    assert_eq!(stats.requests, 8000);
    assert!((stats.input_tokens.mean.unwrap() - mean).abs() < 1e-6);
    assert_eq!(stats.output_tokens.p50, Some(1));
}

/// Delegates to the OpenAI backend and keeps every request with the reply text it got.
#[derive(Debug)]
struct Capture {
    inner: OpenAiBackend,
    log: Mutex<Vec<(RequestSpec, String)>>,
}

impl Backend for Capture {
    fn send<'a>(
        &'a self,
        request: &'a RequestSpec,
        exchange: &'a mut Exchange,
        activity: &'a Activity,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            self.inner.send(request, exchange, activity).await;
            let reply = exchange.text.clone();
            self.log.lock().unwrap().push((request.clone(), reply));
        })
    }
}

type Log = BTreeMap<u64, (RequestSpec, String)>;

/// Runs 6 sessions of 4 turns (20-token messages, 8-token answers, 500 ms think time) on 3
/// closed-loop users; returns the records, what the backend sent and got, and the step.
async fn run_sessions() -> (Vec<RequestRecord>, Log, StepReport) {
    let sessions = Arc::new(SyntheticConversations {
        turns: "4".parse().unwrap(),
        user_tokens: "20".parse().unwrap(),
        output_tokens: Some("8".parse().unwrap()),
        think_time: ThinkTime::Fixed(Duration::from_millis(500)),
        prefix: None,
        agent: None,
        vocabulary: vocabulary(),
        seed: 9,
    });
    let server = SimServer::new(fixed(100, 10, 16)).unwrap();
    let capture = Arc::new(Capture {
        inner: OpenAiBackend::new(openai(server.model_name()), in_memory_client(&server)).unwrap(),
        log: Mutex::new(Vec::new()),
    });
    let config = RunConfig {
        load: LoadSpec::Closed { concurrency: 3 },
        max_requests: Some(24),
        warmup: Warmup::None,
        ..RunConfig::default()
    };
    let backend = Arc::clone(&capture) as Arc<dyn Backend>;
    let counter = Arc::new(Tiktoken::cl100k());
    let runner = Runner::new(config.clone(), backend, sessions, counter, true);
    let mut collect = Collect::default();
    let mut aggregator = StepAggregator::new(None, config.window);
    runner
        .run(
            &mut [&mut collect, &mut aggregator],
            CancellationToken::new(),
        )
        .await;
    let log = capture.log.lock().unwrap().clone();
    let log = log
        .into_iter()
        .map(|(spec, reply)| (spec.index, (spec, reply)))
        .collect();
    (
        collect.0,
        log,
        aggregator.report(LoadReport::from(&config.load)),
    )
}

/// One session's turns, in order: each carries the replies the server gave to the earlier
/// ones, a growing context, and waits the think time.
fn check_session(turns: &[&RequestRecord], log: &Log) {
    let mut replies: Vec<&str> = Vec::new();
    for (t, record) in turns.iter().enumerate() {
        assert_eq!(record.turn, Some(t as u32));
        let (spec, reply) = &log[&record.index];
        let RequestInput::Messages(messages) = &spec.input else {
            panic!("a conversation")
        };
        assert_eq!(messages.len(), 2 * t + 1);
        let history: Vec<String> = messages
            .iter()
            .filter(|m| m.role == "assistant")
            .map(|m| m.content.text())
            .collect();
        assert_eq!(
            history, replies,
            "the history holds the server's actual replies"
        );
        // 20 user tokens per turn, 8 reply tokens per earlier turn, each message's template.
        let served = record.input_tokens.unwrap();
        assert_eq!(served, 28 * t as u64 + 20 + 3 + 4 * (2 * t as u64 + 1));
        if t > 0 {
            assert!(served > turns[t - 1].input_tokens.unwrap(), "context grows");
            let think = record.scheduled_us - turns[t - 1].end_us;
            assert!((500_000..501_000).contains(&think), "think time {think} µs");
        }
        replies.push(reply);
    }
}

#[tokio::test(start_paused = true)]
async fn multi_turn_histories_grow_and_carry_the_servers_replies() {
    let (records, log, step) = run_sessions().await;
    assert_eq!(records.len(), 24, "6 sessions of 4 turns");
    let mut sessions: BTreeMap<u64, Vec<&RequestRecord>> = BTreeMap::new();
    for record in &records {
        sessions
            .entry(record.session.unwrap())
            .or_default()
            .push(record);
    }
    assert_eq!(sessions.len(), 6);
    for turns in sessions.values_mut() {
        turns.sort_by_key(|r| r.turn);
        check_session(turns, &log);
    }
    assert_eq!(step.turns.len(), 4);
    for (t, row) in step.turns.iter().enumerate() {
        assert_eq!(row.turn, t as u32);
        assert_eq!(row.metrics.requests.completed, 6);
        let ttft = row.metrics.latency_ms.ttft.p50.unwrap();
        assert!((ttft - 100.0).abs() < 1.0, "turn {t}: TTFT {ttft}");
    }
    assert_eq!(step.workload_stats.sessions, Some(6));
    assert_eq!(
        step.workload_stats.turns_per_session.as_ref().unwrap().p50,
        Some(4)
    );
}

fn batching(prefix_caching: bool) -> SimConfig {
    SimConfig {
        engine: EngineConfig::Batching(BatchingConfig {
            prefix_caching,
            ..BatchingConfig::default()
        }),
        prompt_tokenizer: PromptTokenizer::Words,
        ..SimConfig::default()
    }
}

async fn shared_prefix_step(prefix_caching: bool) -> StepReport {
    let workload = Arc::new(GeneratedWorkload {
        input: "64".parse().unwrap(),
        output: Some("16".parse().unwrap()),
        prefix: Some(SharedPrefix {
            groups: 2,
            tokens: 3000,
        }),
        vocabulary: vocabulary(),
        seed: 4,
    });
    let server = SimServer::new(batching(prefix_caching)).unwrap();
    let mut config = open(4.0, 40);
    config.warmup = Warmup::Requests(4);
    let result = run_with(
        config,
        in_memory_client(&server),
        openai(server.model_name()),
        workload,
        CancellationToken::new(),
    )
    .await;
    assert_eq!(result.step.requests.completed, 36);
    result.step
}

#[tokio::test(start_paused = true)]
async fn shared_prefixes_lower_ttft_with_prefix_caching_on() {
    let cached = shared_prefix_step(true).await;
    let uncached = shared_prefix_step(false).await;
    let (on, off) = (
        cached.latency_ms.ttft.mean.unwrap(),
        uncached.latency_ms.ttft.mean.unwrap(),
    );
    println!("mean TTFT with prefix caching {on:.1} ms, without {off:.1} ms");
    assert!(on * 2.0 < off, "on {on} ms vs off {off} ms");
}

/// Runs `workload` on the completions API against a fixed 50 ms / 5 ms simulator.
async fn run_completions(
    workload: Arc<dyn Workload>,
    config: RunConfig,
    buckets: LengthBuckets,
) -> StepReport {
    let server = SimServer::new(fixed(50, 5, 64)).unwrap();
    let settings = OpenAiConfig {
        api: ApiKind::Completions,
        ..openai(server.model_name())
    };
    let backend = Arc::new(OpenAiBackend::new(settings, in_memory_client(&server)).unwrap());
    let counter = Arc::new(Tiktoken::cl100k());
    let runner = Runner::new(config.clone(), backend, workload, counter, true);
    let mut aggregator = StepAggregator::new(None, config.window).with_length_buckets(buckets);
    runner
        .run(&mut [&mut aggregator], CancellationToken::new())
        .await;
    aggregator.report(LoadReport::from(&config.load))
}

#[tokio::test(start_paused = true)]
async fn every_metric_is_reported_per_length_bucket() {
    let workload = Arc::new(GeneratedWorkload {
        input: "mix:50%=100,30%=600,20%=2000".parse().unwrap(),
        output: Some("4".parse().unwrap()),
        prefix: None,
        vocabulary: vocabulary(),
        seed: 8,
    });
    let buckets: LengthBuckets = "short<500,medium<1000,long".parse().unwrap();
    let step = run_completions(workload, open(20.0, 200), buckets).await;
    let names: Vec<&str> = step.buckets.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["short", "medium", "long"]);
    let completed: Vec<u64> = step
        .buckets
        .iter()
        .map(|b| b.metrics.requests.completed)
        .collect();
    assert_eq!(completed.iter().sum::<u64>(), 200);
    assert!(completed.iter().all(|&n| n > 20), "{completed:?}");
    let mut rps = 0.0;
    for bucket in &step.buckets {
        let m = &bucket.metrics;
        assert!((m.latency_ms.ttft.p50.unwrap() - 50.0).abs() < 1.0);
        let per_request = m.tokens.input_per_request.mean.unwrap();
        let lo = bucket.min_input_tokens as f64;
        let hi = bucket.max_input_tokens.map_or(f64::MAX, |m| m as f64);
        assert!(
            (lo..=hi).contains(&per_request),
            "{}: {per_request}",
            bucket.name
        );
        assert_eq!(
            m.tokens.output_total,
            4 * m.requests.completed,
            "input and output apart"
        );
        rps += m.throughput.requests_per_sec;
    }
    assert!(
        (rps - step.throughput.requests_per_sec).abs() < 1e-9,
        "slices add up"
    );
    assert!(step.turns.is_empty());
}

#[tokio::test(start_paused = true)]
async fn open_loop_arrivals_start_sessions_and_requests_count_turns() {
    let sessions = Arc::new(SyntheticConversations {
        turns: "3".parse().unwrap(),
        user_tokens: "10".parse().unwrap(),
        output_tokens: Some("4".parse().unwrap()),
        think_time: ThinkTime::Fixed(Duration::from_secs(1)),
        prefix: None,
        agent: None,
        vocabulary: vocabulary(),
        seed: 2,
    });
    let server = SimServer::new(fixed(20, 5, 16)).unwrap();
    let result = run_with(
        open(2.0, 12),
        in_memory_client(&server),
        openai(server.model_name()),
        sessions,
        CancellationToken::new(),
    )
    .await;
    assert_eq!(result.records.len(), 12, "--requests counts turns");
    let mut openings: Vec<(u64, u64)> = result
        .records
        .iter()
        .filter(|r| r.turn == Some(0))
        .map(|r| (r.session.unwrap(), r.scheduled_us))
        .collect();
    openings.sort_unstable();
    for (k, &(session, scheduled_us)) in openings.iter().enumerate() {
        assert_eq!(session, k as u64);
        assert_eq!(
            scheduled_us,
            k as u64 * 500_000,
            "sessions start at the arrivals"
        );
    }
    // Arrivals at 0, 0.5 … 2.5 s open six sessions before the twelfth request is claimed
    // (second turns follow 1 s after each reply, third turns 1 s later).
    assert_eq!(openings.len(), 6);
}

/// Sessions of `turns` turns (10-token messages, 4-token answers) after a 1 s think time.
fn short_sessions(turns: &str) -> Arc<SyntheticConversations> {
    Arc::new(SyntheticConversations {
        turns: turns.parse().unwrap(),
        user_tokens: "10".parse().unwrap(),
        output_tokens: Some("4".parse().unwrap()),
        think_time: ThinkTime::Fixed(Duration::from_secs(1)),
        prefix: None,
        agent: None,
        vocabulary: vocabulary(),
        seed: 2,
    })
}

#[tokio::test(start_paused = true)]
async fn sessions_on_a_sped_up_target_keep_its_time() {
    // The simulator runs 4× faster than real time: sessions open at the arrivals and users
    // think for 1 s of the target's time, as single requests are scheduled in it.
    let sessions = short_sessions("2");
    let mut sim = fixed(20, 5, 16);
    sim.time_scale = 4.0;
    let server = SimServer::new(sim).unwrap();
    let mut config = open(2.0, 8);
    config.time_scale = 4.0;
    let started = tokio::time::Instant::now();
    let result = run_with(
        config,
        in_memory_client(&server),
        openai(server.model_name()),
        sessions,
        CancellationToken::new(),
    )
    .await;
    assert_eq!(result.records.len(), 8);
    let mut turns: BTreeMap<u64, Vec<&RequestRecord>> = BTreeMap::new();
    for record in &result.records {
        turns
            .entry(record.session.unwrap())
            .or_default()
            .push(record);
    }
    let mut thought = 0;
    for (session, turns) in turns.iter_mut() {
        turns.sort_by_key(|r| r.turn);
        assert_eq!(
            turns[0].scheduled_us,
            session * 500_000,
            "opens at its arrival"
        );
        // Sessions opened late end when `--requests` is reached before their second turn.
        let Some(second) = turns.get(1) else {
            continue;
        };
        thought += 1;
        let think = second.scheduled_us - turns[0].end_us;
        assert!(
            think.abs_diff(1_000_000) <= 1_000,
            "thinks 1 s of target time, not {think} µs"
        );
    }
    assert!(thought >= 2, "{thought} sessions reached their second turn");
    // Eight requests over 2.5 s and a 1 s think take about 3 s of target time, a quarter of
    // that really.
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
}
