//! The driver's tests: real-time delivery, cancellation and the published state.
#![allow(clippy::unwrap_used)]
use super::*;
use crate::config::FixedTimingConfig;
use crate::engine::fixed::FixedTimingEngine;
use crate::server_metrics::CacheConfigInfo;

fn fixed_driver(slots: u32, max_waiting: usize, time_scale: f64) -> DriverHandle {
    let config = FixedTimingConfig {
        ttft: Duration::from_millis(200),
        itl: Duration::from_millis(10),
        slots,
        max_waiting,
        ..FixedTimingConfig::default()
    };
    let metrics = ServerMetrics::new("m", 1000, CacheConfigInfo::default());
    let runtime = tokio::runtime::Handle::current();
    DriverHandle::spawn(
        &runtime,
        Box::new(FixedTimingEngine::new(config)),
        time_scale,
        metrics,
    )
}

fn request(tokens: u32) -> EngineRequest {
    EngineRequest {
        id: 0,
        prompt_tokens: 10,
        block_hashes: Vec::new(),
        max_output_tokens: tokens,
        stop_after_tokens: tokens,
    }
}

#[tokio::test(start_paused = true)]
async fn tokens_arrive_at_their_simulated_times() {
    let driver = fixed_driver(1, 0, 2.0);
    let start = Instant::now();
    let mut events = driver.submit(vec![request(3)]).await.unwrap();
    let mut arrivals = Vec::new();
    while let Some((position, update)) = events.recv().await {
        assert_eq!(position, 0);
        arrivals.push((start.elapsed(), update));
    }
    // Admission (with the prompt tokens found in the prefix cache) comes first, at once.
    assert_eq!(
        arrivals.remove(0),
        (Duration::ZERO, RequestUpdate::Admitted { cached_tokens: 0 })
    );
    let times: Vec<Duration> = arrivals.iter().map(|(at, _)| *at).collect();
    assert_eq!(times, [100, 105, 110].map(Duration::from_millis));
    assert_eq!(
        arrivals[2].1,
        RequestUpdate::Tokens {
            count: 1,
            finished: Some(FinishReason::Length)
        }
    );
    let counters = driver.published.lock().unwrap().metrics.token_counters();
    assert_eq!(
        (counters.prompt_tokens, counters.generation_tokens),
        (10, 3)
    );
}

#[tokio::test(start_paused = true)]
async fn a_full_queue_rejects_and_dropping_events_cancels() {
    let driver = fixed_driver(1, 0, 1.0);
    let first = driver.submit(vec![request(1000)]).await.unwrap();
    let refused = driver.submit(vec![request(5)]).await.unwrap_err();
    assert!(
        matches!(refused, SubmitError::Rejected(Rejection::QueueFull { .. })),
        "{refused:?}"
    );
    assert_eq!(driver.stats().running, 1);
    drop(first);
    tokio::time::sleep(Duration::from_millis(1)).await;
    assert_eq!(driver.stats().running, 0);
    assert!(
        driver
            .render_metrics()
            .contains("finished_reason=\"abort\"} 1")
    );
    assert!(driver.render_metrics().contains("reason=\"queue_full\"} 1"));
}

#[tokio::test(start_paused = true)]
async fn a_group_is_rejected_as_a_whole() {
    let driver = fixed_driver(1, 1, 1.0);
    // Three requests on one slot with one waiting place: the third is refused, and the
    // first two are withdrawn.
    let refused = driver
        .submit(vec![request(5), request(5), request(5)])
        .await
        .unwrap_err();
    assert!(matches!(
        refused,
        SubmitError::Rejected(Rejection::QueueFull { .. })
    ));
    assert_eq!((driver.stats().running, driver.stats().waiting), (0, 0));
}
