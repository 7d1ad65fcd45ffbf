//! `goodput run` arguments and their conversion into [`RunOptions`]: the run's configuration
//! (`args::load`), what every request carries (`args::request`), the workload, the target
//! (the embedded simulator's configuration included), the server side, the outputs and the
//! shard — each flag parsed once, in the order a run used to meet them.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::ValueEnum;
use goodput_core::backend::openai::ApiKind;
use goodput_core::metrics::Slo;
use goodput_core::units::parse_duration;

use crate::args::reporting::parse_tags;
use crate::options::run::{Api, OutputOptions, RunOptions, TargetOptions};
use crate::options::store::StoreSpec;
use crate::options::workload::ReplayBounds;

/// The SLO applied when none is given: MLPerf Inference's llama3.1-8b Server-scenario limits.
pub(crate) const DEFAULT_SLO: &str = "ttft=2s,tpot=100ms";
/// The SLO applied to the encoder APIs (embeddings, rerank) when none is given: their answers
/// are one body, so only the end-to-end latency applies.
pub(crate) const ENCODER_DEFAULT_SLO: &str = "e2e=2s";

/// Which OpenAI API to call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum ApiArg {
    /// `/v1/chat/completions`.
    Chat,
    /// `/v1/completions`.
    Completions,
    /// `/v1/responses` (OpenAI Responses API; needs --target: the embedded simulator does not
    /// serve it).
    Responses,
    /// `/v1/messages` (Anthropic Messages API: --api-key sent as `x-api-key`, with
    /// `anthropic-version`; every request needs an output length for `max_tokens`). The
    /// embedded simulator serves it (plain text answers).
    Messages,
    /// `/v1/embeddings`: one vector per input (--batch-size inputs per request); items/s.
    Embeddings,
    /// `/v1/rerank`: a query against documents (--batch-size documents per request);
    /// documents/s.
    Rerank,
    /// `/v1/images/generations`: `n` images (--batch-size, default 1) of the workload's prompt
    /// per request; images/s, latency per image (by size and steps with --image-size and
    /// --image-steps).
    Images,
    /// Any JSON API: a --request-template body POSTed to --target as given, items counted by
    /// --items-path.
    Http,
    /// KServe v2 / Open Inference Protocol: `/v2/models/{model}/infer` below --target, tensors
    /// generated to --tensor-shape or read from --tensor-file; items = batch rows.
    V2,
    /// Realtime sessions over WebSocket (`{target}/realtime`, OpenAI Realtime or vLLM's
    /// realtime transcription): --audio-seconds of audio sent paced at real time, then the
    /// response read; a session per request. The embedded simulator serves it too.
    Realtime,
    /// Speech recognition: `/v1/audio/transcriptions`, a multipart form with a WAV file (a
    /// tone of --audio-seconds, or the files of --audio-dir); streamed transcript deltas timed
    /// like tokens; real-time factor and audio seconds/s.
    Transcriptions,
    /// Speech synthesis: `/v1/audio/speech`, the workload's prompt as `input`, --voice,
    /// --speech-format wav|pcm; streamed audio chunks timed like tokens (TTFT = time to first
    /// audio byte); audio seconds produced/s and real-time factor.
    Speech,
}

impl ApiArg {
    /// The OpenAI API (`http` keeps the chat settings, used only for headers: its backend
    /// sends the template).
    pub(crate) fn kind(self) -> ApiKind {
        match self {
            ApiArg::Chat
            | ApiArg::Http
            | ApiArg::V2
            | ApiArg::Realtime
            | ApiArg::Transcriptions
            | ApiArg::Speech => ApiKind::Chat,
            ApiArg::Completions => ApiKind::Completions,
            ApiArg::Responses => ApiKind::Responses,
            ApiArg::Messages => ApiKind::Messages,
            ApiArg::Embeddings => ApiKind::Embeddings,
            ApiArg::Rerank => ApiKind::Rerank,
            ApiArg::Images => ApiKind::Images,
        }
    }

    /// The name in reports (`run.api`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            ApiArg::Chat => "chat",
            ApiArg::Completions => "completions",
            ApiArg::Responses => "responses",
            ApiArg::Messages => "messages",
            ApiArg::Embeddings => "embeddings",
            ApiArg::Rerank => "rerank",
            ApiArg::Images => "images",
            ApiArg::Http => "http",
            ApiArg::V2 => "v2",
            ApiArg::Realtime => "realtime",
            ApiArg::Transcriptions => "transcriptions",
            ApiArg::Speech => "speech",
        }
    }

    /// Whether answers can be streamed (encoders and templated JSON answer in one body).
    pub(crate) fn streams(self) -> bool {
        !matches!(self, ApiArg::Http | ApiArg::V2) && self.kind().streams()
    }

    /// Whether a request can carry several inputs (--batch-size, --batch-steps).
    pub(crate) fn batches(self) -> bool {
        matches!(
            self,
            ApiArg::Completions
                | ApiArg::Embeddings
                | ApiArg::Rerank
                | ApiArg::Images
                | ApiArg::Http
                | ApiArg::V2
        )
    }

    /// The API in the run's configuration.
    pub(crate) fn api(self) -> Api {
        match self {
            ApiArg::Chat => Api::Chat,
            ApiArg::Completions => Api::Completions,
            ApiArg::Responses => Api::Responses,
            ApiArg::Messages => Api::Messages,
            ApiArg::Embeddings => Api::Embeddings,
            ApiArg::Rerank => Api::Rerank,
            ApiArg::Images => Api::Images,
            ApiArg::Http => Api::Http,
            ApiArg::V2 => Api::V2,
            ApiArg::Realtime => Api::Realtime,
            ApiArg::Transcriptions => Api::Transcriptions,
            ApiArg::Speech => Api::Speech,
        }
    }
}

/// Open-loop arrival process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub(crate) enum ArrivalArg {
    /// Exponential gaps (memoryless).
    #[default]
    Poisson,
    /// Equal gaps.
    Constant,
    /// Gamma gaps with shape --burstiness.
    Gamma,
}

/// Benchmark a target under load.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// Base URL of an OpenAI-compatible server, e.g. http://localhost:8000/v1. Without it the
    /// embedded simulator is started on a loopback port and benchmarked. Repeat it for a fleet
    /// (`--target a=http://h1:8000/v1 --target b=http://h2:8000/v1`, each optionally named
    /// `NAME=`): requests are spread by --route and every figure is also reported per target.
    #[arg(
        long,
        env = "GOODPUT_TARGET",
        value_name = "[NAME=]URL",
        help_heading = "Target"
    )]
    pub(crate) target: Vec<String>,
    /// API to call.
    #[arg(long, value_enum, default_value_t = ApiArg::Chat, help_heading = "Target")]
    pub(crate) api: ApiArg,
    /// Model name to send (default: the first model the target lists at /v1/models), or a
    /// mix of models and their shares of the requests, e.g. `a=70%,b=30%` (each request's
    /// drawn from the seed; every figure is also reported per model).
    #[arg(long, value_name = "NAME|NAME=SHARE%,…", help_heading = "Target")]
    pub(crate) model: Option<String>,
    /// Ask for whole answers instead of streams (TTFT, TPOT and ITL are then not measured).
    #[arg(long, help_heading = "Target")]
    pub(crate) no_stream: bool,
    /// Inputs per request: a list of N prompts (--api completions), N inputs (embeddings) or
    /// N documents (rerank); throughput is then also counted in items/s.
    #[arg(long, value_name = "N", help_heading = "Target")]
    pub(crate) batch_size: Option<u32>,
    /// --api http: the JSON body of every request; string values may hold {{prompt}},
    /// {{prompts}}, {{index}}, {{batch_size}}, {{input_tokens}}, {{max_tokens}}.
    #[arg(long, value_name = "FILE", help_heading = "Target")]
    pub(crate) request_template: Option<PathBuf>,
    /// --api http: where the reply's items are, a JSONPath such as `$.data[*]` (default: a
    /// request counts the inputs it sent).
    #[arg(long, value_name = "JSONPATH", help_heading = "Target")]
    pub(crate) items_path: Option<String>,
    #[command(flatten)]
    pub(crate) http_stream: crate::args::http_stream::HttpStreamArgs,
    #[command(flatten)]
    pub(crate) images: crate::args::image::ImageArgs,
    #[command(flatten)]
    pub(crate) generation: crate::args::generation::GenerationArgs,
    #[command(flatten)]
    pub(crate) tensors: crate::args::tensor::TensorArgs,
    #[command(flatten)]
    pub(crate) realtime: crate::args::realtime::RealtimeArgs,
    #[command(flatten)]
    pub(crate) audio: crate::args::audio::AudioArgs,
    /// --api rerank: the query every request ranks its documents against (default: the first
    /// 16 words of the batch's first prompt).
    #[arg(long, value_name = "TEXT", help_heading = "Target")]
    pub(crate) query: Option<String>,
    /// Extra request header, repeatable.
    #[arg(long = "header", value_name = "NAME:VALUE", help_heading = "Target")]
    pub(crate) headers: Vec<String>,
    /// Speak HTTP/2 to the target: one connection multiplexing every concurrent request (ALPN
    /// `h2` over TLS for https://, h2c with prior knowledge for http://) [default: HTTP/1.1].
    #[arg(long, help_heading = "Target")]
    pub(crate) http2: bool,
    /// API key sent as a bearer token (never written to any output).
    #[arg(
        long,
        env = "GOODPUT_API_KEY",
        hide_env_values = true,
        help_heading = "Target"
    )]
    pub(crate) api_key: Option<String>,
    /// Sign every request with AWS SigV4 for this region (SageMaker, Bedrock; with
    /// --aws-service). Credentials: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/AWS_SESSION_TOKEN,
    /// else AWS_PROFILE (or `default`) in ~/.aws/credentials; never written anywhere.
    #[arg(long, value_name = "REGION", help_heading = "Target")]
    pub(crate) aws_region: Option<String>,
    /// The service a SigV4 signature is for: `sagemaker`, `bedrock`… (with --aws-region).
    #[arg(long, value_name = "SERVICE", help_heading = "Target")]
    pub(crate) aws_service: Option<String>,
    /// JSON object merged into every request body (sampling parameters, vendor options).
    #[arg(long, value_name = "JSON", help_heading = "Target")]
    pub(crate) extra_body: Option<String>,
    /// Do not send `ignore_eos`/`min_tokens` (the answer length is then up to the model).
    #[arg(long, help_heading = "Target")]
    pub(crate) no_ignore_eos: bool,
    /// Do not ask for usage on every chunk (`stream_options.continuous_usage_stats`).
    #[arg(long, help_heading = "Target")]
    pub(crate) no_continuous_usage: bool,

    /// Tokenizer for exact prompt lengths, for counting when the server reports no usage, and
    /// for checking its usage: `cl100k_base`, `o200k_base`, a local `tokenizer.json` path, or
    /// `server` (the target's own /tokenize, for prompt lengths).
    #[arg(long, default_value = "cl100k_base", help_heading = "Target")]
    pub(crate) tokenizer: String,

    #[command(flatten)]
    pub(crate) workload: crate::args::workload::WorkloadArgs,

    /// Closed loop: keep this many requests in flight.
    #[arg(long, conflicts_with = "rate", help_heading = "Load")]
    pub(crate) concurrency: Option<u32>,
    /// Open loop: arrivals per second (default 10 when no load is given).
    #[arg(long, help_heading = "Load")]
    pub(crate) rate: Option<f64>,
    /// Open-loop arrival process.
    #[arg(long, value_enum, default_value_t, help_heading = "Load")]
    pub(crate) arrival: ArrivalArg,
    /// Gamma shape for --arrival gamma (1 = Poisson, < 1 burstier).
    #[arg(long, help_heading = "Load")]
    pub(crate) burstiness: Option<f64>,
    /// Open loop: cap on requests in flight; arrivals beyond it queue in the client and the
    /// wait counts in their latency.
    #[arg(long, help_heading = "Load")]
    pub(crate) max_concurrency: Option<u32>,
    /// Open loop whose rate changes by phase, e.g. a recovery test
    /// `nominal=8:60s,overload=20:30s,recovery=8:2m` (name=rate:duration); the run lasts as
    /// long as the phases together.
    #[arg(long, value_name = "PHASES", conflicts_with_all = ["rate", "concurrency", "profile"], help_heading = "Load")]
    pub(crate) phases: Option<String>,
    /// The phases (and arrival process) from a TOML or JSON file:
    /// `[[phases]] name = "nominal", rate = 8, duration = "60s"`.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["rate", "concurrency"], help_heading = "Load")]
    pub(crate) profile: Option<PathBuf>,

    /// Stop scheduling after this many requests (warmup included).
    #[arg(long, help_heading = "Duration")]
    pub(crate) requests: Option<u64>,
    /// Stop scheduling after this long, e.g. 60s (default 30s when --requests is not given).
    #[arg(long, value_parser = parse_duration, help_heading = "Duration")]
    pub(crate) duration: Option<Duration>,
    /// Leading part excluded from metrics: a percentage (10%), a request count (50), a
    /// duration (5s), or 0.
    #[arg(long, default_value = "10%", help_heading = "Duration")]
    pub(crate) warmup: String,
    /// Longest one request may take.
    #[arg(long, default_value = "300s", value_parser = parse_duration, help_heading = "Duration")]
    pub(crate) request_timeout: Duration,
    /// Abandon the run when nothing arrives for this long while requests are in flight.
    #[arg(long, default_value = "60s", value_parser = parse_duration, help_heading = "Duration")]
    pub(crate) no_progress_timeout: Duration,

    /// Latency targets: per-request thresholds (`ttft=500ms,tpot=50ms,e2e=5s`) that decide
    /// goodput, and run-level percentiles (`ttft_p99=800ms`); `none` disables.
    #[arg(long, default_value = DEFAULT_SLO, help_heading = "Measurement")]
    pub(crate) slo: String,
    /// Seed of the schedule and the prompts (default: random, recorded in the report).
    #[arg(long, help_heading = "Measurement")]
    pub(crate) seed: Option<u64>,
    /// Width of the time-series windows.
    #[arg(long, default_value = "1s", value_parser = parse_duration, help_heading = "Measurement")]
    pub(crate) window: Duration,
    /// The target's clock runs this many times faster than real time: with the embedded
    /// simulator it sets the simulator's time scale; every figure is then in simulated time.
    #[arg(long, help_heading = "Measurement")]
    pub(crate) time_scale: Option<f64>,
    /// Exit with status 1 when more than this fraction of measured requests failed.
    #[arg(long, value_name = "FRACTION", help_heading = "Measurement")]
    pub(crate) max_error_rate: Option<f64>,

    /// Write requests.jsonl (flushed as requests finish), run.json and report.json here.
    #[arg(long, help_heading = "Output")]
    pub(crate) out: Option<PathBuf>,
    /// Print the report as JSON on stdout instead of the summary table (= --format json).
    #[arg(long, help_heading = "Output")]
    pub(crate) json: bool,
    /// No progress lines on stderr.
    #[arg(long, short, help_heading = "Output")]
    pub(crate) quiet: bool,
    /// Label recorded in the report, repeatable (e.g. --tag gpu=H100).
    #[arg(long = "tag", value_name = "KEY=VALUE", help_heading = "Output")]
    pub(crate) tags: Vec<String>,

    /// Drive the embedded simulator in virtual time: no HTTP and no sleeping, so an hour of
    /// traffic takes seconds; every workload and load a live run accepts.
    #[arg(long, conflicts_with = "target", help_heading = "Embedded simulator")]
    pub(crate) virtual_time: bool,
    /// Embedded simulator: configuration file (TOML or JSON; see `goodput sim --help`).
    #[arg(long, conflicts_with = "target", help_heading = "Embedded simulator")]
    pub(crate) sim_config: Option<PathBuf>,
    /// Embedded simulator: model preset.
    #[arg(long, conflicts_with_all = ["target", "sim_config"], help_heading = "Embedded simulator")]
    pub(crate) sim_model: Option<String>,
    /// Embedded simulator: accelerator preset.
    #[arg(long, conflicts_with_all = ["target", "sim_config"], help_heading = "Embedded simulator")]
    pub(crate) sim_gpu: Option<String>,
    /// Embedded simulator: reasoning tokens before each chat answer (a reasoning model).
    #[arg(long, conflicts_with = "target", help_heading = "Embedded simulator")]
    pub(crate) sim_reasoning_tokens: Option<u32>,
    /// Embedded simulator: probability (0–1) that an answer to a request offering `tools` is a
    /// tool call.
    #[arg(long, conflicts_with = "target", help_heading = "Embedded simulator")]
    pub(crate) sim_tool_calls: Option<f64>,
    #[command(flatten)]
    pub(crate) sim_deploy: crate::args::sim_deploy::EmbeddedSimArgs,
    #[command(flatten)]
    pub(crate) reporting: crate::args::reporting::ReportingArgs,

    #[command(flatten)]
    pub(crate) server_side: crate::args::server::ServerSideArgs,

    #[command(flatten)]
    pub(crate) sharding: crate::args::shard::ShardArgs,

    #[command(flatten)]
    pub(crate) fleet: crate::args::fleet::FleetArgs,
}

impl RunArgs {
    /// `goodput run`'s configuration, every flag parsed once; the seed drawn when `--seed` is
    /// not given.
    pub(crate) fn into_options(self) -> Result<RunOptions> {
        self.options(None)
    }

    /// [`RunArgs::into_options`]; `slo` is `--slo` when the caller parsed it already (a
    /// capacity search's criteria), else `None` and it is parsed here.
    pub(crate) fn options(self, slo: Option<Option<Slo>>) -> Result<RunOptions> {
        if self.virtual_time {
            self.refuse_live_only()?;
        }
        let seed = self.seed.unwrap_or_else(crate::options::random_seed);
        let template = self.template()?;
        let images = self.images.images(self.api == ApiArg::Chat, seed)?;
        let tensors = self
            .tensors
            .source(self.api == ApiArg::V2, self.batch_size)?;
        let config = self.run_config(seed, slo)?;
        let summary = self.summary_format()?;
        let shard = self
            .sharding
            .plan(self.seed.is_some(), self.out.is_some())?;
        crate::args::shard::check(&shard, &config)?;
        let extra_body = self.extra_body.as_deref().map(serde_json::from_str);
        let parsed_body = extra_body.as_ref().and_then(|body| body.as_ref().ok());
        let target = self.target(seed, parsed_body)?;
        let request = self.request((template, images, tensors), extra_body, seed)?;
        let bounds = ReplayBounds {
            max_concurrency: self.max_concurrency,
            requests: self.requests,
            duration_given: self.duration.is_some(),
        };
        let rate_or_concurrency = self.rate.is_some() || self.concurrency.is_some();
        let workload = self
            .workload
            .options(&self.tokenizer, bounds, rate_or_concurrency)?;
        let output = self.output(summary)?;
        let simulator = match &target {
            TargetOptions::Embedded(config) => Some(config.as_ref()),
            TargetOptions::Server { .. } => None,
        };
        let server_side = self.server_side.options(simulator)?;
        let openai = !matches!(self.api, ApiArg::Http | ApiArg::V2);
        let fleet = self
            .fleet
            .options(self.model.as_deref(), openai)?
            .with_targets(self.fleet.targets(&self.target)?);
        let model = match &fleet.mix.models {
            Some(mix) => mix.entries().first().map(|(name, _)| name.clone()),
            None => self.model.clone(),
        };
        Ok(RunOptions {
            virtual_time: self.virtual_time,
            seed,
            config,
            described: self.described(seed),
            target,
            model,
            request,
            workload,
            server_side,
            output,
            shard,
            fleet,
        })
    }

    /// `--slo` as given; its default for the encoder APIs and for `--no-stream` is
    /// [`ENCODER_DEFAULT_SLO`] (their answers have no first token, so a TTFT threshold would
    /// count every request a miss).
    pub(crate) fn slo_text(&self) -> &str {
        let encoder = !self.api.streams() || self.no_stream;
        if encoder && self.slo == DEFAULT_SLO {
            ENCODER_DEFAULT_SLO
        } else {
            &self.slo
        }
    }

    /// What the summary on stdout is (`--json`, `--format`, `--details` reconciled).
    fn summary_format(&self) -> Result<crate::options::run::SummaryFormat> {
        crate::args::reporting::summary_format(
            self.json,
            self.reporting.format,
            self.reporting.details,
        )
    }

    /// Where the requests go: `--target`, else the embedded simulator (which serves neither
    /// `--api responses` nor `--api http` on the wire); `extra_body` is `--extra-body`, parsed.
    fn target(&self, seed: u64, extra_body: Option<&serde_json::Value>) -> Result<TargetOptions> {
        if let Some(first) = self.target.first() {
            let url = crate::args::fleet::target_url(first);
            return Ok(TargetOptions::Server {
                url: url.to_string(),
                time_scale: self.time_scale.unwrap_or(1.0),
            });
        }
        if !self.virtual_time && self.api == ApiArg::Responses {
            bail!(
                "--api responses needs --target: the embedded simulator serves chat and completions"
            );
        }
        if !self.virtual_time && self.api == ApiArg::Http {
            bail!("--api http needs --target: the URL every templated request is POSTed to");
        }
        let config = crate::args::sim_deploy::embedded_sim_config(self, seed, extra_body)?;
        Ok(TargetOptions::Embedded(Box::new(config)))
    }

    /// What happens with the results.
    fn output(&self, summary: crate::options::run::SummaryFormat) -> Result<OutputOptions> {
        Ok(OutputOptions {
            out: self.out.clone(),
            quiet: self.quiet,
            summary,
            details: self.reporting.details,
            gate: self.reporting.gate.clone(),
            store: self.reporting.store.clone().map(StoreSpec::from_path),
            live_view: !self.reporting.no_live,
            tags: parse_tags(&self.tags)?,
            max_error_rate: self.max_error_rate,
            exports: self.reporting.exports.exports()?,
        })
    }

    /// Refuses the flags that only mean something against a server on the wire.
    fn refuse_live_only(&self) -> Result<()> {
        let server = &self.server_side;
        let live_only = [
            ("--metrics-url", server.metrics_url.is_some()),
            ("--no-metrics", server.no_metrics),
            ("--time-scale", self.time_scale.is_some()),
            ("--header", !self.headers.is_empty()),
            ("--http2", self.http2),
            ("--api-key", self.api_key.is_some()),
            ("--aws-region", self.aws_region.is_some()),
            ("--shards", self.sharding.shards.is_some()),
            ("--shard-index", self.sharding.shard_index.is_some()),
            ("--start-at", self.sharding.start_at.is_some()),
            ("--targets", self.fleet.targets_file.is_some()),
            ("--route", self.fleet.route.is_some()),
            ("--replica-header", self.fleet.replica_header.is_some()),
        ];
        if let Some((flag, _)) = live_only.iter().find(|(_, given)| *given) {
            bail!("{flag} applies to a live run; in virtual time nothing goes over the wire");
        }
        Ok(())
    }
}
