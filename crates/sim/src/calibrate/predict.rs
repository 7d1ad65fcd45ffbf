//! One probe shape replayed in virtual time: a closed loop of `concurrency` clients sending
//! `requests` identical requests, and the medians a client would have measured.

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
    let pick = |f: &dyn Fn(&RequestTimeline) -> Option<Duration>| {
        median(timelines.iter().filter_map(f).map(|d| d.as_secs_f64()))
    };
    let done = timelines.iter().filter(|t| t.finished.is_some()).count();
    Predicted {
        ttft: pick(&RequestTimeline::ttft),
        tpot: pick(&RequestTimeline::tpot),
        e2e: pick(&RequestTimeline::e2e),
        requests_per_sec: if end.is_zero() {
            0.0
        } else {
            done as f64 / end.as_secs_f64()
        },
    }
}

/// The median (mean of the middle two for an even count); 0 for no values.
pub(crate) fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut sorted: Vec<f64> = values.collect();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    match n {
        0 => 0.0,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}
