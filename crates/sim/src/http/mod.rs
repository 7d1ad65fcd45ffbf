//! The simulator's OpenAI-compatible HTTP server (hyper 1, HTTP/1.1 with keep-alive):
//! `POST /v1/chat/completions`, `POST /v1/completions`, `POST /v1/embeddings`,
//! `POST /v1/rerank`, KServe v2's `POST /v2/models/{model}/infer` (and its metadata and health
//! routes), `POST /v1/audio/transcriptions` and `POST /v1/audio/speech` (`audio.rs`,
//! `speech.rs`), `POST /v1/images/generations` (`images.rs`: a diffusion pipeline's cost), `GET /v1/models`, `GET /health`, `GET /metrics` and `POST /tokenize`
//! (vLLM's shape), answering from the engine run by [`crate::driver`].
//!
//! Wire behaviour follows vLLM: streamed chat answers start with a role-only chunk at the first
//! token, then one content chunk per engine token event (several tokens per chunk with
//! speculative decoding), `finish_reason` on the chunk with the last token, an optional usage
//! chunk with `choices: []`, then `data: [DONE]`. Completions default to 16 tokens, chat to the
//! rest of the context. Errors are OpenAI error objects. Faults from [`crate::config::FaultConfig`]
//! are drawn once per request from a generator seeded by the configured seed and the request's
//! number.

mod answer;
mod audio;
mod body;
mod channels;
mod completion_stream;
mod detect;
mod encode;
mod faults;
mod grpc;
mod images;
mod infer;
mod messages;
mod realtime;
mod request;
mod routes;
mod speech;
pub use routes::REPLICA_HEADER;
mod stream;
mod tokenize;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::{JoinHandle, JoinSet};

use self::answer::AnswerHeader;
use self::request::{Dialect, PromptContext};
use crate::config::{ConfigError, EngineConfig, SimConfig};
use crate::driver::DriverHandle;
use crate::engine::EngineStats;
use crate::server_metrics::{CacheConfigInfo, ServerMetrics};
use crate::text::{Tokenizer, derive_seed};

/// Everything the request handlers share.
#[derive(Debug)]
struct ServerState {
    config: SimConfig,
    model_name: String,
    prompt_context: PromptContext,
    driver: DriverHandle,
    next_request: AtomicU64,
    started_unix: u64,
    /// The image-generation pipeline: one batch at a time, in arrival order (`images.rs`).
    image_pipeline: tokio::sync::Mutex<()>,
}

impl ServerState {
    /// Numbers generation requests in arrival order (seeds their random draws).
    fn next_request_number(&self) -> u64 {
        self.next_request.fetch_add(1, Ordering::Relaxed)
    }

    fn answer_header(&self, dialect: Dialect, request_number: u64) -> AnswerHeader {
        let prefix = match dialect {
            Dialect::Chat => "chatcmpl",
            Dialect::Completions => "cmpl",
            Dialect::Messages => "msg",
        };
        let tag = derive_seed(self.config.seed, request_number, 0x1d);
        AnswerHeader {
            id: format!("{prefix}-{tag:016x}"),
            created: unix_now(),
            model: self.model_name.clone(),
            seed: self.config.seed,
            request_number,
        }
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_secs())
}

/// The KV cache figures `vllm:cache_config_info` reports, and the block size prompts are
/// hashed with (only when the engine caches prefixes).
fn cache_info(config: &SimConfig) -> (CacheConfigInfo, Option<u32>) {
    match &config.engine {
        EngineConfig::Batching(batching) => {
            let info = CacheConfigInfo {
                block_size: batching.block_size,
                num_gpu_blocks: batching.kv_blocks(),
                prefix_caching: batching.prefix_caching,
                engines: config.replicas,
            };
            (info, batching.prefix_caching.then_some(batching.block_size))
        }
        EngineConfig::Fixed(_) => (CacheConfigInfo::default(), None),
    }
}

/// A simulated inference server: the engine driver plus the HTTP front end. Cheap to clone;
/// clones serve the same engine.
#[derive(Debug, Clone)]
pub struct SimServer {
    state: Arc<ServerState>,
}

impl SimServer {
    /// Validates the config and spawns the engine driver on the current tokio runtime.
    pub fn new(config: SimConfig) -> Result<SimServer, ConfigError> {
        Self::build(config, false)
    }

    /// [`new`](Self::new) for a paused clock (virtual time): requests that reach an idle
    /// engine at one instant share the step that starts then, whatever order the tasks that
    /// carried them ran in.
    pub fn on_paused_clock(config: SimConfig) -> Result<SimServer, ConfigError> {
        Self::build(config, true)
    }

    fn build(config: SimConfig, paused: bool) -> Result<SimServer, ConfigError> {
        config.validate()?;
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            ConfigError::Invalid("the simulator must be started inside a tokio runtime".to_string())
        })?;
        let model_name = config.model_name();
        let max_model_len = config.engine.max_model_len();
        let tokenizer =
            Tokenizer::new(config.prompt_tokenizer).with_chat_template(config.chat_template_tokens);
        tokenizer.warm_up();
        let (cache, block_size) = cache_info(&config);
        let metrics = ServerMetrics::new(&model_name, max_model_len, cache);
        let engine = crate::build_engine(&config);
        let driver = DriverHandle::spawn_on(&runtime, engine, (config.time_scale, paused), metrics);
        let state = ServerState {
            prompt_context: PromptContext {
                tokenizer,
                block_size,
                max_model_len,
            },
            config,
            model_name,
            driver,
            next_request: AtomicU64::new(0),
            started_unix: unix_now(),
            image_pipeline: tokio::sync::Mutex::new(()),
        };
        Ok(SimServer {
            state: Arc::new(state),
        })
    }

    /// Accepts connections until `shutdown` resolves, then stops accepting and aborts the
    /// connections still open. Failed accepts (e.g. out of file descriptors) are retried.
    pub async fn serve(
        &self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send,
    ) -> std::io::Result<()> {
        let mut connections = JoinSet::new();
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        let _ = stream.set_nodelay(true);
                        connections.spawn(self.serve_any(stream));
                    }
                    Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
                },
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        connections.shutdown().await;
        Ok(())
    }

    /// Serves one already-connected transport in the protocol it opens with: KServe v2 over
    /// gRPC after the HTTP/2 preface (`grpc.rs`), else HTTP/1.1
    /// ([`SimServer::serve_connection`], WebSocket upgrades included) — TCP live, the in-memory
    /// pipes of virtual time alike.
    pub fn serve_any<I>(&self, io: I) -> impl Future<Output = ()> + Send + 'static
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let server = self.clone();
        async move {
            match detect::sniff(io).await {
                Ok((true, io)) => grpc::serve_h2(Arc::clone(&server.state), io).await,
                Ok((false, io)) => server.serve_connection(io).await,
                // The client went away before saying anything.
                Err(_) => {}
            }
        }
    }

    /// Serves one already-connected transport (HTTP/1.1, keep-alive) until the client closes
    /// it or a fault cuts it.
    pub fn serve_connection<I>(&self, io: I) -> impl Future<Output = ()> + Send + 'static
    where
        I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let state = Arc::clone(&self.state);
        async move {
            let service = service_fn(move |request| routes::handle(Arc::clone(&state), request));
            let connection = http1::Builder::new()
                .keep_alive(true)
                .serve_connection(TokioIo::new(io), service)
                .with_upgrades();
            // An error here means the client went away or a fault cut the connection.
            let _ = connection.await;
        }
    }

    /// The engine's current state.
    pub fn stats(&self) -> EngineStats {
        self.state.driver.stats()
    }

    /// The served model name.
    pub fn model_name(&self) -> &str {
        &self.state.model_name
    }

    /// The configuration being simulated.
    pub fn config(&self) -> &SimConfig {
        &self.state.config
    }

    /// The Prometheus text served at `/metrics`.
    pub fn metrics_text(&self) -> String {
        self.state.driver.render_metrics()
    }
}

/// Why [`spawn`] failed.
#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Cause.
        source: std::io::Error,
    },
}

/// A simulator serving on a TCP port. Dropping it stops the server too.
#[derive(Debug)]
pub struct RunningSim {
    addr: SocketAddr,
    server: SimServer,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl RunningSim {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://<addr>`, the base URL of the OpenAI-compatible API (paths start with `/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The server (for its statistics).
    pub fn server(&self) -> &SimServer {
        &self.server
    }

    /// Stops accepting and aborts the open connections; returns at once (the server task
    /// finishes in the background). See [`RunningSim::shutdown_and_wait`].
    pub fn shutdown(mut self) {
        self.signal_stop();
    }

    /// Stops accepting, aborts open connections and waits until the server task has ended.
    pub async fn shutdown_and_wait(mut self) -> std::io::Result<()> {
        self.signal_stop();
        match self.task.take() {
            Some(task) => task.await.map_err(std::io::Error::other)?,
            None => Ok(()),
        }
    }

    fn signal_stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl Drop for RunningSim {
    fn drop(&mut self) {
        self.signal_stop();
    }
}

/// Binds `addr` (tests use `127.0.0.1:0`), spawns [`SimServer::serve`] and returns the bound
/// address with a handle whose [`RunningSim::shutdown`] stops it.
pub async fn spawn(config: SimConfig, addr: SocketAddr) -> Result<RunningSim, SpawnError> {
    let server = SimServer::new(config)?;
    let bind_error = |source| SpawnError::Bind { addr, source };
    let listener = TcpListener::bind(addr).await.map_err(bind_error)?;
    let bound = listener.local_addr().map_err(bind_error)?;
    let (stop, stopped) = oneshot::channel::<()>();
    let serving = server.clone();
    let task = tokio::spawn(async move {
        let shutdown = async move {
            let _ = stopped.await;
        };
        serving.serve(listener, shutdown).await
    });
    Ok(RunningSim {
        addr: bound,
        server,
        stop: Some(stop),
        task: Some(task),
    })
}
