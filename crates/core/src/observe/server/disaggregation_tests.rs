//! The disaggregation figures of a server section, against arithmetic on hand-written scrapes:
//! SGLang's queue gauges summarised over the interval, vLLM's NIXL transfer histogram and
//! failure counter differenced over it.
#![allow(clippy::unwrap_used)]

use super::series::{Scrape, ScrapeLog};
use super::summary::disaggregation;

fn log(bodies: &[(u64, String)]) -> ScrapeLog {
    ScrapeLog {
        scrapes: bodies
            .iter()
            .map(|(at, body)| Scrape::from_body(*at, body.as_bytes()))
            .collect(),
    }
}

#[test]
fn queues_are_gauges_and_transfers_are_differenced_over_the_interval() {
    let scrape = |inflight: u32, transfer: u32, count: u32, sum: f64, failed: u32| {
        format!(
            "sglang:num_prefill_inflight_queue_reqs {inflight}\n\
             sglang:num_decode_transfer_queue_reqs {transfer}\n\
             vllm:nixl_xfer_time_seconds_bucket{{le=\"0.01\"}} {count}\n\
             vllm:nixl_xfer_time_seconds_bucket{{le=\"+Inf\"}} {count}\n\
             vllm:nixl_xfer_time_seconds_count {count}\n\
             vllm:nixl_xfer_time_seconds_sum {sum}\n\
             vllm:nixl_num_failed_transfers_total {failed}\n"
        )
    };
    let log = log(&[
        (0, scrape(2, 1, 10, 0.05, 1)),
        (1_000_000, scrape(4, 3, 30, 0.15, 1)),
        (2_000_000, scrape(6, 5, 50, 0.25, 3)),
    ]);
    let d = disaggregation(&log, (0, 2_000_000), (0, 2_000_000)).unwrap();
    assert_eq!(d.prefill_inflight_queue.mean, Some(4.0));
    assert_eq!(d.prefill_inflight_queue.max, Some(6.0));
    assert_eq!(d.decode_transfer_queue.mean, Some(3.0));
    // 40 transfers in the interval took 0.2 s in all: 5 ms each, all in the ≤ 10 ms bucket.
    assert_eq!(d.kv_transfer_ms.count, Some(40.0));
    assert!((d.kv_transfer_ms.mean.unwrap() - 5.0).abs() < 1e-9);
    assert_eq!(d.kv_transfer_ms.p99.unwrap().at_most_ms, Some(10.0));
    assert_eq!(d.kv_transfer_failures, Some(2.0));
    assert_eq!(d.prefill_prealloc_queue.samples, 0, "not exposed");
}

#[test]
fn a_server_without_disaggregation_metrics_has_no_section() {
    let log = log(&[(0, "vllm:num_requests_running 3\n".to_string())]);
    assert!(disaggregation(&log, (0, 1), (0, 1)).is_none());
}
