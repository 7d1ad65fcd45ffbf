//! The server-side metrics on their own: token counters, histogram exposition, aborts and
//! rejections, bucket boundaries.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use goodput_sim::engine::{EngineEvent, EngineStats, FinishReason, SimTime};
use goodput_sim::server_metrics::{
    CacheConfigInfo, ServerMetrics, TokenCounters, one_two_five_buckets,
};

fn ms(value: u64) -> SimTime {
    Duration::from_millis(value)
}

fn sample<'a>(text: &'a str, series: &str) -> &'a str {
    let line = text
        .lines()
        .find(|line| line.starts_with(series))
        .unwrap_or_else(|| panic!("{series}"));
    line.rsplit(' ').next().unwrap()
}

fn metrics_after_one_request() -> ServerMetrics {
    let mut metrics = ServerMetrics::new("m", 1000, CacheConfigInfo::default());
    metrics.record_arrival(1, ms(0), 12);
    metrics.record_event(&EngineEvent::Scheduled {
        id: 1,
        at: ms(400),
        cached_tokens: 0,
    });
    let tokens = |at, count, finished| EngineEvent::Tokens {
        id: 1,
        at: ms(at),
        count,
        finished,
    };
    metrics.record_event(&tokens(500, 1, None));
    metrics.record_event(&tokens(520, 2, None));
    metrics.record_event(&tokens(550, 1, Some(FinishReason::Length)));
    metrics
}

#[test]
fn token_counters_count_delivered_tokens() {
    let metrics = metrics_after_one_request();
    assert_eq!(
        metrics.token_counters(),
        TokenCounters {
            prompt_tokens: 12,
            generation_tokens: 4
        }
    );
    let text = metrics.render(&EngineStats::default());
    assert_eq!(sample(&text, "vllm:prompt_tokens_total{"), "12");
    assert_eq!(sample(&text, "vllm:generation_tokens_total{"), "4");
    assert_eq!(
        sample(
            &text,
            "vllm:request_success_total{model_name=\"m\",finished_reason=\"length\"}"
        ),
        "1"
    );
}

#[test]
fn histograms_are_cumulative_with_sum_and_count() {
    let text = metrics_after_one_request().render(&EngineStats::default());
    let ttft = "vllm:time_to_first_token_seconds";
    assert_eq!(
        sample(
            &text,
            &format!("{ttft}_bucket{{model_name=\"m\",le=\"0.25\"}}")
        ),
        "0"
    );
    assert_eq!(
        sample(
            &text,
            &format!("{ttft}_bucket{{model_name=\"m\",le=\"0.5\"}}")
        ),
        "1"
    );
    assert_eq!(
        sample(
            &text,
            &format!("{ttft}_bucket{{model_name=\"m\",le=\"+Inf\"}}")
        ),
        "1"
    );
    assert_eq!(sample(&text, &format!("{ttft}_sum{{")), "0.5");
    // Two deliveries after the first: 20 ms and 30 ms.
    let itl = "vllm:inter_token_latency_seconds";
    assert_eq!(sample(&text, &format!("{itl}_count{{")), "2");
    assert_eq!(
        sample(
            &text,
            &format!("{itl}_bucket{{model_name=\"m\",le=\"0.025\"}}")
        ),
        "1"
    );
    assert_eq!(sample(&text, "vllm:request_queue_time_seconds_sum{"), "0.4");
    assert_eq!(
        sample(
            &text,
            "vllm:request_generation_tokens_bucket{model_name=\"m\",le=\"5.0\"}"
        ),
        "1"
    );
    assert!(text.contains("# TYPE vllm:e2e_request_latency_seconds histogram"));
}

#[test]
fn aborts_and_rejections_are_counted() {
    let mut metrics = ServerMetrics::new("a\"b", 100, CacheConfigInfo::default());
    metrics.record_arrival(1, ms(0), 5);
    metrics.record_abort(1);
    metrics.record_abort(1);
    metrics.record_rejection("queue_full");
    let text = metrics.render(&EngineStats::default());
    assert!(
        text.contains(
            "vllm:request_success_total{model_name=\"a\\\"b\",finished_reason=\"abort\"} 1"
        ),
        "{text}"
    );
    assert!(text.contains("reason=\"queue_full\"} 1"));
    assert_eq!(metrics.token_counters(), TokenCounters::default());
}

#[test]
fn one_two_five_series_stops_at_the_limit() {
    assert_eq!(
        one_two_five_buckets(100),
        vec![1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0]
    );
    assert_eq!(one_two_five_buckets(0), Vec::<f64>::new());
    let text =
        ServerMetrics::new("m", 10, CacheConfigInfo::default()).render(&EngineStats::default());
    assert!(
        text.contains("vllm:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"0.001\"} 0")
    );
    assert!(
        text.contains("vllm:time_to_first_token_seconds_bucket{model_name=\"m\",le=\"2560.0\"} 0")
    );
    assert!(text.contains("vllm:request_prompt_tokens_bucket{model_name=\"m\",le=\"10.0\"} 0"));
}

#[test]
fn replicas_state_their_caches_one_engine_each_as_data_parallel_vllm_does() {
    let cache = |engines| CacheConfigInfo {
        block_size: 16,
        num_gpu_blocks: 1000,
        prefix_caching: false,
        engines,
    };
    let render =
        |engines| ServerMetrics::new("m", 10, cache(engines)).render(&EngineStats::default());
    let lines = |text: &str| {
        text.lines()
            .filter(|l| l.starts_with("vllm:cache_config_info{"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let three = lines(&render(3));
    assert_eq!(three.len(), 3, "{three:?}");
    for (i, line) in three.iter().enumerate() {
        assert!(line.contains(&format!("engine=\"{i}\"")), "{line}");
        assert!(line.contains("num_gpu_blocks=\"1000\""), "{line}");
    }
    let one = lines(&render(1));
    assert_eq!(one.len(), 1);
    assert!(!one[0].contains("engine="), "{one:?}");
}
