//! `goodput run`'s `Target` flags turned into [`RequestOptions`]: `--api http`'s template,
//! the body settings (`--no-stream`, `--extra-body`, `--query`, `--header`, `--api-key`…),
//! `--batch-size`, what one item is in reports, and what `run.workload` records about the
//! requests.

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};
use goodput_core::backend::openai::OpenAiConfig;
use goodput_core::backend::template::{ItemsPath, RequestTemplate};
use goodput_core::backend::v2::TensorSource;
use goodput_core::http::sigv4::{AwsCredentials, SigV4};
use http::{HeaderName, HeaderValue};

use crate::args::http_stream::StreamFormatArg;
use crate::args::run::{ApiArg, RunArgs};
use crate::options::run::{HttpTemplate, Images, RequestOptions};

impl RunArgs {
    /// What every request carries: `template`, `images` and `tensors` were read first (as
    /// the run's configuration is checked), and `--extra-body` parsed (as the embedded
    /// simulator is configured); the rest is read here.
    pub(super) fn request(
        &self,
        (template, images, tensors): (Option<HttpTemplate>, Option<Images>, Option<TensorSource>),
        extra_body: Option<serde_json::Result<serde_json::Value>>,
        seed: u64,
    ) -> Result<RequestOptions> {
        let mut openai = self.openai(extra_body)?;
        let images_api = self.api == ApiArg::Images;
        let (generation, steps_key) = self.generation.grid(images_api, &openai.extra_body)?;
        openai.image_steps_key = steps_key;
        if self.no_stream
            && self.audio.speech_stream == Some(crate::args::audio::SpeechStreamArg::Sse)
        {
            bail!("--speech-stream sse streams the answer: drop --no-stream");
        }
        Ok(RequestOptions {
            http2: self.http2()?,
            api: self.api.api(),
            openai,
            template,
            tensors,
            grpc: self.tensors.grpc_method(),
            realtime: self.realtime.options(self.api, seed)?,
            audio: self.audio.options(self.api, self.realtime.lengths(seed)?)?,
            batch: self.batch()?,
            images,
            generation,
            item_unit: self.item_unit(),
        })
    }

    /// `--api http`'s template, items path and streaming, read and checked (`None` for the
    /// other APIs).
    pub(super) fn template(&self) -> Result<Option<HttpTemplate>> {
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

    /// The settings that shape every body (`extra_body`: `--extra-body`, parsed); the model
    /// is named once the target is known.
    fn openai(
        &self,
        extra_body: Option<serde_json::Result<serde_json::Value>>,
    ) -> Result<OpenAiConfig> {
        let mut extra_body = match extra_body {
            None => serde_json::Map::new(),
            Some(parsed) => match parsed.context("--extra-body: not valid JSON")? {
                serde_json::Value::Object(map) => map,
                _ => bail!("--extra-body: must be a JSON object, e.g. '{{\"temperature\": 0}}'"),
            },
        };
        if let Some(query) = self.rerank_query()? {
            extra_body.insert("query".into(), serde_json::Value::String(query));
        }
        let headers = self
            .headers
            .iter()
            .map(|header| parse_header(header))
            .collect::<Result<Vec<_>>>()?;
        let http_streams = self
            .http_stream
            .stream_format
            .is_some_and(|f| f != StreamFormatArg::None);
        let grpc_streams = self.tensors.grpc == Some(crate::args::tensor::GrpcArg::Stream);
        Ok(OpenAiConfig {
            api: self.api.kind(),
            model: String::new(),
            stream: !self.no_stream && (self.api.streams() || http_streams || grpc_streams),
            include_usage: true,
            continuous_usage: !self.no_continuous_usage,
            ignore_eos: !self.no_ignore_eos,
            extra_body,
            headers,
            api_key: self.api_key.clone(),
            sigv4: self.sigv4()?,
            ..OpenAiConfig::default()
        })
    }

    /// `--http2`, checked: not for the APIs that open their own connections (a WebSocket's
    /// HTTP/1.1 upgrade, gRPC's HTTP/2 already).
    fn http2(&self) -> Result<bool> {
        if self.http2 && self.api == ApiArg::Realtime {
            bail!("--http2 and --api realtime: a WebSocket session opens over HTTP/1.1");
        }
        if self.http2 && self.tensors.grpc.is_some() {
            bail!("--http2 and --grpc: gRPC speaks HTTP/2 already");
        }
        Ok(self.http2)
    }

    /// `--aws-region` and `--aws-service`, checked, with the credentials of the AWS chain.
    fn sigv4(&self) -> Result<Option<SigV4>> {
        let (region, service) = match (&self.aws_region, &self.aws_service) {
            (None, None) => return Ok(None),
            (Some(region), Some(service)) => (region.clone(), service.clone()),
            _ => bail!("--aws-region and --aws-service go together (SigV4 signs for both)"),
        };
        if self.api_key.is_some() {
            bail!("--api-key and --aws-region: a SigV4-signed request carries no API key");
        }
        if matches!(
            self.api,
            ApiArg::V2 | ApiArg::Transcriptions | ApiArg::Speech
        ) || self.target.is_empty()
        {
            bail!(
                "--aws-region signs the requests of the JSON APIs sent to --target (not v2 or \
                 the audio APIs)"
            );
        }
        let credentials = AwsCredentials::from_environment().context("--aws-region")?;
        Ok(Some(SigV4 {
            credentials,
            region,
            service,
        }))
    }

    /// `--query`, checked: rerank only, not empty.
    fn rerank_query(&self) -> Result<Option<String>> {
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
    fn batch(&self) -> Result<Option<u32>> {
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

    /// What one item is in reports: `inputs`, `documents`, `images`, `prompts` (batched
    /// completions),
    /// `rows` (v2 batch rows) or `items`.
    fn item_unit(&self) -> &'static str {
        match self.api {
            ApiArg::Embeddings | ApiArg::Rerank | ApiArg::Images => self.api.kind().item_unit(),
            ApiArg::Completions if self.batch_size.is_some() => "prompts",
            ApiArg::V2 => "rows",
            _ => "items",
        }
    }

    /// What `run.workload` records beside the workload's own description.
    pub(super) fn described(&self, seed: u64) -> BTreeMap<String, serde_json::Value> {
        let mut described = BTreeMap::new();
        described.insert("counting_tokenizer".into(), self.tokenizer.clone().into());
        if let Some(path) = &self.items_path {
            described.insert("items_path".into(), path.clone().into());
        }
        self.http_stream.describe(&mut described);
        if let Some(note) = self.tensors.input_tokens_note(self.api == ApiArg::V2) {
            described.insert("tensor_input_tokens".into(), note.into());
        }
        if let Some(grpc) = self.tensors.grpc {
            let method = match grpc {
                crate::args::tensor::GrpcArg::Unary => "ModelInfer",
                crate::args::tensor::GrpcArg::Stream => "ModelStreamInfer",
            };
            described.insert("grpc".into(), method.into());
        }
        let lengths = self.realtime.lengths(seed).ok().flatten();
        if let Some(audio) = self.audio.describe(self.api, lengths.as_ref()) {
            described.insert("audio".into(), audio);
        }
        if let Ok(Some(realtime)) = self.realtime.options(self.api, seed) {
            let dialect = match realtime.dialect {
                goodput_core::backend::realtime::RealtimeDialect::OpenAi => "openai",
                goodput_core::backend::realtime::RealtimeDialect::Vllm => "vllm",
            };
            let session = serde_json::json!({
                "dialect": dialect,
                "audio_seconds": crate::args::audio::seconds_described(lengths.as_ref()),
                "audio_chunk_ms": realtime.chunk.as_secs_f64() * 1e3,
            });
            described.insert("realtime".into(), session);
        }
        described
    }
}

/// A `--header NAME:VALUE`.
fn parse_header(header: &str) -> Result<(HeaderName, HeaderValue)> {
    let (name, value) = header
        .split_once(':')
        .with_context(|| format!("--header {header}: expected NAME:VALUE"))?;
    let name = HeaderName::try_from(name.trim())
        .with_context(|| format!("--header: `{}` is not a header name", name.trim()))?;
    let value = HeaderValue::try_from(value.trim())
        .with_context(|| format!("--header {name}: invalid value"))?;
    Ok((name, value))
}
