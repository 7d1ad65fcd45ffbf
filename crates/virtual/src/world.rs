//! One runner for every clock: core's [`Runner`] sends the workload through the same backend
//! a live run uses, over in-memory pipes, to the simulator's own HTTP server — both on a
//! paused tokio clock that jumps to the next thing due (an arrival, an engine step, a timeout)
//! the moment nothing else can run. Nothing sleeps: a run of minutes takes the CPU its
//! requests cost.
//!
//! Tokio's timer counts whole milliseconds, which would round every arrival and engine step
//! of a virtual run to one. So the world runs dilated: [`DILATION`] simulated seconds per
//! second of the paused clock (the simulator's `time_scale`, the run's `time_scale`), one
//! tick of the timer a simulated nanosecond — the simulator's own resolution. The dilation is
//! the reciprocal of a whole number, so both sides convert between the clocks exactly
//! (`goodput_protocol::time_scale`): every arrival, step and token lands on the nanosecond the
//! simulator computed, and each record reads it truncated to the microsecond.

use std::sync::Arc;
use std::time::Duration;

use goodput_core::backend::{Activity, Backend, BoxFuture, RequestSpec};
use goodput_core::record::Exchange;
use goodput_protocol::time_scale;

use goodput_core::config::RunConfig;
use goodput_core::http::{BoxIo, FnConnector, HttpClient, HttpConfig, Target};
use goodput_core::record::RequestRecord;
use goodput_core::runner::{RecordSink, RunOutcome, Runner};

use crate::VirtualRequests;
use goodput_sim::{SimConfig, SimServer};
use tokio_util::sync::CancellationToken;

/// Simulated seconds per second of the paused clock: a millisecond tick is a nanosecond, the
/// simulator's own resolution.
pub const DILATION: f64 = 1e-6;

/// Why a virtual run could not run.
#[derive(Debug, thiserror::Error)]
pub enum WorldError {
    /// The simulator's configuration was refused.
    #[error("simulator: {0}")]
    Simulator(String),
    /// The backend could not be built.
    #[error("backend: {0}")]
    Backend(String),
    /// The runtime could not be built.
    #[error("virtual clock: {0}")]
    Runtime(String),
}

/// The least time a request takes on the virtual wire: a server that refuses a request at
/// once still costs its client a round trip, so a closed loop against it advances in time
/// (on a paused clock, a loop of instant refusals would never let time pass).
const ROUND_TRIP: Duration = Duration::from_millis(1);

/// A backend whose every request takes at least [`ROUND_TRIP`] of the target's time.
#[derive(Debug)]
struct RoundTrip {
    inner: Arc<dyn Backend>,
    /// The round trip on the dilated clock.
    least: Duration,
}

impl Backend for RoundTrip {
    fn send<'a>(
        &'a self,
        request: &'a RequestSpec,
        exchange: &'a mut Exchange,
        activity: &'a Activity,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let started = tokio::time::Instant::now();
            self.inner.send(request, exchange, activity).await;
            tokio::time::sleep_until(started + self.least).await;
        })
    }

    fn text_input(&self) -> bool {
        self.inner.text_input()
    }

    fn asks_output_length(&self) -> bool {
        self.inner.asks_output_length()
    }
}

/// Hands each record to a closure; `false` from it finishes the run.
struct Until<'a> {
    sink: &'a mut (dyn FnMut(&RequestRecord) -> bool + Send),
    finish: CancellationToken,
}

impl RecordSink for Until<'_> {
    fn record(&mut self, record: &RequestRecord) -> std::io::Result<()> {
        if !(self.sink)(record) {
            self.finish.cancel();
        }
        Ok(())
    }
}

/// Runs `config` as step `step` of a run of `client`'s requests against `sim` on the virtual clock,
/// handing each record to `sink` as it ends until `sink` returns `false` (then nothing more
/// is sent and the requests in flight end). Runs on a thread of its own (the caller may be
/// inside a runtime).
pub fn run(
    sim: &SimConfig,
    client: &VirtualRequests,
    (config, step): (&RunConfig, u32),
    sink: &mut (dyn FnMut(&RequestRecord) -> bool + Send),
) -> Result<RunOutcome, WorldError> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_time()
                    .start_paused(true)
                    .build()
                    .map_err(|e| WorldError::Runtime(e.to_string()))?;
                runtime.block_on(run_here(sim, client, (config, step), sink))
            })
            .join()
            .unwrap_or_else(|_| Err(WorldError::Runtime("the virtual run panicked".into())))
    })
}

async fn run_here(
    sim: &SimConfig,
    client: &VirtualRequests,
    (config, step): (&RunConfig, u32),
    sink: &mut (dyn FnMut(&RequestRecord) -> bool + Send),
) -> Result<RunOutcome, WorldError> {
    let sim = SimConfig {
        time_scale: sim.time_scale * DILATION,
        ..sim.clone()
    };
    let server =
        SimServer::on_paused_clock(sim).map_err(|e| WorldError::Simulator(e.to_string()))?;
    let connector = FnConnector::new(move || {
        let (near, far) = tokio::io::duplex(1 << 16);
        tokio::spawn(server.serve_any(far));
        std::future::ready(Ok(Box::new(near) as BoxIo))
    });
    let target = Target::parse("http://simulator.virtual/v1")
        .map_err(|e| WorldError::Backend(e.to_string()))?;
    let http = HttpClient::new(target, Arc::new(connector), HttpConfig::default());
    let backend = Arc::new(RoundTrip {
        inner: (client.backend)(http, DILATION).map_err(WorldError::Backend)?,
        least: time_scale::to_clock(ROUND_TRIP, DILATION),
    });
    let config = RunConfig {
        time_scale: DILATION,
        ..config.clone()
    };
    let runner = Runner::new(
        config,
        backend,
        Arc::clone(&client.workload),
        Arc::clone(&client.counter),
        client.streamed,
    )
    .with_step(step)
    .with_target_time_timeouts();
    let runner = match &client.request_ids {
        Some(ids) => runner.with_request_ids(ids.clone()),
        None => runner,
    };
    let mut until = Until {
        sink,
        finish: runner.finish_token(),
    };
    let mut outcome = runner
        .run(&mut [&mut until], CancellationToken::new())
        .await;
    // The runner timed the run on the dilated clock.
    outcome.elapsed = time_scale::to_target(outcome.elapsed, DILATION);
    Ok(outcome)
}
