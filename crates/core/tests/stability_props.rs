//! Property tests of the stability verdict over random arrival and service rates: an M/D/c
//! queue (Poisson arrivals, c servers, fixed service time, FIFO) is simulated exactly and its
//! records folded into a step. The verdict is a statistical test — stable only when an upper
//! bound at two standard errors rules out a 15 % overload — so an overload of exactly 15 % is
//! called stable in a small share of runs by design; that share is measured here against its
//! bound, and the random cases are drawn from fixed seeds, so every run of the suite judges the
//! same queues.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use goodput_core::config::{Arrival, LoadSpec};
use goodput_core::metrics::StepAggregator;
use goodput_core::metrics::stability::{Stability, Verdict};
use goodput_core::record::{Phase, RequestRecord};
use goodput_core::report::LoadReport;
use proptest::prelude::*;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};

fn record(index: u64, phase: Phase, scheduled_us: u64, end_us: u64) -> RequestRecord {
    let mut record: RequestRecord = serde_json::from_value(serde_json::json!({
        "index": index, "phase": "measure", "scheduled_us": scheduled_us,
        "dequeued_us": scheduled_us, "sent_us": scheduled_us, "response_us": end_us,
        "first_token_us": end_us, "last_token_us": end_us, "end_us": end_us,
        "streamed": false, "input_tokens": 10, "input_tokens_source": "usage",
        "output_tokens": 1, "output_tokens_source": "usage", "chunks": [[end_us, 1]],
        "items": 1, "status": 200
    }))
    .unwrap();
    record.phase = phase;
    record
}

/// The stability of an M/D/c queue run for `secs` at `rate` (10 % warm-up, 1 s windows).
fn simulate(rate: f64, servers: usize, service_us: u64, secs: u64, seed: u64) -> Stability {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut free_at = vec![0u64; servers];
    let mut aggregator = StepAggregator::new(None, Duration::from_secs(1));
    let (mut t, end) = (0.0f64, secs as f64);
    let mut index = 0;
    loop {
        let u: f64 = rng.random::<f64>().max(1e-12);
        t += -u.ln() / rate;
        if t >= end {
            break;
        }
        let at = (t * 1e6) as u64;
        let slot = (0..servers).min_by_key(|&i| free_at[i]).unwrap();
        let done = free_at[slot].max(at) + service_us;
        free_at[slot] = done;
        let phase = if t < end * 0.1 {
            Phase::Warmup
        } else {
            Phase::Measure
        };
        aggregator.add(&record(index, phase, at, done));
        index += 1;
    }
    aggregator
        .report(LoadReport::from(&LoadSpec::Open {
            rate_per_sec: rate,
            arrival: Arrival::Poisson,
            max_concurrency: None,
        }))
        .stability
}

/// The share of `cases` random M/D/c runs (1–31 servers, 20–2,000 ms service, 20–90 s) at
/// `overload` × capacity that the verdict calls stable, drawn from `seed`.
fn stable_share(overload: f64, cases: u32, seed: u64) -> f64 {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let stable = (0..cases)
        .filter(|_| {
            let servers = rng.random_range(1usize..32);
            let service_ms = rng.random_range(20u64..2_000);
            let secs = rng.random_range(20u64..90);
            let capacity = servers as f64 / (service_ms as f64 / 1000.0);
            let s = simulate(
                capacity * overload,
                servers,
                service_ms * 1000,
                secs,
                rng.random(),
            );
            s.verdict == Verdict::Stable
        })
        .count();
    stable as f64 / f64::from(cases)
}

/// A one-sided bound at two standard errors errs in about 2.3 % of runs at the boundary; the
/// verdict's two checks (E2E slope or in-flight growth) may each pass. Measured during
/// development: 1.3 % of 1,000 runs at exactly 15 %, 0.3 % at 20 %, none of 1,500 at 30 %.
#[test]
fn a_15_percent_overload_is_rarely_called_stable() {
    let at_bound = stable_share(1.15, 400, 15);
    assert!(at_bound <= 0.025, "{:.1} % called stable", at_bound * 100.0);
    let beyond = stable_share(1.5, 200, 50);
    assert_eq!(beyond, 0.0, "a 50 % overload called stable");
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        rng_seed: proptest::test_runner::RngSeed::Fixed(20_261_207),
        ..ProptestConfig::default()
    })]

    #[test]
    fn overload_is_never_stable(
        servers in 1usize..32,
        service_ms in 20u64..2_000,
        overload in 1.15f64..3.0,
        secs in 20u64..90,
        seed in any::<u64>(),
    ) {
        let capacity = servers as f64 / (service_ms as f64 / 1000.0);
        let s = simulate(capacity * overload, servers, service_ms * 1000, secs, seed);
        prop_assert_ne!(s.verdict, Verdict::Stable, "{:?}", s);
    }

    #[test]
    fn light_load_is_never_unstable(
        servers in 1usize..32,
        service_ms in 20u64..2_000,
        load in 0.05f64..0.85,
        secs in 20u64..90,
        seed in any::<u64>(),
    ) {
        let capacity = servers as f64 / (service_ms as f64 / 1000.0);
        let s = simulate(capacity * load, servers, service_ms * 1000, secs, seed);
        prop_assert_ne!(s.verdict, Verdict::Unstable, "{:?}", s);
    }
}
