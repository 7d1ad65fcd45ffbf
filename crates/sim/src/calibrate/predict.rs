//! One probe shape replayed in virtual time: a closed loop of `concurrency` clients sending
//! `requests` identical requests, and the medians a client would have measured — by the
//! client's own percentile method (nearest rank), so a probe whose requests split into waves
//! (half served at once, half queued) has the same median on both sides of the fit.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::build_engine;
use crate::config::SimConfig;
use crate::engine::{EngineEvent, EngineRequest};
use crate::virtual_time::{RequestTimeline, Simulation};

/// A probe: closed-loop clients sending requests of one shape (EOS ignored).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ProbeShape {
    /// Clients, each sending its next request when its previous one ends.
    pub concurrency: u32,
    /// Prompt tokens per request, as the server counts them.
    pub prompt_tokens: u32,
    /// Answer tokens per request.
    pub output_tokens: u32,
    /// Requests in all.
    pub requests: u32,
}

/// The tail of one latency distribution, seconds (0 for no values).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Tail {
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
}

/// What a client would measure: medians over the requests, seconds, and the throughput.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Predicted {
    /// Median time to first token.
    pub ttft: f64,
    /// Median time per output token after the first.
    pub tpot: f64,
    /// Median end-to-end latency.
    pub e2e: f64,
    /// Requests completed per second over the whole probe.
    pub requests_per_sec: f64,
    /// TTFT, TPOT and E2E tails, in that order.
    pub tails: [Tail; 3],
}

/// Replays `shape` on the engine of `config` in virtual time.
pub fn predict(config: &SimConfig, shape: &ProbeShape) -> Predicted {
    let request = |id: u64| EngineRequest {
        id,
        prompt_tokens: shape.prompt_tokens.max(1),
        block_hashes: Vec::new(),
        max_output_tokens: shape.output_tokens.max(1),
        stop_after_tokens: shape.output_tokens.max(1),
    };
    let total = u64::from(shape.requests.max(1));
    let mut sim = Simulation::new(build_engine(config));
    let mut next = 0u64;
    while next < u64::from(shape.concurrency.max(1)).min(total) {
        sim.submit(Duration::ZERO, request(next));
        next += 1;
    }
    loop {
        let events = sim.run_next();
        if events.is_empty() {
            break;
        }
        let ended = events.iter().filter(|e| ends(e)).count();
        for _ in 0..ended {
            if next < total {
                sim.submit(sim.now(), request(next));
                next += 1;
            }
        }
    }
    summarise(sim.timelines(), sim.now())
}

/// How many times as fast as a configuration says the server runs now: the configuration's
/// median E2E on a probe ([`predict`]) over the server's (`measured_e2e`, seconds) — above 1
/// the server is faster. [`SimConfig::at_speed`] with it reproduces that probe's E2E. `None`
/// when either is not a positive time.
pub fn speed_factor(measured_e2e: f64, predicted: &Predicted) -> Option<f64> {
    let factor = predicted.e2e / measured_e2e;
    (measured_e2e > 0.0 && predicted.e2e > 0.0 && factor.is_finite()).then_some(factor)
}

fn ends(event: &EngineEvent) -> bool {
    matches!(
        event,
        EngineEvent::Tokens {
            finished: Some(_),
            ..
        } | EngineEvent::Aborted { .. }
    )
}

fn summarise(timelines: &[RequestTimeline], end: Duration) -> Predicted {
    let values = |f: fn(&RequestTimeline) -> Option<Duration>| -> Vec<f64> {
        timelines
            .iter()
            .filter_map(f)
            .map(|d| d.as_secs_f64())
            .collect()
    };
    let pick = |f| percentile(&values(f), 0.5);
    let tail = |f| {
        let v = values(f);
        Tail {
            p95: percentile(&v, 0.95),
            p99: percentile(&v, 0.99),
        }
    };
    let done = timelines.iter().filter(|t| t.finished.is_some()).count();
    Predicted {
        ttft: pick(RequestTimeline::ttft),
        tpot: pick(RequestTimeline::tpot),
        e2e: pick(RequestTimeline::e2e),
        tails: [
            tail(RequestTimeline::ttft),
            tail(RequestTimeline::tpot),
            tail(RequestTimeline::e2e),
        ],
        requests_per_sec: if end.is_zero() {
            0.0
        } else {
            done as f64 / end.as_secs_f64()
        },
    }
}

/// The `q` quantile as the client reports it (`goodput_core::metrics::histogram`): the
/// smallest value with at least a fraction `q` of the values at or below it (nearest rank, no
/// interpolation — of 16 requests, 8 served at once and 8 queued, the median is the eighth,
/// the last of the first wave); 0 for no values.
pub(crate) fn percentile(values: &[f64], q: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    if n == 0 {
        return 0.0;
    }
    let rank = (q.clamp(0.0, 1.0) * n as f64).ceil() as usize;
    sorted[rank.clamp(1, n) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_take_the_nearest_rank_as_the_client_does() {
        let values: Vec<f64> = (1..=11).map(f64::from).collect();
        assert_eq!(percentile(&values, 0.5), 6.0);
        // 0.95 × 11 = 10.45: the 11th value, not 10.5 between the 10th and 11th.
        assert_eq!(percentile(&values, 0.95), 11.0);
        assert_eq!(percentile(&values, 0.0), 1.0);
        assert_eq!(percentile(&values, 1.0), 11.0);
        assert_eq!(percentile(&[], 0.99), 0.0);
        // Two waves of 8: the median is the first wave's last, not halfway to the second.
        let waves: Vec<f64> = [10.0; 8].into_iter().chain([130.0; 8]).collect();
        assert_eq!(percentile(&waves, 0.5), 10.0);
        assert_eq!(percentile(&waves, 0.51), 130.0);
    }

    #[test]
    fn a_probe_of_twice_the_slots_in_one_round_has_the_first_waves_median() {
        // 16 clients, one request each, on 8 slots: 8 first tokens after one prefill, 8 after
        // a whole answer. The client's median (nearest rank) is the eighth: the first wave.
        let mut config = SimConfig::default();
        if let crate::EngineConfig::Batching(engine) = &mut config.engine {
            engine.max_num_seqs = Some(8);
        }
        let shape = ProbeShape {
            concurrency: 16,
            prompt_tokens: 64,
            output_tokens: 48,
            requests: 16,
        };
        let predicted = predict(&config, &shape);
        let first_wave = predict(
            &config,
            &ProbeShape {
                concurrency: 8,
                requests: 8,
                ..shape
            },
        );
        assert!(
            (predicted.ttft / first_wave.ttft - 1.0).abs() < 1e-9,
            "{predicted:?} against {first_wave:?}"
        );
        assert!(
            predicted.tails[0].p95 > 2.0 * predicted.ttft,
            "{predicted:?}"
        );
    }

    #[test]
    fn the_configuration_at_the_speed_factor_reproduces_the_probe() {
        let config = SimConfig::default();
        let shape = ProbeShape {
            concurrency: 4,
            prompt_tokens: 300,
            output_tokens: 32,
            requests: 12,
        };
        let predicted = predict(&config, &shape);
        // The server took 80 % of the model's time: it runs 1.25 times as fast.
        let measured = 0.8 * predicted.e2e;
        let factor = speed_factor(measured, &predicted);
        assert!(
            factor.is_some_and(|f| (f - 1.25).abs() < 1e-9),
            "{factor:?}"
        );
        let now = config
            .at_speed(factor.unwrap_or(1.0))
            .map(|c| predict(&c, &shape));
        assert!(
            now.is_some_and(|p| (p.e2e / measured - 1.0).abs() < 1e-6),
            "{now:?}"
        );
        assert_eq!(speed_factor(0.0, &predicted), None);
        assert_eq!(speed_factor(1.0, &Predicted::default()), None);
    }
}
