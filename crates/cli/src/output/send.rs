//! One HTTP request to a receiver the user named (a Pushgateway, an OpenTelemetry collector,
//! an MLflow tracking server), bounded by a timeout, through goodput's own client (TLS
//! included). Runs on a thread of its own with a one-thread runtime, so it can be called from
//! the synchronous end of a run whatever runtime is around it.

use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use bytes::Bytes;
use goodput_core::http::{HttpClient, HttpConfig, Target};
use goodput_core::record::Exchange;
use http::{Method, Request, Uri};
use http_body_util::Full;

/// How long one request to a receiver may take, connection to the end of the answer.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(10);

/// Largest answer read from a receiver.
const MAX_ANSWER: usize = 1 << 20;

/// A receiver's base URL: where to connect and the path prefix requests go below.
#[derive(Debug, Clone)]
pub(crate) struct Receiver {
    target: Target,
    base_path: String,
}

impl Receiver {
    /// Parses `url` (http or https, no credentials); `flag` names it in errors.
    pub(crate) fn parse(flag: &str, url: &str) -> Result<Receiver> {
        let target = Target::parse(url).with_context(|| format!("{flag} {url}"))?;
        let uri: Uri = url
            .trim()
            .parse()
            .with_context(|| format!("{flag} {url}: not a URL"))?;
        let base_path = uri.path().trim_end_matches('/').to_string();
        Ok(Receiver { target, base_path })
    }

    /// Sends `body` with `method` to the base path + `path`; the answer's body on a 2xx
    /// status, an error naming the status and the answer otherwise.
    pub(crate) fn send(
        &self,
        method: Method,
        path: &str,
        content_type: &str,
        body: Vec<u8>,
    ) -> Result<String> {
        let uri = format!("{}{path}", self.base_path);
        let request = Request::builder()
            .method(method.clone())
            .uri(uri.as_str())
            .header(http::header::CONTENT_TYPE, content_type)
            .body(Full::new(Bytes::from(body)))
            .with_context(|| format!("building {method} {uri}"))?;
        let client = HttpClient::tcp(self.target.clone(), HttpConfig::default());
        let answer = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .context("starting a runtime for the export")?;
                    runtime.block_on(async {
                        tokio::time::timeout(TIMEOUT, exchange(&client, request))
                            .await
                            .map_err(|_| anyhow!("no answer within {} s", TIMEOUT.as_secs()))?
                    })
                })
                .join()
                .map_err(|_| anyhow!("the export thread panicked"))?
        });
        answer.with_context(|| format!("{method} {}{uri}", self.origin()))
    }

    /// `scheme://authority`, for messages.
    fn origin(&self) -> String {
        let scheme = if self.target.is_https() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.target.authority())
    }
}

async fn exchange(client: &HttpClient, request: Request<Full<Bytes>>) -> Result<String> {
    let mut exchange = Exchange::default();
    let mut response = client
        .send(request, &mut exchange)
        .await
        .map_err(|failure| anyhow!("{}", failure.message))?;
    let status = response.status();
    let mut body = Vec::new();
    while let Some(frame) = response.body_mut().data().await {
        let frame = frame.context("reading the answer")?;
        if body.len() + frame.len() > MAX_ANSWER {
            bail!("the answer is larger than {} KiB", MAX_ANSWER >> 10);
        }
        body.extend_from_slice(&frame);
    }
    let text = String::from_utf8_lossy(&body).into_owned();
    if !status.is_success() {
        bail!("HTTP {status}: {}", text.trim());
    }
    Ok(text)
}
