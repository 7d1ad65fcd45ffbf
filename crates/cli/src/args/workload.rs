//! `goodput run` workload flags — length distributions, shared prefixes, multi-turn sessions,
//! datasets, trace replay, and the input-length buckets of the report — and their conversion
//! into [`WorkloadOptions`] (the files are read by `wiring::workload`). Formats and syntax:
//! `docs/workloads.md`.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use goodput_core::metrics::LengthBuckets;
use goodput_core::metrics::buckets::DEFAULT_BUCKETS;
use goodput_core::workload::dataset::DatasetFormat;
use goodput_core::workload::tokenize::TokenizeApi;
use goodput_core::workload::trace::TraceFormat;
use goodput_core::workload::{
    AgentTurns, LengthDistribution, ReplayOptions, SharedPrefix, ThinkTime,
};

use crate::options::workload::{
    Dataset, ReplayBounds, Sessions, Synthetic, Tokenizer, Trace, WorkloadOptions, WorkloadSource,
};

/// Tokens per `hash_ids` block when --trace-block-tokens is not given (Mooncake's).
const DEFAULT_TRACE_BLOCK_TOKENS: u32 = 512;

/// Default prompt length.
pub(crate) const DEFAULT_INPUT_TOKENS: &str = "512";
/// Default answer length.
pub(crate) const DEFAULT_OUTPUT_TOKENS: &str = "128";

/// A dataset layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum DatasetFormatArg {
    /// JSONL: {"prompt"} or {"messages"}, each with an optional "output_tokens".
    Prompts,
    /// ShareGPT conversations (JSON array or JSONL), played as multi-turn sessions.
    Sharegpt,
    /// Agent traces (JSONL): recorded sessions of user, assistant and tool turns.
    Agent,
}

/// A trace layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum TraceFormatArg {
    /// Azure LLM inference trace CSV (TIMESTAMP, ContextTokens, GeneratedTokens).
    Azure,
    /// BurstGPT CSV (Timestamp, Request tokens, Response tokens…).
    Burstgpt,
    /// Mooncake JSONL (timestamp ms, input_length, output_length, hash_ids).
    Mooncake,
    /// goodput CSV or JSONL (timestamp_ms, input_tokens, output_tokens[, hash_ids]).
    Goodput,
}

/// What to send.
#[derive(Debug, Clone, Default, clap::Args)]
pub(crate) struct WorkloadArgs {
    /// Prompt length in tokens of --tokenizer: a number or a distribution — uniform:128..1024,
    /// normal:mean=512,sd=128, lognormal:median=512,sigma=0.8, pareto:scale=200,shape=1.5,
    /// mix:70%=128,25%=1024,5%=8000 [default: 512]. With --turns, each user message's length.
    #[arg(
        long,
        value_name = "TOKENS|DIST",
        allow_hyphen_values = true,
        help_heading = "Workload"
    )]
    pub(crate) input_tokens: Option<String>,
    /// Answer length (`max_tokens`, enforced with ignore_eos): a number or a distribution
    /// [default: 128]. With a dataset, only for records that carry no length.
    #[arg(
        long,
        value_name = "TOKENS|DIST",
        allow_hyphen_values = true,
        help_heading = "Workload"
    )]
    pub(crate) output_tokens: Option<String>,
    /// Shared system prompts, to measure prefix caching: `groups=8,tokens=2000` (each request
    /// gets one of 8 prompts of 2000 tokens, drawn at random, before its own prompt).
    #[arg(long, value_name = "groups=N,tokens=L", help_heading = "Workload")]
    pub(crate) shared_prefix: Option<String>,
    /// Multi-turn sessions of this many turns (a number or a distribution): each turn is sent
    /// after the previous reply plus --think-time, with the history and the server's replies.
    #[arg(long, value_name = "TURNS|DIST", help_heading = "Workload")]
    pub(crate) turns: Option<String>,
    /// Multi-turn: wait between a reply and the next turn — `2s`, or `exp:2s` (exponential
    /// with mean 2 s) [default: 0s].
    #[arg(long, value_name = "DURATION", help_heading = "Workload")]
    pub(crate) think_time: Option<String>,
    /// Agentic sessions (with --turns): some turns feed a tool's result back —
    /// `tool-prob=0.5,tool-latency=200ms,result-tokens=500` (latency `exp:200ms` for
    /// exponential; result length a number or a distribution).
    #[arg(
        long,
        value_name = "tool-prob=P,tool-latency=D,result-tokens=N",
        help_heading = "Workload"
    )]
    pub(crate) agent: Option<String>,
    /// Send the prompts of a local dataset file: prompts JSONL, or ShareGPT JSON or an agent
    /// trace (played as multi-turn sessions).
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "trace",
        help_heading = "Workload"
    )]
    pub(crate) dataset: Option<PathBuf>,
    /// Dataset layout (default: detected from the file).
    #[arg(long, value_enum, requires = "dataset", help_heading = "Workload")]
    pub(crate) dataset_format: Option<DatasetFormatArg>,
    /// Replay a trace file: each request at its timestamp (open loop), with its prompt and
    /// answer lengths (CSV or JSONL: Azure, BurstGPT, Mooncake or goodput columns).
    #[arg(long, value_name = "FILE", help_heading = "Workload")]
    pub(crate) trace: Option<PathBuf>,
    /// Trace layout (default: detected from the header or first record).
    #[arg(long, value_enum, requires = "trace", help_heading = "Workload")]
    pub(crate) trace_format: Option<TraceFormatArg>,
    /// Trace replay speed: trace seconds per real second (2 = twice as fast) [default: 1].
    #[arg(
        long = "trace-time-scale",
        value_name = "FACTOR",
        requires = "trace",
        help_heading = "Workload"
    )]
    pub(crate) trace_time_scale: Option<f64>,
    /// Trace replay volume: requests per trace request, on the trace's clock (0.5 drops half
    /// at random, 2 sends each twice) [default: 1].
    #[arg(
        long = "trace-rate-scale",
        value_name = "FACTOR",
        requires = "trace",
        help_heading = "Workload"
    )]
    pub(crate) trace_rate_scale: Option<f64>,
    /// Tokens per `hash_ids` block of a trace (Mooncake uses 512) [default: 512].
    #[arg(
        long,
        value_name = "TOKENS",
        requires = "trace",
        help_heading = "Workload"
    )]
    pub(crate) trace_block_tokens: Option<u32>,
    /// Skip invalid dataset or trace records (each is counted and the first one shown)
    /// instead of stopping at the first.
    #[arg(long, help_heading = "Workload")]
    pub(crate) skip_invalid: bool,
    /// Report every metric per prompt-length bucket: `short<1024,medium<8192,long`, or bare
    /// edges like `512,4096`.
    #[arg(long, default_value = DEFAULT_BUCKETS, value_name = "BUCKETS", help_heading = "Measurement")]
    pub(crate) length_buckets: String,
}

impl WorkloadArgs {
    /// Rejects flags that do not apply to the chosen kind of workload.
    fn check_combinations(&self) -> Result<()> {
        let given = |flag: &'static str, present: bool| present.then_some(flag);
        if self.trace.is_some() {
            let unused = [
                given("--input-tokens", self.input_tokens.is_some()),
                given("--output-tokens", self.output_tokens.is_some()),
                given("--shared-prefix", self.shared_prefix.is_some()),
                given("--turns", self.turns.is_some()),
                given("--think-time", self.think_time.is_some()),
            ];
            if let Some(flag) = unused.into_iter().flatten().next() {
                bail!("{flag} does not apply to --trace: the trace gives every request's lengths");
            }
        }
        if self.dataset.is_some() {
            let unused = [
                given("--input-tokens", self.input_tokens.is_some()),
                given("--shared-prefix", self.shared_prefix.is_some()),
                given("--turns", self.turns.is_some()),
            ];
            if let Some(flag) = unused.into_iter().flatten().next() {
                bail!(
                    "{flag} does not apply to --dataset: the dataset gives the prompts (a ShareGPT \
                     dataset is played as multi-turn sessions)"
                );
            }
        }
        if self.skip_invalid && self.dataset.is_none() && self.trace.is_none() {
            bail!("--skip-invalid applies to the records of a --dataset or --trace file");
        }
        if self.agent.is_some() && self.turns.is_none() {
            bail!("--agent applies to synthetic multi-turn sessions: add --turns");
        }
        if self.dataset.is_none()
            && self.trace.is_none()
            && self.turns.is_none()
            && self.think_time.is_some()
        {
            bail!(
                "--think-time applies to multi-turn sessions: add --turns, or a ShareGPT --dataset"
            );
        }
        Ok(())
    }
}

impl WorkloadArgs {
    /// The workload's specification, checked: `tokenizer` is `--tokenizer`; `bounds` the load
    /// flags that still apply to a trace replay, which refuses `--rate` and `--concurrency`
    /// (`rate_or_concurrency`).
    pub(crate) fn options(
        &self,
        tokenizer: &str,
        bounds: ReplayBounds,
        rate_or_concurrency: bool,
    ) -> Result<WorkloadOptions> {
        self.check_combinations()?;
        let buckets: LengthBuckets = self.length_buckets.parse().context("--length-buckets")?;
        let tokenizer = parse_tokenizer(tokenizer)?;
        let output = parse_lengths(
            "--output-tokens",
            self.output_tokens
                .as_deref()
                .unwrap_or(DEFAULT_OUTPUT_TOKENS),
        )?;
        let source = if let Some(path) = &self.trace {
            if rate_or_concurrency {
                bail!(
                    "--trace sets every arrival time; drop --rate / --concurrency (use --trace-time-scale or --trace-rate-scale)"
                );
            }
            WorkloadSource::Trace(self.trace_options(path, bounds)?)
        } else if let Some(path) = &self.dataset {
            WorkloadSource::Dataset(Dataset {
                path: path.clone(),
                format: self.dataset_format.map(DatasetFormatArg::format),
                output,
                think_time: think_time(self.think_time.as_deref()).map_err(|e| format!("{e:#}")),
                skip_invalid: self.skip_invalid,
            })
        } else {
            WorkloadSource::Synthetic(self.synthetic(output)?)
        };
        Ok(WorkloadOptions {
            source,
            tokenizer,
            buckets,
        })
    }

    fn synthetic(&self, output: LengthDistribution) -> Result<Synthetic> {
        let input = parse_lengths(
            "--input-tokens",
            self.input_tokens.as_deref().unwrap_or(DEFAULT_INPUT_TOKENS),
        )?;
        let prefix = self
            .shared_prefix
            .as_deref()
            .map(parse_shared_prefix)
            .transpose()
            .context("--shared-prefix")?;
        let sessions = match &self.turns {
            None => None,
            Some(turns) => Some(Sessions {
                turns: parse_lengths("--turns", turns)?,
                think_time: think_time(self.think_time.as_deref())?,
                agent: self
                    .agent
                    .as_deref()
                    .map(AgentTurns::parse)
                    .transpose()
                    .map_err(|error| anyhow::anyhow!("--agent: {error}"))?,
            }),
        };
        Ok(Synthetic {
            input,
            output,
            prefix,
            sessions,
        })
    }

    fn trace_options(&self, path: &Path, bounds: ReplayBounds) -> Result<Trace> {
        let replay = ReplayOptions {
            time_scale: self.trace_time_scale.unwrap_or(1.0),
            rate_scale: self.trace_rate_scale.unwrap_or(1.0),
            block_tokens: self
                .trace_block_tokens
                .unwrap_or(DEFAULT_TRACE_BLOCK_TOKENS),
        };
        replay.validate().map_err(anyhow::Error::msg)?;
        Ok(Trace {
            path: path.to_path_buf(),
            format: self.trace_format.map(TraceFormatArg::format),
            replay,
            skip_invalid: self.skip_invalid,
            bounds,
        })
    }
}

impl DatasetFormatArg {
    fn format(self) -> DatasetFormat {
        match self {
            DatasetFormatArg::Prompts => DatasetFormat::Prompts,
            DatasetFormatArg::Sharegpt => DatasetFormat::ShareGpt,
            DatasetFormatArg::Agent => DatasetFormat::Agent,
        }
    }
}

impl TraceFormatArg {
    fn format(self) -> TraceFormat {
        match self {
            TraceFormatArg::Azure => TraceFormat::Azure,
            TraceFormatArg::Burstgpt => TraceFormat::BurstGpt,
            TraceFormatArg::Mooncake => TraceFormat::Mooncake,
            TraceFormatArg::Goodput => TraceFormat::Goodput,
        }
    }
}

fn parse_lengths(flag: &str, text: &str) -> Result<LengthDistribution> {
    text.parse().with_context(|| flag.to_string())
}

/// `--think-time` (default 0 s).
fn think_time(text: Option<&str>) -> Result<ThinkTime> {
    ThinkTime::parse(text.unwrap_or("0s"))
        .map_err(|message| anyhow::anyhow!("--think-time: {message}"))
}

/// `--tokenizer`: the server's `/tokenize` — `server` (dialect detected), `server:vllm`,
/// `server:llamacpp` or `server:tgi` — or a local tokenizer.
fn parse_tokenizer(tokenizer: &str) -> Result<Tokenizer> {
    let name = tokenizer.trim();
    if name == "server" {
        return Ok(Tokenizer::Server {
            name: tokenizer.to_string(),
            api: None,
        });
    }
    match name.strip_prefix("server:") {
        None => Ok(Tokenizer::Local(tokenizer.to_string())),
        Some(api) => match TokenizeApi::by_name(api) {
            Some(api) => Ok(Tokenizer::Server {
                name: tokenizer.to_string(),
                api: Some(api),
            }),
            None => bail!(
                "--tokenizer {name}: unknown /tokenize dialect; use server, server:vllm, \
                 server:llamacpp or server:tgi"
            ),
        },
    }
}

/// `groups=N,tokens=L`.
pub(crate) fn parse_shared_prefix(text: &str) -> Result<SharedPrefix> {
    let (mut groups, mut tokens) = (None, None);
    for part in text.split(',').map(str::trim) {
        let (key, value) = part.split_once('=').with_context(|| {
            format!("`{part}`: expected groups=N,tokens=L, e.g. groups=8,tokens=2000")
        })?;
        let value: u32 = value
            .trim()
            .parse()
            .ok()
            .filter(|v| *v > 0)
            .with_context(|| format!("`{part}`: expected a positive whole number"))?;
        match key.trim() {
            "groups" => groups = Some(value),
            "tokens" => tokens = Some(value),
            other => bail!(
                "unknown key `{other}`: expected groups=N,tokens=L, e.g. groups=8,tokens=2000"
            ),
        }
    }
    match (groups, tokens) {
        (Some(groups), Some(tokens)) => Ok(SharedPrefix { groups, tokens }),
        _ => bail!("give both, e.g. groups=8,tokens=2000"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn shared_prefix_flags_parse() {
        assert_eq!(
            parse_shared_prefix("groups=8,tokens=2000").unwrap(),
            SharedPrefix {
                groups: 8,
                tokens: 2000
            }
        );
        for bad in ["groups=8", "groups=0,tokens=5", "size=3,tokens=4", "8x2000"] {
            assert!(parse_shared_prefix(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tokenizer_names_the_server_or_a_local_file() {
        let server = |api| Tokenizer::Server {
            name: "x".into(),
            api,
        };
        let strip = |t: Tokenizer| match t {
            Tokenizer::Server { api, .. } => server(api),
            local => local,
        };
        assert_eq!(strip(parse_tokenizer("server").unwrap()), server(None));
        assert_eq!(
            strip(parse_tokenizer("server:tgi").unwrap()),
            server(Some(TokenizeApi::Tgi))
        );
        assert_eq!(
            parse_tokenizer("cl100k_base").unwrap(),
            Tokenizer::Local("cl100k_base".into())
        );
        assert!(parse_tokenizer("server:bogus").is_err());
    }
}
