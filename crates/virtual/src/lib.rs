//! The bridge between `goodput-core` and `goodput-sim`, which never see each other: the
//! simulator as a virtual-time target. Core's one runner sends the workload through the same
//! backend a live run uses, over in-memory pipes, to the simulator's own HTTP server, both on
//! a paused clock that jumps to whatever is due next ([`world`]): the load shapes, sessions,
//! agents, caps, timeouts, warm-up, journal, every `--api` the simulator serves, reasoning,
//! tool calls and injected faults are the live run's, and a run of minutes takes the CPU its
//! requests cost. `goodput run|sweep|capacity --virtual-time`, `plan --simulate` and
//! `calibrate --check` wire it to the command line.
//!
//! - [`VirtualTarget`]: a simulator configuration and the requests sent to it; runs a
//!   [`RunConfig`] and hands each request's record on as it ends.
//! - [`VirtualRequests`]: the workload, the backend of the run's `--api` and how the report
//!   splits the requests.
//! - [`virtual_capacity`]: `core`'s capacity search with each probe run in virtual time.
//! - [`calibrate`]: what a server told and measured, as the simulator's facts and probes.
#![deny(missing_docs)]

pub mod calibrate;
mod requests;
pub mod world;

use goodput_core::config::RunConfig;
use goodput_core::decide::capacity::watch::{ProbeSink, Stopping};
use goodput_core::decide::capacity::{
    CapacityReport, ProbeError, ProbePlan, ProbeRun, SearchConfig, find_capacity,
};
use goodput_core::metrics::StepAggregator;
use goodput_core::metrics::aggregate::Compliance;
use goodput_core::record::RequestRecord;
use goodput_core::report::{LoadReport, StepReport};
use goodput_core::runner::{RecordSink, RunOutcome};
use goodput_sim::SimConfig;
use tokio_util::sync::CancellationToken;

pub use requests::{MakeBackend, VirtualRequests};
pub use world::WorldError;

/// A simulated deployment and the requests sent to it.
#[derive(Debug, Clone)]
pub struct VirtualTarget {
    /// The simulator (engine, hardware, scheduler, replicas).
    pub sim: SimConfig,
    /// What the client sends: the workload and the API settings.
    pub requests: VirtualRequests,
}

impl VirtualTarget {
    /// Runs `config` (open loop, phase profile, trace replay or closed loop) in virtual time
    /// and returns every request's record, in the order they ended.
    pub fn records(&self, config: &RunConfig) -> Result<Vec<RequestRecord>, WorldError> {
        let mut records = Vec::new();
        self.each_record(config, &mut |record| records.push(record))?;
        Ok(records)
    }

    /// Runs `config` in virtual time, handing each request's record to `sink` as it ends
    /// (memory stays bounded by the requests in flight).
    pub fn each_record(
        &self,
        config: &RunConfig,
        sink: &mut (dyn FnMut(RequestRecord) + Send),
    ) -> Result<RunOutcome, WorldError> {
        self.each_record_until(config, &mut |record| {
            sink(record);
            true
        })
    }

    /// Runs `config` in virtual time, handing each request's record to `sink` as it ends,
    /// until `sink` returns `false`: then nothing more is sent and the requests in flight end
    /// (a live runner's finish).
    pub fn each_record_until(
        &self,
        config: &RunConfig,
        sink: &mut (dyn FnMut(RequestRecord) -> bool + Send),
    ) -> Result<RunOutcome, WorldError> {
        self.step_until(config, 0, sink)
    }

    /// [`each_record_until`](Self::each_record_until) as step `step` of a multi-step run
    /// (the records carry it, and their correlation ids).
    pub fn step_until(
        &self,
        config: &RunConfig,
        step: u32,
        sink: &mut (dyn FnMut(RequestRecord) -> bool + Send),
    ) -> Result<RunOutcome, WorldError> {
        world::run(&self.sim, &self.requests, (config, step), &mut |record| {
            sink(record.clone())
        })
    }

    /// Runs `config` in virtual time and aggregates it as a live step.
    pub fn probe(&self, config: &RunConfig) -> Result<(StepReport, Compliance), WorldError> {
        self.probe_until(config, None)
    }

    /// [`probe`](Self::probe) ended as a live capacity probe is: once `stopping`'s sequential
    /// test has decided its targets; the tallies returned are those it judges (in the order
    /// the requests were sent, each target's where it was decided).
    pub fn probe_until(
        &self,
        config: &RunConfig,
        stopping: Option<Stopping>,
    ) -> Result<(StepReport, Compliance), WorldError> {
        let aggregator = StepAggregator::new(config.slo.clone(), config.window)
            .with_length_buckets(self.requests.buckets.clone())
            .with_classes(&self.requests.classes);
        let finish = CancellationToken::new();
        let mut sink = ProbeSink::new(aggregator, stopping, finish.clone());
        self.each_record_until(config, &mut |record| {
            // An aggregator's sink never fails.
            let _ = sink.record(&record);
            !finish.is_cancelled()
        })?;
        let (aggregator, judged) = sink.into_parts();
        Ok((aggregator.report(LoadReport::from(&config.load)), judged))
    }
}

/// Searches the capacity of `target` in virtual time, probes shaped by `plan`; `on_probe`
/// sees each judged probe. Returns the verdict and every probe's step report.
pub fn virtual_capacity(
    target: &VirtualTarget,
    plan: &ProbePlan,
    search: SearchConfig,
    on_probe: impl FnMut(&goodput_core::decide::capacity::Probe),
) -> (CapacityReport, Vec<StepReport>) {
    let probe = |call: &ProbeRun, config: &RunConfig| {
        target
            .probe_until(&own_arrivals(call, config), Some(plan.stopping(call.load)))
            .map_err(|error| ProbeError {
                load: call.load,
                message: error.to_string(),
            })
    };
    virtual_capacity_with(probe, plan, search, on_probe)
}

/// `config` for run `call` with arrivals of its own: virtual time is deterministic, so an
/// extension of an undecided probe (run 2, 3) on the first run's seed would replay its
/// arrivals request for request, and, judged together with it, count the same requests twice.
fn own_arrivals(call: &ProbeRun, config: &RunConfig) -> RunConfig {
    let mut config = config.clone();
    if call.run > 1 {
        config.seed = goodput_core::workload::mix_seed(config.seed, u64::from(call.run));
    }
    config
}

/// [`virtual_capacity`] with each probe run measured by `run_probe` (given the run and its
/// configuration): e.g. on a target with that run's own prompts, as a live search sends.
pub fn virtual_capacity_with(
    run_probe: impl Fn(&ProbeRun, &RunConfig) -> Result<(StepReport, Compliance), ProbeError>,
    plan: &ProbePlan,
    search: SearchConfig,
    on_probe: impl FnMut(&goodput_core::decide::capacity::Probe),
) -> (CapacityReport, Vec<StepReport>) {
    let probe = |call: ProbeRun| std::future::ready(run_probe(&call, &plan.config_for(&call)));
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

#[cfg(test)]
mod coverage;

#[cfg(test)]
mod tests;
