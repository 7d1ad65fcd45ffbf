//! The backend of `--api` (an OpenAI-compatible API, a JSON template for `http`, KServe v2
//! tensors for `v2` over HTTP or gRPC, WebSocket sessions for `realtime`, the audio APIs) and the model name it sends; for a fleet, one such backend per target
//! behind core's `FleetBackend`.

use std::sync::Arc;

use anyhow::{Context, Result, bail};
use goodput_core::backend::Backend;
use goodput_core::backend::audio::{AudioBackend, AudioConfig, DrawnTones};
use goodput_core::backend::fleet::{FleetBackend, FleetTarget};
use goodput_core::backend::openai::{OpenAiBackend, OpenAiConfig};
use goodput_core::backend::realtime::{RealtimeBackend, RealtimeConfig, RealtimeDialect};
use goodput_core::backend::template::{TemplateBackend, TemplateConfig};
use goodput_core::backend::v2::grpc::{GrpcBackend, GrpcConfig, GrpcMethod};
use goodput_core::backend::v2::{TensorSource, V2Backend, V2Config};
use goodput_core::http::{HttpClient, HttpConfig, Target};

use super::session::{Endpoint, first_model};
use crate::options::run::{
    Api, AudioOptions, FleetOptions, RealtimeOptions, RequestOptions, RunOptions,
};

/// The sample rate of a `pcm` speech answer (OpenAI's: 24 kHz, 16-bit mono).
const PCM_RATE: u32 = 24_000;

/// The model to name: `--model`, the simulator's, else the first the target lists (`--api
/// http` lists nothing: its template names the model, if any).
pub(crate) async fn model_name(
    options: &RunOptions,
    endpoint: &Endpoint,
    client: &HttpClient,
) -> Result<String> {
    let api = options.request.api;
    match options.model.clone().or_else(|| endpoint.model.clone()) {
        Some(model) => Ok(model),
        None if api == Api::Http => Ok(String::new()),
        None if api == Api::V2 => {
            bail!("--api v2 needs --model: the model of /v2/models/{{model}}/infer")
        }
        None => first_model(client).await,
    }
}

/// The backend of `--api`: a JSON template (`http`), KServe v2 tensors (`v2`) or an
/// OpenAI-compatible API.
pub(crate) fn backend(
    request: &RequestOptions,
    openai: OpenAiConfig,
    client: HttpClient,
    time_scale: f64,
) -> Result<Arc<dyn Backend>> {
    if let Some(http) = request.template.clone() {
        let config = TemplateConfig {
            template: http.template,
            items: http.items,
            stream: http.stream,
            tokens: http.tokens,
            headers: openai.headers,
            api_key: openai.api_key,
            sigv4: openai.sigv4,
            max_body_bytes: openai.max_body_bytes,
        };
        let backend = TemplateBackend::new(config, client).context("backend configuration")?;
        return Ok(Arc::new(backend));
    }
    if let Some(audio) = &request.audio {
        return audio_backend(audio, openai, client);
    }
    if let Some(realtime) = &request.realtime {
        return realtime_backend(realtime, openai, &client, time_scale);
    }
    if let (Some(source), Some(method)) = (request.tensors.clone(), request.grpc) {
        return grpc_backend(source, method, openai, &client);
    }
    if let Some(source) = request.tensors.clone() {
        let config = V2Config {
            model: openai.model,
            source,
            headers: openai.headers,
            api_key: openai.api_key,
            max_body_bytes: openai.max_body_bytes,
        };
        let backend = V2Backend::new(config, client).context("backend configuration")?;
        return Ok(Arc::new(backend));
    }
    Ok(Arc::new(
        OpenAiBackend::new(openai, client).context("backend configuration")?,
    ))
}

/// The audio APIs' backend (`--api transcriptions`, `--api speech`).
fn audio_backend(
    audio: &AudioOptions,
    openai: OpenAiConfig,
    client: HttpClient,
) -> Result<Arc<dyn Backend>> {
    let config = AudioConfig {
        api: audio.api,
        model: openai.model,
        stream: openai.stream,
        clips: audio.clips.clone(),
        drawn: audio.drawn.clone().map(|lengths| DrawnTones {
            rate: audio.tone_rate,
            length: Arc::new(move |index| lengths.draw(index)),
        }),
        language: audio.language.clone(),
        voice: audio.voice.clone(),
        format: audio.format,
        speech_stream: audio.speech_stream,
        pcm_rate: PCM_RATE,
        headers: openai.headers,
        api_key: openai.api_key,
        max_line_bytes: openai.max_line_bytes,
        max_body_bytes: openai.max_body_bytes,
        extra_body: openai.extra_body,
    };
    let backend = AudioBackend::new(config, client).context("backend configuration")?;
    Ok(Arc::new(backend))
}

/// `--api realtime`'s backend: sessions at `{target}/realtime` over `ws://`.
fn realtime_backend(
    realtime: &RealtimeOptions,
    openai: OpenAiConfig,
    client: &HttpClient,
    time_scale: f64,
) -> Result<Arc<dyn Backend>> {
    let target = client.target();
    if target.is_https() {
        bail!("--api realtime: wss:// (an https:// target) is not supported yet");
    }
    let mut url = target.url("realtime").replacen("http://", "ws://", 1);
    if realtime.dialect == RealtimeDialect::OpenAi {
        url = format!("{url}?model={}", openai.model);
    }
    let config = RealtimeConfig {
        url,
        model: openai.model,
        dialect: realtime.dialect,
        audio: realtime.audio,
        audio_length: realtime.lengths.clone().map(|lengths| {
            Arc::new(move |index| lengths.draw(index)) as goodput_core::backend::audio::AudioLength
        }),
        chunk: realtime.chunk,
        time_scale,
        api_key: openai.api_key,
        headers: openai.headers,
    };
    let backend = RealtimeBackend::new(config, client.clone()).context("--target")?;
    Ok(Arc::new(backend))
}

/// `--api v2 --grpc`'s backend: the target's host and port as a gRPC origin.
fn grpc_backend(
    source: TensorSource,
    method: GrpcMethod,
    openai: OpenAiConfig,
    client: &HttpClient,
) -> Result<Arc<dyn Backend>> {
    let target = client.target();
    // The origin names the authority; TLS (ALPN `h2`, for an https:// target) is the
    // client's connector's, below the channel.
    let config = GrpcConfig {
        origin: format!("http://{}", target.authority()),
        model: openai.model,
        source,
        method,
        headers: openai.headers,
        api_key: openai.api_key,
        max_body_bytes: openai.max_body_bytes,
    };
    let backend = GrpcBackend::new(config, client.clone()).context("backend configuration")?;
    Ok(Arc::new(backend))
}

/// The backend of a run: [`backend`] over `client`, or, for a fleet (several targets, or one
/// whose replicas `--replica-header` names), one per target behind a [`FleetBackend`].
pub(crate) fn run_backend(
    request: &RequestOptions,
    fleet: &FleetOptions,
    openai: OpenAiConfig,
    client: HttpClient,
    time_scale: f64,
) -> Result<Arc<dyn Backend>> {
    if !fleet.is_fleet() {
        return backend(request, openai, client, time_scale);
    }
    let members = if fleet.targets.is_empty() {
        let label = client.target().authority().to_string();
        vec![FleetTarget {
            label,
            backend: backend(request, openai, client, time_scale)?,
        }]
    } else {
        fleet
            .targets
            .iter()
            .map(|target| {
                let parsed = Target::parse(&target.url)
                    .with_context(|| format!("--target {}", target.url))?;
                let client = HttpClient::tcp(parsed, http_config(request));
                Ok(FleetTarget {
                    label: target.label.clone(),
                    backend: backend(request, openai.clone(), client, time_scale)?,
                })
            })
            .collect::<Result<Vec<_>>>()?
    };
    let fleet = FleetBackend::new(members, fleet.routing.clone(), fleet.replica_header.clone())
        .context("--target")?;
    Ok(Arc::new(fleet))
}

/// The run's HTTP settings: HTTP/2 with `--http2`.
pub(crate) fn http_config(request: &RequestOptions) -> HttpConfig {
    HttpConfig {
        http2: request.http2,
        ..HttpConfig::default()
    }
}
