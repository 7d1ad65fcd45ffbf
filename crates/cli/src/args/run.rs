//! `goodput run` arguments and their conversion into a validated [`RunConfig`].

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use goodput_core::backend::openai::ApiKind;
use goodput_core::backend::template::{ItemsPath, RequestTemplate, StreamFormat};
use goodput_core::config::{Arrival, LoadSpec, RunConfig, Warmup};
use goodput_core::metrics::Slo;
use goodput_core::profile::{ProfileFile, parse_phases, total_duration};
use goodput_core::units::parse_duration;

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
    /// `/v1/embeddings`: one vector per input (--batch-size inputs per request); items/s.
    Embeddings,
    /// `/v1/rerank`: a query against documents (--batch-size documents per request);
    /// documents/s.
    Rerank,
    /// Any JSON API: a --request-template body POSTed to --target as given, items counted by
    /// --items-path.
    Http,
    /// KServe v2 / Open Inference Protocol: `/v2/models/{model}/infer` below --target, tensors
    /// generated to --tensor-shape or read from --tensor-file; items = batch rows.
    V2,
}

impl ApiArg {
    /// The OpenAI API (`http` keeps the chat settings, used only for headers: its backend
    /// sends the template).
    pub(crate) fn kind(self) -> ApiKind {
        match self {
            ApiArg::Chat | ApiArg::Http | ApiArg::V2 => ApiKind::Chat,
            ApiArg::Completions => ApiKind::Completions,
            ApiArg::Responses => ApiKind::Responses,
            ApiArg::Embeddings => ApiKind::Embeddings,
            ApiArg::Rerank => ApiKind::Rerank,
        }
    }

    /// The name in reports (`run.api`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            ApiArg::Chat => "chat",
            ApiArg::Completions => "completions",
            ApiArg::Responses => "responses",
            ApiArg::Embeddings => "embeddings",
            ApiArg::Rerank => "rerank",
            ApiArg::Http => "http",
            ApiArg::V2 => "v2",
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
            ApiArg::Completions | ApiArg::Embeddings | ApiArg::Rerank | ApiArg::Http | ApiArg::V2
        )
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

/// `--api http`'s request template and how its replies are read.
#[derive(Debug, Clone)]
pub(crate) struct HttpTemplate {
    /// The body template.
    pub(crate) template: RequestTemplate,
    /// `--items-path`.
    pub(crate) items: Option<ItemsPath>,
    /// `--stream-format`.
    pub(crate) stream: StreamFormat,
    /// `--tokens-path`.
    pub(crate) tokens: Option<ItemsPath>,
}

/// Benchmark a target under load.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    /// Base URL of an OpenAI-compatible server, e.g. http://localhost:8000/v1. Without it the
    /// embedded simulator is started on a loopback port and benchmarked.
    #[arg(long, env = "GOODPUT_TARGET", help_heading = "Target")]
    pub(crate) target: Option<String>,
    /// API to call.
    #[arg(long, value_enum, default_value_t = ApiArg::Chat, help_heading = "Target")]
    pub(crate) api: ApiArg,
    /// Model name to send (default: the first model the target lists at /v1/models).
    #[arg(long, help_heading = "Target")]
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
    pub(crate) tensors: crate::args::tensor::TensorArgs,
    /// --api rerank: the query every request ranks its documents against (default: the first
    /// 16 words of the batch's first prompt).
    #[arg(long, value_name = "TEXT", help_heading = "Target")]
    pub(crate) query: Option<String>,
    /// Extra request header, repeatable.
    #[arg(long = "header", value_name = "NAME:VALUE", help_heading = "Target")]
    pub(crate) headers: Vec<String>,
    /// API key sent as a bearer token (never written to any output).
    #[arg(
        long,
        env = "GOODPUT_API_KEY",
        hide_env_values = true,
        help_heading = "Target"
    )]
    pub(crate) api_key: Option<String>,
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
}

/// A `--warmup` value.
pub(crate) fn parse_warmup(text: &str) -> Result<Warmup> {
    let text = text.trim();
    if text == "0" || text.eq_ignore_ascii_case("none") {
        return Ok(Warmup::None);
    }
    if let Some(percent) = text.strip_suffix('%') {
        let percent: f64 = percent
            .trim()
            .parse()
            .with_context(|| format!("--warmup {text}: not a percentage"))?;
        return Ok(if percent == 0.0 {
            Warmup::None
        } else {
            Warmup::Fraction(percent / 100.0)
        });
    }
    if let Ok(count) = text.parse::<u64>() {
        return Ok(Warmup::Requests(count));
    }
    parse_duration(text).map(Warmup::Duration).with_context(|| {
        format!(
            "--warmup {text}: expected a percentage (10%), a request count (50) or a duration (5s)"
        )
    })
}

/// The SLO from `--slo` (`none` disables).
pub(crate) fn parse_slo(text: &str) -> Result<Option<Slo>> {
    if text.trim().eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    Ok(Some(Slo::parse(text).context("--slo")?))
}

impl RunArgs {
    /// `--slo` as given; its default for the encoder APIs is [`ENCODER_DEFAULT_SLO`] (their
    /// answers have no first token).
    pub(crate) fn slo_text(&self) -> &str {
        let encoder = !self.api.streams();
        if encoder && self.slo == DEFAULT_SLO {
            ENCODER_DEFAULT_SLO
        } else {
            &self.slo
        }
    }

    /// What one item is in reports: `inputs`, `documents`, `prompts` (batched completions),
    /// `rows` (v2 batch rows) or `items`.
    pub(crate) fn item_unit(&self) -> &'static str {
        match self.api {
            ApiArg::Embeddings | ApiArg::Rerank => self.api.kind().item_unit(),
            ApiArg::Completions if self.batch_size.is_some() => "prompts",
            ApiArg::V2 => "rows",
            _ => "items",
        }
    }

    /// `--api http`'s template, items path and streaming, read and checked (`None` for the
    /// other APIs).
    pub(crate) fn template(&self) -> Result<Option<HttpTemplate>> {
        let http = self.api == ApiArg::Http;
        let (stream, tokens) = self.http_stream.checked(http, self.no_stream)?;
        if !http && (self.request_template.is_some() || self.items_path.is_some()) {
            bail!("--request-template and --items-path go with --api http");
        }
        if !http {
            return Ok(None);
        }
        let Some(path) = &self.request_template else {
            bail!("--api http needs --request-template FILE (the JSON body of every request)");
        };
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--request-template: cannot read {}", path.display()))?;
        let template = RequestTemplate::parse(&text)
            .with_context(|| format!("--request-template {}", path.display()))?;
        let items = self
            .items_path
            .as_deref()
            .map(ItemsPath::parse)
            .transpose()
            .context("--items-path")?;
        Ok(Some(HttpTemplate {
            template,
            items,
            stream,
            tokens,
        }))
    }

    /// `--query`, checked: rerank only, not empty.
    pub(crate) fn rerank_query(&self) -> Result<Option<String>> {
        match &self.query {
            Some(_) if self.api != ApiArg::Rerank => {
                bail!(
                    "--query is the query of --api rerank (the {} API has none)",
                    self.api.name()
                )
            }
            Some(query) if query.trim().is_empty() => bail!("--query must not be empty"),
            query => Ok(query.clone()),
        }
    }

    /// `--batch-size`, checked against the API: `None` for one input per request.
    pub(crate) fn batch(&self) -> Result<Option<u32>> {
        match self.batch_size {
            None => Ok(None),
            Some(0) => bail!("--batch-size must be at least 1"),
            Some(_) if !self.api.batches() => bail!(
                "--batch-size sends several inputs per request: use --api completions, \
                 embeddings, rerank, http or v2 (the {} API takes one conversation)",
                self.api.name()
            ),
            Some(_) if self.workload.trace.is_some() => {
                bail!("--batch-size cannot batch a --trace replay (its requests are the trace's)")
            }
            Some(n) => Ok(Some(n)),
        }
    }

    /// The load: closed loop with --concurrency, else open loop (default 10/s).
    fn load(&self) -> Result<LoadSpec> {
        if let Some(concurrency) = self.concurrency {
            if self.arrival != ArrivalArg::Poisson || self.burstiness.is_some() {
                bail!(
                    "--arrival and --burstiness shape open-loop arrivals (--rate); a closed loop \
                     (--concurrency) sends each request when the previous one ends"
                );
            }
            if self.max_concurrency.is_some() {
                bail!(
                    "--max-concurrency applies to open loop (--rate); closed loop already caps at --concurrency"
                );
            }
            return Ok(LoadSpec::Closed { concurrency });
        }
        let arrival = self.arrival()?;
        if let Some(load) = self.phased_load(arrival)? {
            return Ok(load);
        }
        Ok(LoadSpec::Open {
            rate_per_sec: self.rate.unwrap_or(10.0),
            arrival,
            max_concurrency: self.max_concurrency,
        })
    }

    /// The arrival process from --arrival and --burstiness.
    fn arrival(&self) -> Result<Arrival> {
        Ok(match (self.arrival, self.burstiness) {
            (ArrivalArg::Poisson, None) => Arrival::Poisson,
            (ArrivalArg::Constant, None) => Arrival::Constant,
            (ArrivalArg::Gamma, Some(burstiness)) => Arrival::Gamma { burstiness },
            (ArrivalArg::Gamma, None) => bail!("--arrival gamma needs --burstiness (e.g. 0.5)"),
            (_, Some(_)) => bail!("--burstiness applies to --arrival gamma"),
        })
    }

    /// The phase profile of --phases or --profile (a file's arrival process wins).
    fn phased_load(&self, arrival: Arrival) -> Result<Option<LoadSpec>> {
        let (phases, arrival) = match (&self.phases, &self.profile) {
            (Some(text), _) => (parse_phases(text).context("--phases")?, arrival),
            (None, Some(path)) => {
                let (phases, from_file) = ProfileFile::read(path)
                    .with_context(|| format!("--profile {}", path.display()))?;
                (phases, from_file)
            }
            (None, None) => return Ok(None),
        };
        Ok(Some(LoadSpec::Profile {
            phases,
            arrival,
            max_concurrency: self.max_concurrency,
        }))
    }

    /// What the summary on stdout is (`--json`, `--format`, `--details` reconciled).
    pub(crate) fn summary_format(&self) -> Result<crate::args::reporting::SummaryFormat> {
        crate::args::reporting::summary_format(
            self.json,
            self.reporting.format,
            self.reporting.details,
        )
    }

    /// Whether the load is a phase profile.
    pub(crate) fn has_phases(&self) -> bool {
        self.phases.is_some() || self.profile.is_some()
    }

    /// The validated run configuration (`seed` already chosen).
    pub(crate) fn run_config(&self, seed: u64) -> Result<RunConfig> {
        self.template()?;
        self.images.images(self.api == ApiArg::Chat, seed)?;
        self.tensors
            .source(self.api == ApiArg::V2, self.batch_size)?;
        let load = self.load()?;
        let duration = match (&load, self.requests, self.duration) {
            (LoadSpec::Profile { .. }, _, Some(_)) => {
                bail!("--duration: a phase profile lasts as long as its phases; drop --duration")
            }
            (LoadSpec::Profile { phases, .. }, _, None) => Some(total_duration(phases)),
            (_, None, None) => Some(Duration::from_secs(30)),
            (_, _, duration) => duration,
        };
        let config = RunConfig {
            load,
            max_requests: self.requests,
            duration,
            warmup: parse_warmup(&self.warmup)?,
            request_timeout: self.request_timeout,
            no_progress_timeout: self.no_progress_timeout,
            slo: parse_slo(self.slo_text())?,
            seed,
            window: self.window,
            time_scale: self.time_scale.unwrap_or(1.0),
        };
        config.validate()?;
        if let Some(rate) = self.max_error_rate
            && !(0.0..=1.0).contains(&rate)
        {
            bail!("--max-error-rate: must be a fraction in [0, 1], e.g. 0.01");
        }
        Ok(config)
    }

    /// `--tag key=value` pairs.
    pub(crate) fn tags(&self) -> Result<Vec<(String, String)>> {
        self.tags
            .iter()
            .map(|tag| {
                let (key, value) = tag
                    .split_once('=')
                    .with_context(|| format!("--tag {tag}: expected KEY=VALUE"))?;
                Ok((key.trim().to_string(), value.trim().to_string()))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn warmup_forms() {
        assert_eq!(parse_warmup("10%").unwrap(), Warmup::Fraction(0.1));
        assert_eq!(parse_warmup("50").unwrap(), Warmup::Requests(50));
        assert_eq!(
            parse_warmup("5s").unwrap(),
            Warmup::Duration(Duration::from_secs(5))
        );
        assert_eq!(parse_warmup("0").unwrap(), Warmup::None);
        assert!(parse_warmup("lots").is_err());
    }

    #[test]
    fn slo_none_disables() {
        assert!(parse_slo("none").unwrap().is_none());
        assert!(parse_slo(DEFAULT_SLO).unwrap().is_some());
    }
}
