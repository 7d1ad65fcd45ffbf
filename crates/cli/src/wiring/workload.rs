//! Building the workload of `goodput run` from its specification, before the run starts:
//! reading and checking dataset and trace files, counting their texts, calibrating the
//! tokenizer for exact-length prompts (locally, or with the target's `/tokenize`), and
//! adjusting the run configuration for trace replay.

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
use goodput_core::workload::generation::Generating;
use goodput_core::workload::image::WithImages;
use goodput_core::workload::mix::Mixed;
use goodput_core::workload::prepared::{DatasetConversations, DatasetWorkload};
use goodput_core::workload::source::Loaded;
use goodput_core::workload::tokenize::{LengthCounter, RemoteTokenizer};
use goodput_core::workload::trace::load_trace;
use goodput_core::workload::{
    GeneratedWorkload, LengthDistribution, PromptVocabulary, SyntheticConversations, TraceWorkload,
    Workload,
};
use http::header::{AUTHORIZATION, HeaderMap, HeaderValue};

use crate::options::run::{Images, RunOptions};
use crate::options::workload::{
    Dataset, Synthetic, Tokenizer, Trace, WorkloadOptions, WorkloadSource,
};

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

/// Builds the workload for a run of `options` against `client` with the backend settings
/// `openai`, and adjusts `config` to it (trace replay).
pub(crate) async fn prepare(
    options: &RunOptions,
    client: &HttpClient,
    openai: &OpenAiConfig,
    config: &mut RunConfig,
) -> Result<BuiltWorkload> {
    let target = Target {
        client,
        model: &openai.model,
        headers: request_headers(openai)?,
    };
    let built = build(&options.workload, options.seed, Some(target)).await?;
    finish(options, built, config)
}

/// Builds the workload of `options` with no server to ask (virtual time): `--tokenizer
/// server` is refused.
pub(crate) async fn prepare_offline(
    options: &RunOptions,
    config: &mut RunConfig,
) -> Result<BuiltWorkload> {
    let built = build(&options.workload, options.seed, None).await?;
    finish(options, built, config)
}

/// Adjusts `config` to the workload (trace replay) and batches it (`--batch-size`: each request
/// carries `batch` consecutive inputs of the workload).
fn finish(
    options: &RunOptions,
    mut built: BuiltWorkload,
    config: &mut RunConfig,
) -> Result<BuiltWorkload> {
    adjust_config(&options.workload, &built, config)?;
    if let Some(batch) = options.request.batch {
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
pub(crate) fn runner_counter(tokenizer: &Tokenizer) -> Result<Arc<dyn TokenCounter>> {
    match tokenizer {
        Tokenizer::Server { .. } => Ok(Arc::new(Tiktoken::cl100k())),
        Tokenizer::Local(name) => counter_by_name(name).context("--tokenizer"),
    }
}

/// `workload` with `images` beside its prompts (as given without images).
fn with_images(images: Option<&Images>, workload: Arc<dyn Workload>) -> Arc<dyn Workload> {
    let Some(images) = images else {
        return workload;
    };
    match WithImages::new(
        Arc::clone(&workload),
        images.images.clone(),
        images.per_request,
    ) {
        Some(with) => Arc::new(with),
        None => workload,
    }
}

/// `workload` with what the run adds to each request: images beside chat prompts, an image
/// generation's size and steps, a model, adapter and SLO class of the run's mixes.
pub(crate) fn per_request(
    options: &RunOptions,
    workload: Arc<dyn Workload>,
) -> Result<Arc<dyn Workload>> {
    let workload = with_images(options.request.images.as_ref(), workload);
    let grid = &options.request.generation;
    if !grid.is_empty() && workload.conversations().is_some() {
        bail!("--image-size and --image-steps go with single requests, not sessions");
    }
    let workload = Generating::wrap(workload, grid.clone());
    with_mix(options, workload)
}

/// `workload` with each request's model, adapter and SLO class drawn from the run's mixes
/// (as given without a mix); multi-turn sessions are refused (their later turns are not
/// drawn request by request).
fn with_mix(options: &RunOptions, workload: Arc<dyn Workload>) -> Result<Arc<dyn Workload>> {
    let mix = &options.fleet.mix;
    if !mix.is_empty() && workload.conversations().is_some() {
        bail!(
            "--model mixes, --lora and --class label single requests: multi-turn sessions \
             (--turns, a conversation dataset, an agent trace) are not supported with them yet"
        );
    }
    Ok(Mixed::wrap(workload, mix.clone(), options.seed))
}

/// Builds the workload of `spec` with `seed`.
async fn build(
    spec: &WorkloadOptions,
    seed: u64,
    target: Option<Target<'_>>,
) -> Result<BuiltWorkload> {
    let counter = length_counter(&spec.tokenizer, target.as_ref()).await?;
    let (workload, replay_requests): (Arc<dyn Workload>, _) = match &spec.source {
        WorkloadSource::Trace(trace) => {
            let replay = trace_workload(trace, &counter, seed).await?;
            let requests = replay.len();
            (Arc::new(replay), Some(requests))
        }
        WorkloadSource::Dataset(dataset) => {
            (dataset_workload(dataset, &counter, seed).await?, None)
        }
        WorkloadSource::Synthetic(synthetic) => {
            (synthetic_workload(synthetic, &counter, seed).await?, None)
        }
    };
    Ok(BuiltWorkload {
        workload,
        buckets: spec.buckets.clone(),
        replay_requests,
    })
}

async fn length_counter(
    tokenizer: &Tokenizer,
    target: Option<&Target<'_>>,
) -> Result<LengthCounter> {
    match (tokenizer, target) {
        (Tokenizer::Server { name, .. }, None) => bail!(
            "--tokenizer {name}: there is no server to ask in virtual time; name a local \
             tokenizer (cl100k_base, a tokenizer.json file)"
        ),
        (Tokenizer::Server { api, .. }, Some(target)) => {
            let remote = RemoteTokenizer::connect(
                target.client.clone(),
                target.model,
                target.headers.clone(),
                *api,
            )
            .await
            .context("--tokenizer server")?;
            Ok(LengthCounter::Remote(Box::new(remote)))
        }
        (Tokenizer::Local(name), _) => Ok(LengthCounter::Local(
            counter_by_name(name).context("--tokenizer")?,
        )),
    }
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
    spec: &Synthetic,
    counter: &LengthCounter,
    seed: u64,
) -> Result<Arc<dyn Workload>> {
    let vocabulary = vocabulary(counter).await?;
    if let Some(sessions) = &spec.sessions {
        return Ok(Arc::new(SyntheticConversations {
            turns: sessions.turns.clone(),
            user_tokens: spec.input.clone(),
            output_tokens: Some(spec.output.clone()),
            think_time: sessions.think_time,
            prefix: spec.prefix,
            agent: sessions.agent.clone(),
            vocabulary,
            seed,
        }));
    }
    Ok(Arc::new(GeneratedWorkload {
        input: spec.input.clone(),
        output: Some(spec.output.clone()),
        prefix: spec.prefix,
        vocabulary,
        seed,
    }))
}

async fn dataset_workload(
    spec: &Dataset,
    counter: &LengthCounter,
    seed: u64,
) -> Result<Arc<dyn Workload>> {
    let path = spec.path.as_path();
    let format = match spec.format {
        Some(format) => format,
        None => {
            let bytes = std::fs::read(path)
                .with_context(|| format!("--dataset: cannot read {}", path.display()))?;
            DatasetFormat::detect(&bytes)
        }
    };
    let fallback: Option<LengthDistribution> = Some(spec.output.clone());
    let think = || spec.think_time.clone().map_err(anyhow::Error::msg);
    Ok(match format {
        DatasetFormat::Prompts => {
            let loaded = load_prompts(path, spec.skip_invalid).context("--dataset")?;
            note_skipped(&loaded);
            Arc::new(DatasetWorkload::prepare(loaded, counter, fallback, seed).await?)
        }
        DatasetFormat::ShareGpt => {
            let loaded = load_sharegpt(path, spec.skip_invalid).context("--dataset")?;
            note_skipped(&loaded);
            let think = think()?;
            Arc::new(DatasetConversations::prepare(loaded, counter, fallback, think, seed).await?)
        }
        DatasetFormat::Agent => {
            let loaded = load_agent_trace(path, spec.skip_invalid).context("--dataset")?;
            note_skipped(&loaded);
            let think = think()?;
            let sessions =
                DatasetConversations::prepare_agent(loaded, counter, fallback, think, seed);
            Arc::new(sessions.await?)
        }
    })
}

async fn trace_workload(spec: &Trace, counter: &LengthCounter, seed: u64) -> Result<TraceWorkload> {
    let options = spec.replay;
    let (format, loaded) =
        load_trace(&spec.path, spec.format, spec.skip_invalid).context("--trace")?;
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
fn adjust_config(
    spec: &WorkloadOptions,
    built: &BuiltWorkload,
    config: &mut RunConfig,
) -> Result<()> {
    let (Some(requests), WorkloadSource::Trace(trace)) = (built.replay_requests, &spec.source)
    else {
        return Ok(());
    };
    let bounds = trace.bounds;
    config.load = LoadSpec::Replay {
        max_concurrency: bounds.max_concurrency,
    };
    if !bounds.duration_given {
        config.duration = None;
    }
    config.max_requests = Some(
        bounds
            .requests
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
    fn the_runner_counts_locally_when_the_tokenizer_is_the_server() {
        let server = Tokenizer::Server {
            name: "server".into(),
            api: None,
        };
        assert_eq!(runner_counter(&server).unwrap().name(), "cl100k_base");
    }
}
