//! `HttpConfig::http2` (`--http2`): the chat API over HTTP/2 with prior knowledge (h2c), in
//! paused time, against a server written here with hyper's own HTTP/2 server over in-memory
//! pipes: each streamed answer's first event 100 ms after the request, then four more 20 ms
//! apart, then `[DONE]`. TTFT is exactly 100 ms and every gap exactly 20 ms, as over HTTP/1.1;
//! eight requests at a concurrency of four share one connection (the server counts the
//! connections it is handed).
#![allow(clippy::unwrap_used)]

mod support;

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use goodput_core::backend::openai::ApiKind;
use goodput_core::config::{LoadSpec, RunConfig, Warmup};
use goodput_core::http::{BoxIo, FnConnector, HttpClient, HttpConfig, Target};
use goodput_core::workload::SyntheticWorkload;
use http_body_util::StreamBody;
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http2;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio_util::sync::CancellationToken;

const FIRST: Duration = Duration::from_millis(100);
const GAP: Duration = Duration::from_millis(20);
const EVENTS: usize = 5;

type Body = StreamBody<futures_util::stream::BoxStream<'static, Result<Frame<Bytes>, Infallible>>>;

/// The streamed answer: `EVENTS` one-word deltas, the first after `FIRST`, then `GAP` apart.
async fn answer(request: hyper::Request<Incoming>) -> Result<hyper::Response<Body>, Infallible> {
    assert_eq!(request.version(), http::Version::HTTP_2);
    assert_eq!(request.uri().path(), "/v1/chat/completions");
    let events = futures_util::stream::unfold(0usize, |sent| async move {
        if sent > EVENTS {
            return None;
        }
        let text = if sent == EVENTS {
            "data: [DONE]\n\n".to_string()
        } else {
            tokio::time::sleep(if sent == 0 { FIRST } else { GAP }).await;
            let delta = serde_json::json!({"id": "x", "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {"content": " word"}, "finish_reason": null}]});
            format!("data: {delta}\n\n")
        };
        Some((Ok(Frame::data(Bytes::from(text))), sent + 1))
    });
    let body = StreamBody::new(futures_util::StreamExt::boxed(events));
    let response = hyper::Response::builder()
        .header("content-type", "text/event-stream")
        .body(body)
        .unwrap();
    Ok(response)
}

#[tokio::test(start_paused = true)]
async fn http2_multiplexes_one_connection_with_http1s_exact_timing() {
    let connections = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&connections);
    let connector = FnConnector::new(move || {
        let counted = Arc::clone(&counted);
        async move {
            counted.fetch_add(1, Ordering::SeqCst);
            let (client, served) = tokio::io::duplex(1 << 16);
            tokio::spawn(async move {
                let service = service_fn(answer);
                let _ = http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(served), service)
                    .await;
            });
            Ok(Box::new(client) as BoxIo)
        }
    });
    let config = HttpConfig {
        http2: true,
        ..HttpConfig::default()
    };
    let target = Target::parse("http://h2.test/v1").unwrap();
    let client = HttpClient::new(target, Arc::new(connector), config);
    let run = RunConfig {
        load: LoadSpec::Closed { concurrency: 4 },
        max_requests: Some(8),
        warmup: Warmup::None,
        ..RunConfig::default()
    };
    let openai = goodput_core::backend::openai::OpenAiConfig {
        api: ApiKind::Chat,
        stream: true,
        ..support::openai("m")
    };
    let workload = Arc::new(SyntheticWorkload {
        input_tokens: 8,
        output_tokens: Some(5),
        seed: 1,
    });
    let result = support::run_with(
        run,
        client.clone(),
        openai,
        workload,
        CancellationToken::new(),
    )
    .await;
    assert_eq!(result.records.len(), 8);
    for record in &result.records {
        assert_eq!(record.failure, None, "{record:?}");
        assert_eq!(record.ttft_from_send(), Some(FIRST), "{record:?}");
        assert_eq!(
            record.e2e_from_send(),
            Some(FIRST + GAP * (EVENTS as u32 - 1))
        );
        assert_eq!(record.tpot(), Some(GAP));
    }
    assert_eq!(connections.load(Ordering::SeqCst), 1, "one connection");
    assert_eq!(client.stats().opened, 1);
}
