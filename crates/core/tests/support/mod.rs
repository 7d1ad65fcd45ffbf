//! Shared test harness: the simulator served over in-memory pipes (exact timing under paused
//! time) or on 127.0.0.1:0, and a runner that collects every record.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::io;
use std::sync::Arc;
use std::time::Duration;

use goodput_core::backend::openai::{OpenAiBackend, OpenAiConfig};
use goodput_core::config::RunConfig;
use goodput_core::http::{BoxIo, FnConnector, HttpClient, HttpConfig, Target};
use goodput_core::metrics::StepAggregator;
use goodput_core::metrics::aggregate::Compliance;
use goodput_core::record::RequestRecord;
use goodput_core::report::{LoadReport, StepReport};
use goodput_core::runner::{RecordSink, RunOutcome, Runner};
use goodput_core::tokens::Tiktoken;
use goodput_core::workload::{SyntheticWorkload, Workload};
use goodput_sim::SimServer;
use goodput_sim::config::{EngineConfig, FixedTimingConfig, SimConfig};
use tokio_util::sync::CancellationToken;

/// Collects every record.
#[derive(Debug, Default)]
pub struct Collect(pub Vec<RequestRecord>);

impl RecordSink for Collect {
    fn record(&mut self, record: &RequestRecord) -> io::Result<()> {
        self.0.push(record.clone());
        Ok(())
    }
}

/// A simulator config with the fixed-timing engine.
pub fn fixed(ttft_ms: u64, itl_ms: u64, slots: u32) -> SimConfig {
    SimConfig {
        engine: EngineConfig::Fixed(FixedTimingConfig {
            ttft: Duration::from_millis(ttft_ms),
            itl: Duration::from_millis(itl_ms),
            slots,
            ..FixedTimingConfig::default()
        }),
        prompt_tokenizer: goodput_sim::config::PromptTokenizer::Words,
        ..SimConfig::default()
    }
}

/// An HTTP client whose connections are in-memory pipes to `server`.
pub fn in_memory_client(server: &SimServer) -> HttpClient {
    let server = server.clone();
    let connector = FnConnector::new(move || {
        let server = server.clone();
        async move {
            let (client, served) = tokio::io::duplex(1 << 16);
            tokio::spawn(server.serve_connection(served));
            Ok(Box::new(client) as BoxIo)
        }
    });
    let target = Target::parse("http://sim.test/v1").unwrap();
    HttpClient::new(target, Arc::new(connector), HttpConfig::default())
}

/// The OpenAI settings goodput uses by default, for `model`.
pub fn openai(model: &str) -> OpenAiConfig {
    OpenAiConfig {
        model: model.to_string(),
        continuous_usage: true,
        ignore_eos: true,
        ..OpenAiConfig::default()
    }
}

/// Everything a test run produced.
pub struct RunResult {
    pub records: Vec<RequestRecord>,
    pub step: StepReport,
    pub compliance: Compliance,
    pub outcome: RunOutcome,
}

/// Runs `config` with `workload` through `client`, collecting records and the step report.
pub async fn run_with(
    config: RunConfig,
    client: HttpClient,
    openai: OpenAiConfig,
    workload: Arc<dyn Workload>,
    cancel: CancellationToken,
) -> RunResult {
    let streamed = openai.stream;
    let backend = Arc::new(OpenAiBackend::new(openai, client).unwrap());
    let runner = Runner::new(
        config.clone(),
        backend,
        workload,
        Arc::new(Tiktoken::cl100k()),
        streamed,
    );
    let mut collect = Collect::default();
    let mut aggregator = StepAggregator::new(config.slo.clone(), config.window);
    let outcome = runner
        .run(&mut [&mut collect, &mut aggregator], cancel)
        .await;
    let step = aggregator.report(LoadReport::from(&config.load));
    RunResult {
        records: collect.0,
        step,
        compliance: aggregator.compliance(),
        outcome,
    }
}

/// Runs against an in-memory simulator with a synthetic workload.
pub async fn run_sim(
    sim: SimConfig,
    config: RunConfig,
    input_tokens: u32,
    output_tokens: u32,
) -> RunResult {
    let server = SimServer::new(sim).unwrap();
    let client = in_memory_client(&server);
    let workload = Arc::new(SyntheticWorkload {
        input_tokens,
        output_tokens: Some(output_tokens),
        seed: 1,
    });
    run_with(
        config,
        client,
        openai(server.model_name()),
        workload,
        CancellationToken::new(),
    )
    .await
}

/// Asserts `actual` is within `tolerance_ms` of `expected_ms`.
#[track_caller]
pub fn assert_ms(actual: Option<f64>, expected_ms: f64, tolerance_ms: f64) {
    let actual = actual.expect("a value");
    assert!(
        (actual - expected_ms).abs() <= tolerance_ms,
        "{actual} ms, expected {expected_ms} ± {tolerance_ms} ms"
    );
}
