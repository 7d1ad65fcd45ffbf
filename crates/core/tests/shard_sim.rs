//! Sharded runs against one simulator in virtual time: four shards together send exactly the
//! single-process schedule (same indices, same scheduled offsets), their union measures exactly
//! what one process measures, closed loop splits its concurrency without sending an index
//! twice, and a shared start time is waited for (or, when past, reported as lateness).
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use goodput_core::backend::openai::OpenAiBackend;
use goodput_core::config::{Arrival, LoadSpec, RunConfig, Warmup};
use goodput_core::metrics::StepAggregator;
use goodput_core::record::RequestRecord;
use goodput_core::report::LoadReport;
use goodput_core::runner::{RunOutcome, Runner};
use goodput_core::schedule::ArrivalSchedule;
use goodput_core::shard::Shard;
use goodput_core::tokens::Tiktoken;
use goodput_core::workload::{
    PromptVocabulary, SyntheticConversations, SyntheticWorkload, ThinkTime, Workload,
};
use goodput_sim::SimServer;
use support::{Collect, fixed, in_memory_client, openai};
use tokio_util::sync::CancellationToken;

fn open(requests: u64) -> RunConfig {
    RunConfig {
        load: LoadSpec::Open {
            rate_per_sec: 40.0,
            arrival: Arrival::Poisson,
            max_concurrency: None,
        },
        max_requests: Some(requests),
        warmup: Warmup::Requests(10),
        seed: 7,
        ..RunConfig::default()
    }
}

/// Runs `config` as `shard` (optionally from a shared start) against `server`.
async fn run_shard(
    server: &SimServer,
    config: &RunConfig,
    shard: Shard,
    start_at: Option<SystemTime>,
) -> (Vec<RequestRecord>, RunOutcome) {
    let workload = Arc::new(SyntheticWorkload {
        input_tokens: 32,
        output_tokens: Some(8),
        seed: 1,
    });
    run_workload(server, config, shard, start_at, workload).await
}

async fn run_workload(
    server: &SimServer,
    config: &RunConfig,
    shard: Shard,
    start_at: Option<SystemTime>,
    workload: Arc<dyn Workload>,
) -> (Vec<RequestRecord>, RunOutcome) {
    let backend = Arc::new(
        OpenAiBackend::new(openai(server.model_name()), in_memory_client(server)).unwrap(),
    );
    let mut runner = Runner::new(
        config.clone(),
        backend,
        workload,
        Arc::new(Tiktoken::cl100k()),
        true,
    )
    .with_shard(shard);
    if let Some(at) = start_at {
        runner = runner.with_start_at(at);
    }
    let mut collect = Collect::default();
    let outcome = runner
        .run(&mut [&mut collect], CancellationToken::new())
        .await;
    (collect.0, outcome)
}

async fn four_shards(config: &RunConfig) -> Vec<Vec<RequestRecord>> {
    let server = SimServer::new(fixed(100, 10, 256)).unwrap();
    let runs = (0..4).map(|k| {
        let (server, config) = (server.clone(), config.clone());
        async move { run_shard(&server, &config, Shard::new(4, k).unwrap(), None).await }
    });
    futures_util::future::join_all(runs)
        .await
        .into_iter()
        .map(|(records, _)| records)
        .collect()
}

fn report(config: &RunConfig, records: &[RequestRecord]) -> serde_json::Value {
    let mut aggregator = StepAggregator::new(config.slo.clone(), config.window);
    records.iter().for_each(|r| aggregator.add(r));
    serde_json::to_value(aggregator.report(LoadReport::from(&config.load))).unwrap()
}

#[tokio::test(start_paused = true)]
async fn the_shards_send_exactly_the_single_process_schedule() {
    let config = open(200);
    let shards = four_shards(&config).await;
    let schedule: Vec<u64> = ArrivalSchedule::new(40.0, Arrival::Poisson, 7)
        .take(200)
        .map(|d| d.as_micros() as u64)
        .collect();
    let mut sent: Vec<(u64, u64)> = Vec::new();
    for (k, records) in shards.iter().enumerate() {
        assert_eq!(records.len(), 50, "shard {k} sends its quarter");
        for record in records {
            assert_eq!(
                record.index % 4,
                k as u64,
                "shard {k} sent only its own arrivals"
            );
            sent.push((record.index, record.scheduled_us));
        }
    }
    sent.sort_unstable();
    let expected: Vec<(u64, u64)> = (0u64..).zip(schedule).collect();
    assert_eq!(sent.len(), expected.len());
    for ((index, at), (want_index, want_at)) in sent.iter().zip(&expected) {
        assert_eq!(index, want_index, "no request is sent twice or lost");
        assert!(
            at.abs_diff(*want_at) <= 1,
            "request {index}: {at} µs vs {want_at} µs"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn the_union_of_the_shards_measures_what_one_process_measures() {
    let config = open(200);
    let shards = four_shards(&config).await;
    let single = SimServer::new(fixed(100, 10, 256)).unwrap();
    let (alone, _) = run_shard(&single, &config, Shard::SINGLE, None).await;
    let mut union: Vec<RequestRecord> = shards.into_iter().rev().flatten().collect();
    let mut alone_sorted = alone.clone();
    union.sort_by_key(|r| r.index);
    alone_sorted.sort_by_key(|r| r.index);
    assert_eq!(union.len(), alone_sorted.len());
    for (a, b) in union.iter().zip(&alone_sorted) {
        let (a, b) = (
            serde_json::to_value(a).unwrap(),
            serde_json::to_value(b).unwrap(),
        );
        for (key, value) in a.as_object().unwrap() {
            // Only the `Date` header differs: the two runs are seconds apart in real time.
            if key != "headers" {
                assert_eq!(value, &b[key], "request {}: {key}", a["index"]);
            }
        }
    }
    assert_eq!(report(&config, &union), report(&config, &alone));
}

#[tokio::test(start_paused = true)]
async fn closed_loop_splits_the_concurrency_and_numbers_requests_apart() {
    let config = RunConfig {
        load: LoadSpec::Closed { concurrency: 10 },
        max_requests: Some(120),
        warmup: Warmup::None,
        ..RunConfig::default()
    };
    let server = SimServer::new(fixed(100, 10, 256)).unwrap();
    let mut indices = BTreeSet::new();
    for k in 0..4 {
        let (records, _) = run_shard(&server, &config, Shard::new(4, k).unwrap(), None).await;
        // 10 workers over 4 shards: 3, 3, 2, 2 at once.
        let first_round = records
            .iter()
            .filter(|r| r.scheduled_us == records[0].scheduled_us);
        assert_eq!(first_round.count(), if k < 2 { 3 } else { 2 }, "shard {k}");
        for record in records {
            assert_eq!(record.index % 4, u64::from(k));
            assert!(
                indices.insert(record.index),
                "index {} sent twice",
                record.index
            );
        }
    }
    assert_eq!(
        indices,
        (0..120).collect(),
        "together exactly --requests 120"
    );
}

#[tokio::test(start_paused = true)]
async fn a_shared_start_is_waited_for_and_a_late_one_is_reported() {
    let config = open(20);
    let server = SimServer::new(fixed(100, 10, 256)).unwrap();
    let shard = Shard::new(2, 1).unwrap();
    let before = tokio::time::Instant::now();
    let at = SystemTime::now() + Duration::from_secs(3);
    let (records, outcome) = run_shard(&server, &config, shard, Some(at)).await;
    assert_eq!(outcome.late_start, Some(Duration::ZERO));
    assert!(
        before.elapsed() >= Duration::from_millis(2900),
        "it waited for the start"
    );
    assert_eq!(records.len(), 10);

    let past = SystemTime::now() - Duration::from_millis(400);
    let (records, outcome) = run_shard(&server, &config, shard, Some(past)).await;
    let late = outcome.late_start.unwrap();
    assert!(
        late >= Duration::from_millis(400) && late < Duration::from_secs(2),
        "{late:?}"
    );
    let burst = records.iter().filter(|r| r.scheduled_us < 400_000);
    assert!(
        burst.clone().all(|r| r.sent_us.unwrap() >= 400_000 - 1),
        "arrivals due before it began went at once"
    );
    assert!(burst.count() > 0);
}

#[tokio::test(start_paused = true)]
async fn sessions_are_split_by_session_and_requests_numbered_apart() {
    let sessions: Arc<dyn Workload> = Arc::new(SyntheticConversations {
        turns: "3".parse().unwrap(),
        user_tokens: "10".parse().unwrap(),
        output_tokens: Some("4".parse().unwrap()),
        think_time: ThinkTime::Fixed(Duration::from_millis(300)),
        prefix: None,
        agent: None,
        vocabulary: Arc::new(PromptVocabulary::cl100k()),
        seed: 9,
    });
    let config = RunConfig {
        load: LoadSpec::Open {
            rate_per_sec: 4.0,
            arrival: Arrival::Constant,
            max_concurrency: None,
        },
        max_requests: None,
        duration: Some(Duration::from_millis(1900)),
        warmup: Warmup::None,
        ..RunConfig::default()
    };
    let turns = |records: &[RequestRecord]| -> BTreeSet<(u64, u32)> {
        records
            .iter()
            .map(|r| (r.session.unwrap(), r.turn.unwrap()))
            .collect()
    };
    let single = SimServer::new(fixed(100, 10, 256)).unwrap();
    let alone = run_workload(&single, &config, Shard::SINGLE, None, Arc::clone(&sessions));
    let (alone, _) = alone.await;
    let server = SimServer::new(fixed(100, 10, 256)).unwrap();
    let (mut union, mut indices) = (BTreeSet::new(), BTreeSet::new());
    for k in 0..2 {
        let shard = Shard::new(2, k).unwrap();
        let run = run_workload(&server, &config, shard, None, Arc::clone(&sessions));
        let (records, _) = run.await;
        for record in &records {
            assert_eq!(
                record.session.unwrap() % 2,
                u64::from(k),
                "its own sessions"
            );
            assert!(indices.insert(record.index), "index {} twice", record.index);
        }
        union.extend(turns(&records));
    }
    assert!(turns(&alone).len() > 8, "{:?}", turns(&alone));
    assert_eq!(
        union,
        turns(&alone),
        "the same sessions and turns as one process"
    );
}
