//! `goodput run`'s configuration, also the base of `sweep` and `capacity`: the run (load,
//! stop, warm-up, timeouts, SLO), the target, what every request carries, the workload, the
//! server-side figures, what happens with the results, and this process's shard.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use goodput_core::analysis::AnalysisConfig;
use goodput_core::backend::openai::OpenAiConfig;
use goodput_core::backend::template::{ItemsPath, RequestTemplate, StreamFormat};
use goodput_core::backend::v2::TensorSource;
use goodput_core::config::RunConfig;
use goodput_core::shard::Shard;
use goodput_core::workload::image::Image;
use goodput_sim::SimConfig;

use super::workload::WorkloadOptions;

/// Everything `goodput run` (and every step of `sweep` and `capacity`) runs with.
#[derive(Debug, Clone)]
pub(crate) struct RunOptions {
    /// Drive the embedded simulator in virtual time (`--virtual-time`).
    pub(crate) virtual_time: bool,
    /// Seed of the schedule and the prompts: `--seed`, or drawn when the command started.
    pub(crate) seed: u64,
    /// The validated run configuration (load, stop, warm-up, timeouts, SLO, window; its time
    /// scale `--time-scale`, else 1).
    pub(crate) config: RunConfig,
    /// Where the requests go.
    pub(crate) target: TargetOptions,
    /// `--model`: the model to name (default: the simulator's, else the target's first); with
    /// a model mix, its first model (each request names its own, [`FleetOptions::mix`]).
    pub(crate) model: Option<String>,
    /// What every request carries.
    pub(crate) request: RequestOptions,
    /// What to send.
    pub(crate) workload: WorkloadOptions,
    /// What `run.workload` records beside the workload's own description: the counting
    /// tokenizer, `--api http`'s items path and streaming, why v2 tensors count no tokens.
    pub(crate) described: BTreeMap<String, serde_json::Value>,
    /// The server's side of the run: scraping and the analysis inputs.
    pub(crate) server_side: ServerSideOptions,
    /// What happens with the results.
    pub(crate) output: OutputOptions,
    /// This process's part of a sharded run (`--shards`), and the shared start.
    pub(crate) shard: ShardPlan,
    /// Correlation ids, and the models, adapters and SLO classes of a mix.
    pub(crate) fleet: FleetOptions,
}

/// How requests are told apart and which model, adapter and SLO class each is.
#[derive(Debug, Clone, Default)]
pub(crate) struct FleetOptions {
    /// The header carrying each request's correlation id (`None`: `--no-request-id`, or
    /// virtual time).
    pub(crate) request_id_header: Option<http::HeaderName>,
    /// `--model a=70%,b=30%`, `--lora`, `--class`: which model or adapter each request asks
    /// for and which SLO class it is.
    pub(crate) mix: goodput_core::workload::mix::Mix,
    /// `--class`: each class's share and SLO (recorded in `run.classes`).
    pub(crate) classes: Vec<goodput_core::report::run::ClassInfo>,
    /// A fleet (`--target` more than once, `--targets`): every target, named; empty with one.
    pub(crate) targets: Vec<FleetTargetOptions>,
    /// `--route`: how requests are spread over the targets.
    pub(crate) routing: goodput_core::backend::fleet::Routing,
    /// `--replica-header`: the response header naming the replica that served a request.
    pub(crate) replica_header: Option<http::HeaderName>,
}

impl FleetOptions {
    /// With the fleet's targets (kept only when there are several) and `--route` read against
    /// their number.
    pub(crate) fn with_targets(
        mut self,
        (targets, routing): (
            Vec<FleetTargetOptions>,
            goodput_core::backend::fleet::Routing,
        ),
    ) -> Self {
        if targets.len() > 1 {
            self.targets = targets;
            self.routing = routing;
        }
        self
    }

    /// Whether requests go through a [`goodput_core::backend::fleet::FleetBackend`]: several
    /// targets, or one whose replicas a response header names.
    pub(crate) fn is_fleet(&self) -> bool {
        !self.targets.is_empty() || self.replica_header.is_some()
    }
}

/// One target of a fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FleetTargetOptions {
    /// Its name in the report (`NAME=`, else its URL's host and port).
    pub(crate) label: String,
    /// Its base URL.
    pub(crate) url: String,
}

impl RunOptions {
    /// The embedded simulator's configuration, when it is the target.
    pub(crate) fn simulator(&self) -> Option<&SimConfig> {
        match &self.target {
            TargetOptions::Embedded(config) => Some(config),
            TargetOptions::Server { .. } => None,
        }
    }
}

/// Where the requests go.
#[derive(Debug, Clone)]
pub(crate) enum TargetOptions {
    /// `--target`: a server at `url` whose clock runs `time_scale` times faster than real time
    /// (`--time-scale`, else 1).
    Server {
        /// The base URL as given.
        url: String,
        /// Target-time seconds per real second.
        time_scale: f64,
    },
    /// The embedded simulator (no `--target`), configured from `--sim-config`, `--sim-*`
    /// and the hardware flags that describe it; started on loopback, or driven in virtual
    /// time.
    Embedded(Box<SimConfig>),
}

/// Which API the requests call (`--api`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Api {
    /// `/v1/chat/completions`.
    Chat,
    /// `/v1/completions`.
    Completions,
    /// `/v1/responses`.
    Responses,
    /// `/v1/messages` (Anthropic).
    Messages,
    /// `/v1/embeddings`.
    Embeddings,
    /// `/v1/rerank`.
    Rerank,
    /// `/v1/images/generations`.
    Images,
    /// A JSON template POSTed to the target as given.
    Http,
    /// KServe v2 / Open Inference Protocol.
    V2,
    /// Realtime sessions over WebSocket.
    Realtime,
    /// `/v1/audio/transcriptions`.
    Transcriptions,
    /// `/v1/audio/speech`.
    Speech,
}

impl Api {
    /// The name in reports (`run.api`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Api::Chat => "chat",
            Api::Completions => "completions",
            Api::Responses => "responses",
            Api::Messages => "messages",
            Api::Embeddings => "embeddings",
            Api::Rerank => "rerank",
            Api::Images => "images",
            Api::Http => "http",
            Api::V2 => "v2",
            Api::Realtime => "realtime",
            Api::Transcriptions => "transcriptions",
            Api::Speech => "speech",
        }
    }
}

/// What every request carries, read and checked from the `Target` flags.
#[derive(Debug, Clone)]
pub(crate) struct RequestOptions {
    /// Speak HTTP/2 (`--http2`).
    pub(crate) http2: bool,
    /// `--api`.
    pub(crate) api: Api,
    /// The settings that shape every body (API, streaming, `ignore_eos`, usage, extra body and
    /// rerank query, headers, API key); its model is empty until the target is known
    /// ([`RequestOptions::openai`]).
    pub(crate) openai: OpenAiConfig,
    /// `--api http`'s template, items path and streaming.
    pub(crate) template: Option<HttpTemplate>,
    /// `--api v2`'s tensors.
    pub(crate) tensors: Option<TensorSource>,
    /// `--api realtime`'s sessions.
    pub(crate) realtime: Option<RealtimeOptions>,
    /// `--api transcriptions`' audio and `--api speech`'s voice and format.
    pub(crate) audio: Option<AudioOptions>,
    /// `--grpc`: v2 over gRPC with this method (`None`: over HTTP).
    pub(crate) grpc: Option<goodput_core::backend::v2::grpc::GrpcMethod>,
    /// `--batch-size`: inputs per request (`None`: one).
    pub(crate) batch: Option<u32>,
    /// Images beside each chat prompt.
    pub(crate) images: Option<Images>,
    /// `--api images`: the sizes and steps each request asks for in turn.
    pub(crate) generation: goodput_core::workload::generation::GenerationGrid,
    /// What one item is in reports: `inputs`, `documents`, `prompts`, `rows` or `items`.
    pub(crate) item_unit: &'static str,
}

impl RequestOptions {
    /// The body settings naming `model`.
    pub(crate) fn openai(&self, model: String) -> OpenAiConfig {
        OpenAiConfig {
            model,
            ..self.openai.clone()
        }
    }
}

/// `--api realtime`'s sessions.
#[derive(Debug, Clone)]
pub(crate) struct RealtimeOptions {
    /// Audio each session speaks.
    pub(crate) audio: std::time::Duration,
    /// Each session's own length instead (`--audio-seconds` as a distribution).
    pub(crate) lengths: Option<goodput_core::workload::audio_lengths::AudioLengths>,
    /// Audio per append.
    pub(crate) chunk: std::time::Duration,
    /// The server's protocol.
    pub(crate) dialect: goodput_core::backend::realtime::RealtimeDialect,
}

/// The audio APIs' settings.
#[derive(Debug, Clone)]
pub(crate) struct AudioOptions {
    /// Transcriptions or speech.
    pub(crate) api: goodput_core::backend::audio::AudioApi,
    /// Transcriptions: the clips sent, request i taking clip i mod n.
    pub(crate) clips: Vec<goodput_core::backend::audio::Clip>,
    /// Transcriptions: a tone of a length drawn per request instead of `clips`.
    pub(crate) drawn: Option<goodput_core::workload::audio_lengths::AudioLengths>,
    /// The sample rate of the tones.
    pub(crate) tone_rate: u32,
    /// Transcriptions: `language`.
    pub(crate) language: Option<String>,
    /// Speech: `voice`.
    pub(crate) voice: String,
    /// Speech: `response_format`.
    pub(crate) format: goodput_core::backend::audio::SpeechFormat,
    /// Speech, streamed: `stream_format`.
    pub(crate) speech_stream: goodput_core::backend::audio::SpeechStream,
}

/// `--api http`'s request template and how its replies are read.
#[derive(Debug, Clone)]
pub(crate) struct HttpTemplate {
    /// The body template (`--request-template`).
    pub(crate) template: RequestTemplate,
    /// `--items-path`.
    pub(crate) items: Option<ItemsPath>,
    /// `--stream-format`.
    pub(crate) stream: StreamFormat,
    /// `--tokens-path`.
    pub(crate) tokens: Option<ItemsPath>,
}

/// Images beside each chat prompt (`--image-resolution` or `--image-dir`).
#[derive(Debug, Clone)]
pub(crate) struct Images {
    /// The images, taken in turn.
    pub(crate) images: Vec<Image>,
    /// `--images-per-request`.
    pub(crate) per_request: u32,
}

/// The server's side of a run.
#[derive(Debug, Clone)]
pub(crate) struct ServerSideOptions {
    /// `--metrics-url` (default: the target's `/metrics`).
    pub(crate) metrics_url: Option<String>,
    /// Whether to scrape at all (no `--no-metrics`).
    pub(crate) scrape: bool,
    /// `--metrics-interval`.
    pub(crate) metrics_interval: Duration,
    /// The utilisation, speculative-decoding and cost inputs (the embedded simulator's
    /// hardware where the flags give none).
    pub(crate) analysis: AnalysisConfig,
    /// `--accelerators` as given (recorded with a capacity verdict).
    pub(crate) accelerators: Option<u32>,
}

/// What is printed on stdout at the end (`--format`, `--json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum SummaryFormat {
    /// The terminal summary.
    #[default]
    Text,
    /// The whole report as JSON.
    Json,
    /// The key figures as Markdown tables.
    Markdown,
}

/// What happens with the results of a run.
#[derive(Debug, Clone)]
pub(crate) struct OutputOptions {
    /// `--out`: the directory of `requests.jsonl`, `run.json`, `report.json` and the exports.
    pub(crate) out: Option<PathBuf>,
    /// `--quiet`: no progress lines.
    pub(crate) quiet: bool,
    /// The summary on stdout.
    pub(crate) summary: SummaryFormat,
    /// `--details`: the text summary beyond its first screen.
    pub(crate) details: bool,
    /// `--gate`: the criteria file judged after the run.
    pub(crate) gate: Option<PathBuf>,
    /// `--store`: the history store the run is recorded in.
    pub(crate) store: Option<crate::options::store::StoreSpec>,
    /// Whether the live view may show (no `--no-live`).
    pub(crate) live_view: bool,
    /// `--tag` pairs.
    pub(crate) tags: Vec<(String, String)>,
    /// `--max-error-rate`.
    pub(crate) max_error_rate: Option<f64>,
    /// Where the report is sent or written besides `--out` once it is final.
    pub(crate) exports: ExportOptions,
}

/// The exports to other tools (`--push-gateway`), sent after the report is written.
#[derive(Debug, Clone, Default)]
pub(crate) struct ExportOptions {
    /// `--push-gateway`: the Prometheus Pushgateway's base URL.
    pub(crate) push_gateway: Option<String>,
    /// `--llmd-report`: the llm-d benchmark report file (one per step when there are several).
    pub(crate) llmd_report: Option<PathBuf>,
    /// `--mlflow` and `--mlflow-experiment`: the tracking server and the experiment's name.
    pub(crate) mlflow: Option<(String, String)>,
    /// `--otlp`: the OpenTelemetry collector's OTLP/HTTP base URL.
    pub(crate) otlp: Option<String>,
}

/// The shard and the shared start of this process.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ShardPlan {
    /// Which part of the schedule.
    pub(crate) shard: Shard,
    /// The shared start time (`--start-at`), if any.
    pub(crate) start_at: Option<SystemTime>,
}
