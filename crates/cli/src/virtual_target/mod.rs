//! The simulated engine as a virtual-time target: the engine is driven directly in virtual
//! time (no HTTP, no sleeping) and its request timelines become `RequestRecord`s, so the same
//! aggregator, SLO verdicts and capacity search give figures for a model × accelerator in
//! seconds of CPU. This crate composes `goodput-core` and `goodput-sim`, which never see each
//! other. [`capacity`] is `goodput capacity --virtual-time`, [`plan`] is `goodput plan
//! --simulate`.

pub(crate) mod capacity;
pub(crate) mod plan;

use std::time::Duration;

use goodput_core::config::{LoadSpec, RunConfig};
use goodput_core::decide::capacity::{
    CapacityReport, ProbeError, ProbePlan, SearchConfig, find_capacity,
};
use goodput_core::metrics::StepAggregator;
use goodput_core::metrics::aggregate::Compliance;
use goodput_core::record::{Failure, OutcomeKind, Phase, RequestRecord, TokenSource};
use goodput_core::report::{LoadReport, StepReport};
use goodput_core::schedule::open_loop_arrivals;
use goodput_sim::engine::{EngineEvent, EngineRequest};
use goodput_sim::virtual_time::{RequestTimeline, Simulation};
use goodput_sim::{SimConfig, build_engine};

/// A simulated deployment and the request shape sent to it.
#[derive(Debug, Clone)]
pub(crate) struct VirtualTarget {
    /// The simulator (engine, hardware, scheduler).
    pub(crate) sim: SimConfig,
    /// Prompt tokens per request.
    pub(crate) input_tokens: u32,
    /// Answer tokens per request (EOS ignored).
    pub(crate) output_tokens: u32,
}

impl VirtualTarget {
    /// Runs `config` (open loop, phase profile or closed loop) in virtual time.
    pub(crate) fn probe(&self, config: &RunConfig) -> (StepReport, Compliance) {
        // A replay takes its arrivals from a trace workload; the virtual target sends
        // synthetic requests only, so it has no arrivals to replay (an empty schedule).
        let timelines = match open_loop_arrivals(&config.load, config.seed, None) {
            Some((schedule, _)) => self.open_loop(config, schedule),
            None => match config.load {
                LoadSpec::Closed { concurrency } => self.closed_loop(config, concurrency),
                _ => Vec::new(),
            },
        };
        let mut aggregator = StepAggregator::new(config.slo.clone(), config.window);
        for (index, timeline) in timelines.iter().enumerate() {
            let offset = timeline.arrival;
            let phase = if config.is_warmup(index as u64, offset) {
                Phase::Warmup
            } else {
                Phase::Measure
            };
            aggregator.add(&record(
                index as u64,
                phase,
                timeline,
                self.input_tokens,
                self.output_tokens,
            ));
        }
        (
            aggregator.report(LoadReport::from(&config.load)),
            aggregator.compliance(),
        )
    }

    fn request(&self, id: u64) -> EngineRequest {
        EngineRequest {
            id,
            prompt_tokens: self.input_tokens,
            block_hashes: Vec::new(),
            max_output_tokens: self.output_tokens,
            stop_after_tokens: self.output_tokens,
        }
    }

    fn open_loop(
        &self,
        config: &RunConfig,
        schedule: impl Iterator<Item = Duration>,
    ) -> Vec<RequestTimeline> {
        let arrivals = (0u64..)
            .zip(schedule)
            .take_while(|(index, offset)| admits(config, *index, *offset))
            .map(|(index, offset)| (offset, self.request(index)));
        Simulation::run_open_loop(build_engine(&self.sim), arrivals)
            .timelines()
            .to_vec()
    }

    fn closed_loop(&self, config: &RunConfig, concurrency: u32) -> Vec<RequestTimeline> {
        let mut sim = Simulation::new(build_engine(&self.sim));
        let mut next = 0u64;
        while next < u64::from(concurrency) && admits(config, next, Duration::ZERO) {
            sim.submit(Duration::ZERO, self.request(next));
            next += 1;
        }
        loop {
            let events = sim.run_next();
            if events.is_empty() {
                break;
            }
            let ended = events
                .iter()
                .filter(|e| {
                    matches!(
                        e,
                        EngineEvent::Tokens {
                            finished: Some(_),
                            ..
                        } | EngineEvent::Aborted { .. }
                    )
                })
                .count();
            for _ in 0..ended {
                let now = sim.now();
                if admits(config, next, now) {
                    sim.submit(now, self.request(next));
                    next += 1;
                }
            }
        }
        sim.timelines().to_vec()
    }
}

/// Searches the capacity of `target` in virtual time, probes shaped by `plan`; `on_probe`
/// sees each judged probe. Returns the verdict and every probe's step report.
pub(crate) fn virtual_capacity(
    target: &VirtualTarget,
    plan: &ProbePlan,
    search: SearchConfig,
    on_probe: impl FnMut(&goodput_core::decide::capacity::Probe),
) -> (CapacityReport, Vec<StepReport>) {
    let probe = |_: usize, load: f64, run: u32| {
        let result = target.probe(&plan.config_for_run(load, run));
        std::future::ready(Ok::<_, ProbeError>(result))
    };
    let search = find_capacity(
        plan.dimension,
        search,
        &plan.criteria,
        plan.measured_requests,
        probe,
        on_probe,
    );
    // Every probe is synchronous, so the future completes on its first poll.
    futures_executor_block_on(search)
}

/// Polls a future that never waits to completion on the current thread.
fn futures_executor_block_on<F: std::future::Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
    }
}

fn admits(config: &RunConfig, index: u64, offset: Duration) -> bool {
    config.max_requests.is_none_or(|max| index < max) && config.duration.is_none_or(|d| offset < d)
}

fn micros(at: Duration) -> u64 {
    u64::try_from(at.as_micros()).unwrap_or(u64::MAX)
}

/// The deliveries as journal chunks: `[µs since the start, tokens]`.
fn chunks(timeline: &RequestTimeline) -> Vec<[u64; 2]> {
    timeline
        .deliveries
        .iter()
        .map(|(at, n)| [micros(*at), u64::from(*n)])
        .collect()
}

/// How the request failed, as a real client would have seen it (`None`: it completed).
fn failure(timeline: &RequestTimeline) -> Option<Failure> {
    match (&timeline.rejected, &timeline.aborted) {
        (Some(rejection), _) => Some(Failure::http(429, rejection.to_string())),
        (None, Some(reason)) => Some(Failure::new(OutcomeKind::StreamError, reason.clone())),
        (None, None) if timeline.finished.is_none() => {
            Some(Failure::new(OutcomeKind::Cancelled, "never finished"))
        }
        (None, None) => None,
    }
}

/// The record a real client would have written for this timeline.
fn record(
    index: u64,
    phase: Phase,
    timeline: &RequestTimeline,
    input: u32,
    output: u32,
) -> RequestRecord {
    let arrival = micros(timeline.arrival);
    let chunks = chunks(timeline);
    let failure = failure(timeline);
    let end = timeline.finished.map_or_else(
        || chunks.last().map_or(arrival, |c| c[0]),
        |(at, _)| micros(at),
    );
    let first_token_us = chunks.first().map(|c| c[0]);
    RequestRecord {
        index,
        phase,
        scheduled_us: arrival,
        dequeued_us: arrival,
        sent_us: Some(arrival),
        response_us: Some(arrival),
        first_token_us,
        last_token_us: chunks.last().map(|c| c[0]),
        end_us: end,
        streamed: true,
        input_tokens: Some(u64::from(input)),
        input_tokens_source: TokenSource::Workload,
        expected_input_tokens: Some(u64::from(input)),
        output_tokens: chunks.iter().map(|c| c[1]).sum(),
        output_tokens_source: TokenSource::Usage,
        requested_output_tokens: Some(u64::from(output)),
        tokenizer_output_tokens: None,
        chunks,
        items: 1,
        status: Some(if failure.is_some() { 429 } else { 200 }),
        failure,
        finish_reason: timeline
            .finished
            .map(|(_, reason)| reason.as_str().to_string()),
        retries: 0,
        headers: Vec::new(),
        server_timings: None,
        turn: None,
        step: 0,
        session: None,
        reasoning_tokens: None,
        reasoning_tokens_source: None,
        first_answer_us: first_token_us,
        tool_calls: 0,
        first_tool_call_us: None,
        tool_call_tokens: None,
        ended_in_tool_call: false,
        cached_input_tokens: None,
        expected_prefix_tokens: None,
        tool_result_turn: false,
    }
}

#[cfg(test)]
mod coverage;

#[cfg(test)]
mod tests {
    use goodput_core::config::{Arrival, Warmup};
    use goodput_core::metrics::Slo;
    use goodput_sim::config::{EngineConfig, FixedTimingConfig};

    use super::*;

    fn llama_8b_on(gpu: &str) -> VirtualTarget {
        let engine = goodput_sim::config::BatchingConfig {
            gpu: goodput_protocol::hardware::GpuSpec::preset(gpu).unwrap(),
            ..Default::default()
        };
        let sim = SimConfig {
            engine: EngineConfig::Batching(engine),
            ..SimConfig::default()
        };
        VirtualTarget {
            sim,
            input_tokens: 512,
            output_tokens: 128,
        }
    }

    fn plan(slo: &str) -> ProbePlan {
        let criteria = goodput_core::decide::capacity::Criteria {
            slo: Slo::parse(slo).unwrap(),
            attainment: 0.95,
            confidence: 0.95,
        };
        ProbePlan {
            base: RunConfig::default(),
            dimension: goodput_core::decide::capacity::Dimension::Rate,
            arrival: Arrival::Poisson,
            max_concurrency: None,
            measured_requests: goodput_core::decide::capacity::early_stopping::probe_requests(
                0.95, 0.95,
            ),
            warmup: Duration::from_secs(10),
            min_duration: Duration::from_secs(30),
            max_probe_duration: Duration::from_secs(600),
            criteria,
        }
    }

    #[test]
    fn h200_serves_more_than_h100_under_the_same_slo() {
        let search = SearchConfig {
            start: 4.0,
            min: 0.5,
            max: 1000.0,
            tolerance: 0.1,
            max_probes: 16,
            integer: false,
            budget_secs: None,
        };
        // A TPOT target near the bandwidth floor: how big a batch stays under it is set by
        // memory bandwidth (3.35 vs 4.8 TB/s), compute being equal.
        let plan = plan("ttft=1s,tpot=12ms");
        let h100 = virtual_capacity(&llama_8b_on("h100"), &plan, search, |_| {}).0;
        let h200 = virtual_capacity(&llama_8b_on("h200"), &plan, search, |_| {}).0;
        let (h100, h200) = (h100.lower_bound.unwrap(), h200.lower_bound.unwrap());
        assert!(h200 > h100 * 1.15, "H200 {h200} vs H100 {h100} req/s");
    }

    #[test]
    fn virtual_fixed_timing_matches_the_configuration_exactly() {
        let sim = SimConfig {
            engine: EngineConfig::Fixed(FixedTimingConfig {
                ttft: Duration::from_millis(200),
                itl: Duration::from_millis(10),
                slots: 4,
                ..FixedTimingConfig::default()
            }),
            ..SimConfig::default()
        };
        let target = VirtualTarget {
            sim,
            input_tokens: 32,
            output_tokens: 11,
        };
        let config = RunConfig {
            load: LoadSpec::Open {
                rate_per_sec: 10.0,
                arrival: Arrival::Constant,
                max_concurrency: None,
            },
            max_requests: Some(220),
            warmup: Warmup::Requests(20),
            slo: Some(Slo::parse("ttft=250ms").unwrap()),
            ..RunConfig::default()
        };
        let (step, compliance) = target.probe(&config);
        assert_eq!(step.requests.completed, 200);
        assert_eq!(step.latency_ms.ttft.max, Some(200.0));
        assert_eq!(step.latency_ms.e2e.p50, Some(300.0));
        assert!(
            (step.throughput.requests_per_sec - 10.0).abs() < 1e-6,
            "{:?}",
            step.throughput
        );
        assert_eq!(compliance.compliant, 200);
    }
}
