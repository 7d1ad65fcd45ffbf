//! Building the workload of `goodput run` from its flags, before the run starts: reading and
//! checking dataset and trace files, counting their texts, calibrating the tokenizer for
//! exact-length prompts (locally, or with the target's `/tokenize`), and adjusting the run
//! configuration for trace replay.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use goodput_core::backend::openai::OpenAiConfig;
use goodput_core::config::{LoadSpec, RunConfig};
use goodput_core::decide::sweep::BatchedWorkload;
use goodput_core::http::HttpClient;
use goodput_core::metrics::LengthBuckets;
use goodput_core::tokens::{Tiktoken, TokenCounter, counter_by_name};
use goodput_core::workload::agent_trace::load_agent_trace;
use goodput_core::workload::dataset::{DatasetFormat, load_prompts, load_sharegpt};
use goodput_core::workload::prepared::{DatasetConversations, DatasetWorkload};
use goodput_core::workload::source::Loaded;
use goodput_core::workload::tokenize::{LengthCounter, RemoteTokenizer, TokenizeApi};
use goodput_core::workload::trace::{TraceFormat, load_trace};
use goodput_core::workload::{
    GeneratedWorkload, LengthDistribution, PromptVocabulary, ReplayOptions, SharedPrefix,
    SyntheticConversations, ThinkTime, TraceWorkload, Workload,
};
use http::header::{AUTHORIZATION, HeaderMap, HeaderValue};

use crate::args::run::RunArgs;
use crate::args::workload::{
    DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS, DatasetFormatArg, TraceFormatArg, WorkloadArgs,
};

/// Tokens per `hash_ids` block when --trace-block-tokens is not given (Mooncake's).
const DEFAULT_TRACE_BLOCK_TOKENS: u32 = 512;

/// A workload ready to run.
pub(crate) struct BuiltWorkload {
    /// What to send.
    pub(crate) workload: Arc<dyn Workload>,
    /// How the report splits requests by prompt length.
    pub(crate) buckets: LengthBuckets,
    /// Requests in a trace replay.
    replay_requests: Option<usize>,
}

impl BuiltWorkload {
    /// Notes the buckets in the run's workload description (so `goodput report` uses them).
    pub(crate) fn record_buckets(
        &self,
        description: &mut std::collections::BTreeMap<String, serde_json::Value>,
    ) {
        description.insert("length_buckets".into(), self.buckets.to_string().into());
    }
}

/// What building a workload needs to know about the target.
struct Target<'a> {
    /// Client to the target (for `/tokenize`).
    client: &'a HttpClient,
    /// Model name.
    model: &'a str,
    /// Headers of every request (authorization).
    headers: HeaderMap,
}

/// Builds the workload for a run against `client` with the backend settings `openai`, and
/// adjusts `config` to it (trace replay).
pub(crate) async fn prepare(
    args: &RunArgs,
    seed: u64,
    client: &HttpClient,
    openai: &OpenAiConfig,
    config: &mut RunConfig,
) -> Result<BuiltWorkload> {
    let target = Target {
        client,
        model: &openai.model,
        headers: request_headers(openai)?,
    };
    let built = build(args, seed, Some(target)).await?;
    finish(args, built, config)
}

/// Builds the workload of `args` with no server to ask (virtual time): `--tokenizer server`
/// is refused.
pub(crate) async fn prepare_offline(
    args: &RunArgs,
    seed: u64,
    config: &mut RunConfig,
) -> Result<BuiltWorkload> {
    let built = build(args, seed, None).await?;
    finish(args, built, config)
}

/// Adjusts `config` to the workload (trace replay) and batches it (`--batch-size`: each request
/// carries `batch` consecutive inputs of the workload).
fn finish(
    args: &RunArgs,
    mut built: BuiltWorkload,
    config: &mut RunConfig,
) -> Result<BuiltWorkload> {
    adjust_config(args, &built, config)?;
    if let Some(batch) = args.batch()? {
        built.workload = Arc::new(BatchedWorkload {
            inner: Arc::clone(&built.workload),
            batch,
        });
    }
    Ok(built)
}

/// The headers the backend sends (extra headers and the API key), for `/tokenize`.
fn request_headers(openai: &OpenAiConfig) -> Result<HeaderMap> {
    let mut headers = HeaderMap::new();
    if let Some(key) = openai.api_key.as_deref().filter(|key| !key.is_empty()) {
        let mut value = HeaderValue::from_str(&format!("Bearer {key}"))
            .context("the API key contains characters not allowed in an HTTP header")?;
        value.set_sensitive(true);
        headers.insert(AUTHORIZATION, value);
    }
    for (name, value) in &openai.headers {
        headers.insert(name.clone(), value.clone());
    }
    Ok(headers)
}

/// The runner's fallback counter: `--tokenizer`, or `cl100k_base` when it names the server
/// (the runner counts synchronously; the server's `usage` comes first anyway).
pub(crate) fn runner_counter(tokenizer: &str) -> Result<Arc<dyn TokenCounter>> {
    if server_tokenizer(tokenizer)?.is_some() {
        return Ok(Arc::new(Tiktoken::cl100k()));
    }
    counter_by_name(tokenizer).context("--tokenizer")
}

/// `Some(dialect)` when `--tokenizer` names the server: `server` (dialect detected),
/// `server:vllm`, `server:llamacpp` or `server:tgi`.
fn server_tokenizer(tokenizer: &str) -> Result<Option<Option<TokenizeApi>>> {
    let name = tokenizer.trim();
    if name == "server" {
        return Ok(Some(None));
    }
    match name.strip_prefix("server:") {
        None => Ok(None),
        Some(api) => match TokenizeApi::by_name(api) {
            Some(api) => Ok(Some(Some(api))),
            None => bail!(
                "--tokenizer {name}: unknown /tokenize dialect; use server, server:vllm, \
                 server:llamacpp or server:tgi"
            ),
        },
    }
}

/// Builds the workload of `args` with `seed`.
async fn build(args: &RunArgs, seed: u64, target: Option<Target<'_>>) -> Result<BuiltWorkload> {
    let flags = &args.workload;
    flags.check_combinations()?;
    let buckets: LengthBuckets = flags.length_buckets.parse().context("--length-buckets")?;
    let counter = length_counter(&args.tokenizer, target.as_ref()).await?;
    let output = parse_lengths(
        "--output-tokens",
        flags
            .output_tokens
            .as_deref()
            .unwrap_or(DEFAULT_OUTPUT_TOKENS),
    )?;
    let (workload, replay_requests): (Arc<dyn Workload>, _) = if let Some(path) = &flags.trace {
        let replay = trace_workload(flags, path, &counter, seed).await?;
        let requests = replay.len();
        (Arc::new(replay), Some(requests))
    } else if let Some(path) = &flags.dataset {
        (
            dataset_workload(flags, path, &counter, output, seed).await?,
            None,
        )
    } else {
        (
            synthetic_workload(flags, &counter, output, seed).await?,
            None,
        )
    };
    Ok(BuiltWorkload {
        workload,
        buckets,
        replay_requests,
    })
}

async fn length_counter(tokenizer: &str, target: Option<&Target<'_>>) -> Result<LengthCounter> {
    match (server_tokenizer(tokenizer)?, target) {
        (Some(_), None) => bail!(
            "--tokenizer {tokenizer}: there is no server to ask in virtual time; name a local \
             tokenizer (cl100k_base, a tokenizer.json file)"
        ),
        (Some(api), Some(target)) => {
            let remote = RemoteTokenizer::connect(
                target.client.clone(),
                target.model,
                target.headers.clone(),
                api,
            )
            .await
            .context("--tokenizer server")?;
            Ok(LengthCounter::Remote(Box::new(remote)))
        }
        (None, _) => Ok(LengthCounter::Local(
            counter_by_name(tokenizer).context("--tokenizer")?,
        )),
    }
}

fn parse_lengths(flag: &str, text: &str) -> Result<LengthDistribution> {
    text.parse().with_context(|| flag.to_string())
}

async fn vocabulary(counter: &LengthCounter) -> Result<Arc<PromptVocabulary>> {
    if counter.name() == "cl100k_base" {
        return Ok(Arc::new(PromptVocabulary::cl100k()));
    }
    let vocabulary = counter
        .vocabulary()
        .await
        .context("--tokenizer: exact-length prompts")?;
    Ok(Arc::new(vocabulary))
}

async fn synthetic_workload(
    flags: &WorkloadArgs,
    counter: &LengthCounter,
    output: LengthDistribution,
    seed: u64,
) -> Result<Arc<dyn Workload>> {
    let input = parse_lengths(
        "--input-tokens",
        flags
            .input_tokens
            .as_deref()
            .unwrap_or(DEFAULT_INPUT_TOKENS),
    )?;
    let prefix = flags
        .shared_prefix
        .as_deref()
        .map(parse_shared_prefix)
        .transpose()
        .context("--shared-prefix")?;
    let vocabulary = vocabulary(counter).await?;
    if let Some(turns) = &flags.turns {
        return Ok(Arc::new(SyntheticConversations {
            turns: parse_lengths("--turns", turns)?,
            user_tokens: input,
            output_tokens: Some(output),
            think_time: think_time(flags)?,
            prefix,
            agent: flags
                .agent
                .as_deref()
                .map(goodput_core::workload::AgentTurns::parse)
                .transpose()
                .map_err(|error| anyhow::anyhow!("--agent: {error}"))?,
            vocabulary,
            seed,
        }));
    }
    Ok(Arc::new(GeneratedWorkload {
        input,
        output: Some(output),
        prefix,
        vocabulary,
        seed,
    }))
}

fn think_time(flags: &WorkloadArgs) -> Result<ThinkTime> {
    ThinkTime::parse(flags.think_time.as_deref().unwrap_or("0s"))
        .map_err(|message| anyhow::anyhow!("--think-time: {message}"))
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

async fn dataset_workload(
    flags: &WorkloadArgs,
    path: &Path,
    counter: &LengthCounter,
    output: LengthDistribution,
    seed: u64,
) -> Result<Arc<dyn Workload>> {
    let format = match flags.dataset_format {
        Some(DatasetFormatArg::Prompts) => DatasetFormat::Prompts,
        Some(DatasetFormatArg::Sharegpt) => DatasetFormat::ShareGpt,
        Some(DatasetFormatArg::Agent) => DatasetFormat::Agent,
        None => {
            let bytes = std::fs::read(path)
                .with_context(|| format!("--dataset: cannot read {}", path.display()))?;
            DatasetFormat::detect(&bytes)
        }
    };
    let fallback = Some(output);
    Ok(match format {
        DatasetFormat::Prompts => {
            let loaded = load_prompts(path, flags.skip_invalid).context("--dataset")?;
            note_skipped(&loaded);
            Arc::new(DatasetWorkload::prepare(loaded, counter, fallback, seed).await?)
        }
        DatasetFormat::ShareGpt => {
            let loaded = load_sharegpt(path, flags.skip_invalid).context("--dataset")?;
            note_skipped(&loaded);
            let think = think_time(flags)?;
            Arc::new(DatasetConversations::prepare(loaded, counter, fallback, think, seed).await?)
        }
        DatasetFormat::Agent => {
            let loaded = load_agent_trace(path, flags.skip_invalid).context("--dataset")?;
            note_skipped(&loaded);
            let think = think_time(flags)?;
            let sessions =
                DatasetConversations::prepare_agent(loaded, counter, fallback, think, seed);
            Arc::new(sessions.await?)
        }
    })
}

async fn trace_workload(
    flags: &WorkloadArgs,
    path: &Path,
    counter: &LengthCounter,
    seed: u64,
) -> Result<TraceWorkload> {
    let options = ReplayOptions {
        time_scale: flags.trace_time_scale.unwrap_or(1.0),
        rate_scale: flags.trace_rate_scale.unwrap_or(1.0),
        block_tokens: flags
            .trace_block_tokens
            .unwrap_or(DEFAULT_TRACE_BLOCK_TOKENS),
    };
    options.validate().map_err(anyhow::Error::msg)?;
    let format = flags.trace_format.map(|format| match format {
        TraceFormatArg::Azure => TraceFormat::Azure,
        TraceFormatArg::Burstgpt => TraceFormat::BurstGpt,
        TraceFormatArg::Mooncake => TraceFormat::Mooncake,
        TraceFormatArg::Goodput => TraceFormat::Goodput,
    });
    let (format, loaded) = load_trace(path, format, flags.skip_invalid).context("--trace")?;
    note_skipped(&loaded);
    let replay = TraceWorkload::new(format, loaded, options, vocabulary(counter).await?, seed);
    if replay.is_empty() {
        bail!(
            "--trace-rate-scale {}: no request of the trace is left to send",
            options.rate_scale
        );
    }
    Ok(replay)
}

fn note_skipped<T>(loaded: &Loaded<T>) {
    if let Some(first) = &loaded.first_skipped {
        eprintln!(
            "note: skipped {} invalid record(s) of {} (--skip-invalid); the first: {first}",
            loaded.skipped, loaded.path
        );
    }
}

/// Trace replay sends at the trace's times: load mode `replay`, and by default every request
/// of the trace (no 30 s default duration).
fn adjust_config(args: &RunArgs, built: &BuiltWorkload, config: &mut RunConfig) -> Result<()> {
    let Some(requests) = built.replay_requests else {
        return Ok(());
    };
    if args.rate.is_some() || args.concurrency.is_some() {
        bail!(
            "--trace sets every arrival time; drop --rate / --concurrency (use --trace-time-scale or --trace-rate-scale)"
        );
    }
    config.load = LoadSpec::Replay {
        max_concurrency: args.max_concurrency,
    };
    if args.duration.is_none() {
        config.duration = None;
    }
    config.max_requests = Some(
        args.requests
            .map_or(requests as u64, |n| n.min(requests as u64)),
    );
    config.validate()?;
    Ok(())
}

/// The buckets a run recorded in its manifest (`run.workload.length_buckets`; the default
/// for runs that recorded none).
pub(crate) fn recorded_buckets(
    workload: &std::collections::BTreeMap<String, serde_json::Value>,
) -> Result<LengthBuckets> {
    match workload.get("length_buckets").and_then(|v| v.as_str()) {
        Some(spec) => spec
            .parse()
            .context("run.json: run.workload.length_buckets"),
        None => Ok(LengthBuckets::default()),
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
        assert_eq!(server_tokenizer("server").unwrap(), Some(None));
        assert_eq!(
            server_tokenizer("server:tgi").unwrap(),
            Some(Some(TokenizeApi::Tgi))
        );
        assert_eq!(server_tokenizer("cl100k_base").unwrap(), None);
        assert!(server_tokenizer("server:bogus").is_err());
        assert_eq!(runner_counter("server").unwrap().name(), "cl100k_base");
    }
}
