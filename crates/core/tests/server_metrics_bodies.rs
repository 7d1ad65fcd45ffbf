//! A metrics endpoint that misbehaves — garbage, a truncated body, a huge body, an error
//! status, malformed lines, a counter reset, binary noise, a stall — is scraped without a
//! crash: each scrape is kept or counted failed, and the report says so in warnings.
#![allow(clippy::unwrap_used)]

#[path = "support/wire_server.rs"]
mod wire_server;

use std::time::Duration;

use goodput_core::config::LoadSpec;
use goodput_core::http::{HttpClient, HttpConfig};
use goodput_core::metrics::StepAggregator;
use goodput_core::observe::server::series::ProblemKind;
use goodput_core::observe::server::{
    ClientTally, MetricsEndpoint, ScrapeHeader, ScrapeLog, ServerInputs, split_metrics_url,
    summarise,
};
use goodput_core::report::LoadReport;
use tokio::time::Instant;
use wire_server::{LAST_CHUNK, State, Step, TcpServer, chunk, response};

fn metrics(generated: u64) -> String {
    format!(
        "# TYPE vllm:generation_tokens_total counter\nvllm:generation_tokens_total{{model_name=\"m\"}} {generated}\n\
         vllm:num_requests_running{{model_name=\"m\"}} 2\n"
    )
}

fn answers(n: usize) -> Vec<Step> {
    let ok = |body: &str| vec![Step::Write(response("200 OK", "", body))];
    match n {
        0 => ok(&metrics(100)),
        1 => ok("<html><body>Not Found</body></html>\n"),
        // Content-length promises more than is sent, then the connection closes.
        2 => vec![
            Step::Write(b"HTTP/1.1 200 OK\r\ncontent-length: 5000\r\n\r\nvllm:generation".to_vec()),
            Step::Close,
        ],
        // 17 MiB of chunked text: abandoned at 16 MiB.
        3 => {
            let mut steps = vec![Step::Write(
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec(),
            )];
            let line = "vllm:num_requests_running 1\n".repeat(1 << 15);
            let piece = chunk(line.as_bytes());
            let chunks = (17 << 20) / line.len() + 1;
            steps.extend((0..chunks).map(|_| Step::Write(piece.clone())));
            steps.push(Step::Write(LAST_CHUNK.to_vec()));
            steps
        }
        4 => vec![Step::Write(response(
            "500 Internal Server Error",
            "",
            "boom",
        ))],
        // Valid lines among broken ones, and no final newline.
        5 => ok(&format!(
            "{}{{{{{{\nvllm:num_requests_waiting 3",
            metrics(160)
        )),
        // The server restarted: the counter starts over.
        6 => ok(&metrics(40)),
        7 => {
            let noise: Vec<u8> = (0..4096u32)
                .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
                .collect();
            let mut bytes =
                format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", noise.len()).into_bytes();
            bytes.extend_from_slice(&noise);
            vec![Step::Write(bytes)]
        }
        8 => vec![Step::Stall],
        _ => ok(&metrics(70)),
    }
}

#[tokio::test]
async fn bad_metrics_bodies_are_warnings_not_crashes() {
    let server = TcpServer::start(State::new(|n, _| answers(n))).await;
    let url = format!("http://{}/metrics", server.addr);
    let (target, path) = split_metrics_url(&url).unwrap();
    let client = HttpClient::tcp(target, HttpConfig::default());
    let endpoint = MetricsEndpoint::new(client, &path, &url, Duration::from_millis(1500));
    let start = Instant::now();
    let mut log = ScrapeLog::default();
    for _ in 0..10 {
        log.scrapes.push(endpoint.scrape(Some(start)).await);
    }
    let kinds: Vec<Option<ProblemKind>> = log
        .scrapes
        .iter()
        .map(|s| s.problem.as_ref().map(|p| p.kind))
        .collect();
    use ProblemKind::*;
    assert_eq!(
        kinds,
        vec![
            None,
            Some(NoKnownMetric),
            Some(Unreachable),
            Some(TooLarge),
            Some(Unreachable),
            Some(Malformed),
            None,
            Some(NoKnownMetric),
            Some(Unreachable),
            None,
        ],
        "{:#?}",
        log.scrapes.iter().map(|s| &s.problem).collect::<Vec<_>>()
    );
    assert!(
        log.scrapes[3]
            .problem
            .as_ref()
            .unwrap()
            .message
            .contains("16 MiB")
    );
    assert!(
        log.scrapes[8]
            .problem
            .as_ref()
            .unwrap()
            .message
            .contains("no answer")
    );
    // The malformed scrape kept its valid lines but not the cut-off last one.
    assert_eq!(log.scrapes[5].samples.len(), 2);

    assert_summary_warns(&log, url);
}

/// 100 → 160 → (reset) 40 → 70: 60 + 40 + 30 = 130 generated; the problems are warnings.
fn assert_summary_warns(log: &ScrapeLog, url: String) {
    let step = StepAggregator::new(None, Duration::from_secs(1))
        .report(LoadReport::from(&LoadSpec::Closed { concurrency: 1 }));
    let header = ScrapeHeader {
        metrics_url: url,
        interval_ms: 1000.0,
    };
    let (report, warnings) = summarise(ServerInputs {
        header: &header,
        log,
        step: &step,
        window: Duration::from_secs(1),
        tally: &ClientTally::default(),
    });
    assert_eq!(report.run_totals.generation_tokens, Some(130.0));
    assert_eq!((report.scrapes, report.failed_scrapes), (4, 6));
    assert_eq!(report.counter_resets, 1);
    let codes: Vec<&str> = warnings.iter().map(|w| w.code.as_str()).collect();
    assert_eq!(
        codes,
        [
            "server_metrics_failed",
            "server_metrics_malformed",
            "server_counter_reset"
        ]
    );
    assert!(
        warnings[0].message.contains("6 of 10"),
        "{}",
        warnings[0].message
    );
}
