//! Probes of `goodput sim` (its derived figures with `--explain`; its behaviour as a server,
//! observed through a `goodput run` against it), of `goodput monitor` (watching the capture
//! server's `/monitor/metrics`) and of `goodput ui` (the page it serves, fetched).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use super::Expect::{At, Changes, Refused};
use super::probes::{Sub, Variant};
use super::{How, Probe, Stdout, expand, probe};
use crate::support::goodput;

const TEXT: &str = "/stdout_text";

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|a| a.to_string()).collect()
}

/// The variants of `sim` and `monitor`, `None` for other subcommands.
pub(crate) fn variants(sub: Sub) -> Option<Vec<Variant>> {
    Some(match sub {
        Sub::Sim => vec![explained(), served()],
        Sub::Monitor => vec![monitor()],
        Sub::Ui => vec![ui()],
        _ => return None,
    })
}

fn whole(base: &[&str], probes: Vec<Probe>) -> Variant {
    Variant {
        base: args(base),
        probes,
        runs: false,
        how: How {
            stdout: Stdout::Whole,
            client: None,
        },
    }
}

/// `goodput sim --explain`: every configuration flag shows in the derived figures.
fn explained() -> Variant {
    let fixed =
        |flag, value| probe(flag, &["--fixed", flag, value], At(TEXT)).against(&["--fixed"]);
    whole(
        &["sim", "--explain"],
        vec![
            probe(
                "--listen",
                &["--listen", "127.0.0.1:0"],
                Refused("--explain"),
            ),
            probe("--config", &["--config", "{batching}"], At(TEXT)),
            probe("--time-scale", &["--time-scale", "2"], At(TEXT)),
            probe(
                "--served-model-name",
                &["--served-model-name", "x"],
                At(TEXT),
            ),
            probe("--model", &["--model", "qwen2.5-7b"], At(TEXT)),
            probe("--gpu", &["--gpu", "h200"], At(TEXT)),
            probe("--tp", &["--tp", "2"], At(TEXT)),
            probe("--dtype", &["--dtype", "fp8"], At(TEXT)),
            probe("--kv-dtype", &["--kv-dtype", "fp8"], At(TEXT)),
            probe("--fixed", &["--fixed"], At(TEXT)),
            probe("--replicas", &["--replicas", "3"], At(TEXT)),
            probe("--layout", &["--layout", "2p+2d"], At(TEXT)),
            probe(
                "--routing",
                &["--routing", "least-loaded"],
                Refused("--replicas"),
            ),
            probe(
                "--routing",
                &["--replicas", "3", "--routing", "least-loaded"],
                At(TEXT),
            )
            .against(&["--replicas", "3"]),
            fixed("--ttft", "50ms"),
            fixed("--itl", "5ms"),
            fixed("--slots", "4"),
            probe(
                "--tokens-per-chunk",
                &["--tokens-per-chunk", "2"],
                Refused("--fixed"),
            ),
            fixed("--tokens-per-chunk", "2"),
        ]
        .into_iter()
        .chain(engine_probes())
        .collect(),
    )
}

/// The batching engine's policy, scheduler limits and speculative decoding.
fn engine_probes() -> Vec<Probe> {
    vec![
        probe("--engine-policy", &["--engine-policy", "sglang"], At(TEXT)),
        probe("--max-num-seqs", &["--max-num-seqs", "8"], At(TEXT)),
        probe(
            "--max-num-batched-tokens",
            &["--max-num-batched-tokens", "512"],
            At(TEXT),
        ),
        probe("--no-chunked-prefill", &["--no-chunked-prefill"], At(TEXT)),
        probe("--no-prefix-caching", &["--no-prefix-caching"], At(TEXT)),
        probe("--kv-blocks", &["--kv-blocks", "100"], At(TEXT)),
        probe("--max-waiting", &["--max-waiting", "5"], At(TEXT)),
        probe("--spec-acceptance", &["--spec-acceptance", "0.7"], At(TEXT)),
        probe(
            "--spec-draft-cost",
            &["--spec-draft-cost", "0.2"],
            Refused("--spec-acceptance"),
        ),
        probe(
            "--spec-draft-cost",
            &["--spec-acceptance", "0.7", "--spec-draft-cost", "0.2"],
            At(TEXT),
        )
        .against(&["--spec-acceptance", "0.7"]),
        probe(
            "--reasoning-format",
            &["--reasoning-tokens", "8", "--reasoning-format", "reasoning"],
            At(TEXT),
        )
        .against(&["--reasoning-tokens", "8"]),
    ]
}

/// The answer of a request offering one tool, so tool calls can happen.
const TOOLS: &str = r#"{"tools": [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]}"#;

/// The client run against a served simulator: small, bounded, offering tools.
const CLIENT: [&str; 22] = [
    "run",
    "--quiet",
    "--no-live",
    "--seed",
    "7",
    "--requests",
    "6",
    "--rate",
    "50",
    "--input-tokens",
    "32",
    "--output-tokens",
    "4",
    "--no-ignore-eos",
    "--request-timeout",
    "3s",
    "--extra-body",
    TOOLS,
    "--target",
    "{target}",
    "--out",
    "{out}",
];

/// `goodput sim --listen`: faults, reasoning, tool calls and lengths show in a client's run.
fn served() -> Variant {
    let reasoning = |flag, value| {
        probe(flag, &["--reasoning-tokens", "8", flag, value], Changes)
            .against(&["--reasoning-tokens", "8"])
    };
    Variant {
        base: args(&["sim", "--listen", "127.0.0.1:0", "--seed", "1"]),
        probes: [
            probe("--explain", &["--explain"], Refused("--listen")),
            probe(
                "--seed",
                &["--eos-mean-tokens", "2", "--seed", "2"],
                Changes,
            )
            .against(&["--eos-mean-tokens", "2"]),
            probe("--eos-mean-tokens", &["--eos-mean-tokens", "2"], Changes),
            probe("--reasoning-tokens", &["--reasoning-tokens", "8"], Changes),
            reasoning("--reasoning-budget", "2"),
            probe(
                "--tool-call-probability",
                &["--tool-call-probability", "1"],
                Changes,
            ),
            probe(
                "--enable-prompt-tokens-details",
                &["--enable-prompt-tokens-details"],
                Changes,
            ),
        ]
        .into_iter()
        .chain(fault_probes())
        .collect(),
        runs: false,
        how: How {
            stdout: Stdout::Kind,
            client: Some(args(&CLIENT)),
        },
    }
}

/// Every fault, injected into every answer: the client's run shows the failures.
fn fault_probes() -> Vec<Probe> {
    let fault = |flag| probe(flag, &[flag, "1"], Changes);
    vec![
        fault("--fault-http-500"),
        fault("--fault-http-429"),
        fault("--fault-reset"),
        fault("--fault-stall"),
        probe(
            "--fault-stall-for",
            &["--fault-stall", "1", "--fault-stall-for", "50ms"],
            Changes,
        )
        .against(&["--fault-stall", "1"]),
        fault("--fault-malformed"),
        fault("--fault-error"),
        fault("--fault-http-400"),
        fault("--fault-stall-before-response"),
        fault("--fault-invalid-json"),
        fault("--fault-sse-garbage"),
        fault("--fault-oversized-line"),
        fault("--fault-endless"),
    ]
}

fn monitor() -> Variant {
    let mut variant = whole(
        &[
            "monitor",
            "--target",
            "{url}/monitor",
            "--interval",
            "100ms",
            "--window",
            "200ms",
            "--duration",
            "700ms",
        ],
        vec![
            probe("--target", &["--target", "{url}/monitor/b"], At(TEXT)),
            probe(
                "--metrics-url",
                &["--metrics-url", "{url}/monitor/x/metrics"],
                At(TEXT),
            ),
            probe("--interval", &["--interval", "50ms"], At(TEXT)),
            probe("--window", &["--window", "300ms"], At(TEXT)),
            probe("--duration", &["--duration", "300ms"], At(TEXT)),
            probe("--trend-windows", &["--trend-windows", "5"], At(TEXT)),
            probe("--jsonl", &["--jsonl", "{out}/rows.jsonl"], At("/files")),
            probe("--json", &["--json"], At(TEXT)),
        ],
    );
    // How many rows a watch prints depends on timing; its header states every setting.
    variant.how = How {
        stdout: Stdout::FirstLine,
        client: None,
    };
    variant
}

/// Starts the server command `server`, runs `client` against the URL it prints, stops the
/// server. A server that exits before serving (a refused flag) is the observed output.
pub(crate) fn run_client(
    server: &[String],
    client: &[String],
    out: &Path,
    fixtures: &BTreeMap<&'static str, PathBuf>,
    capture_url: &str,
) -> Output {
    let mut child = goodput()
        .args(server)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("goodput sim starts");
    let Some(stderr) = child.stderr.take() else {
        return child.wait_with_output().expect("goodput sim exits");
    };
    // `goodput sim: serving MODEL on URL (Ctrl-C to stop)`, on stderr.
    let mut stderr = BufReader::new(stderr);
    let mut first = String::new();
    let _ = stderr.read_line(&mut first);
    let Some(url) = first
        .split_whitespace()
        .find(|word| word.starts_with("http://"))
        .map(str::to_string)
    else {
        let mut rest = String::new();
        let _ = stderr.read_to_string(&mut rest);
        let status = child.wait().expect("goodput sim exits");
        return Output {
            status,
            stdout: Vec::new(),
            stderr: (first + &rest).into_bytes(),
        };
    };
    // Keep the server's later stderr flowing so it never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    if client.first().is_some_and(|c| c == "GET") {
        let output = get(&url, &client[1]);
        let _ = child.kill();
        let _ = child.wait();
        return output;
    }
    let client: Vec<String> = client
        .iter()
        .map(|a| {
            expand(a, fixtures, capture_url)
                .replace("{target}", &url)
                .replace("{out}", &out.display().to_string())
        })
        .collect();
    let output = goodput().args(&client).output().expect("goodput run runs");
    let _ = child.kill();
    let _ = child.wait();
    output
}

/// A web page of a server (`goodput ui`): `GET {url}{path}`, the body as stdout, exit 0 for a
/// 200.
fn get(url: &str, path: &str) -> Output {
    use std::io::Write;
    use std::os::unix::process::ExitStatusExt;
    let address = url.trim_start_matches("http://").trim_end_matches('/');
    let mut stream = std::net::TcpStream::connect(address).expect("the server accepts");
    let _ = stream.set_read_timeout(Some(std::time::Duration::from_secs(60)));
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = Vec::new();
    let _ = stream.read_to_end(&mut reply);
    let text = String::from_utf8_lossy(&reply).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let ok = head.starts_with("HTTP/1.1 200");
    Output {
        status: std::process::ExitStatus::from_raw(if ok { 0 } else { 1 << 8 }),
        stdout: body.as_bytes().to_vec(),
        stderr: if ok {
            Vec::new()
        } else {
            head.as_bytes().to_vec()
        },
    }
}

/// `goodput ui`: the runs page it serves, from the store it is given; a non-loopback
/// address refused unless `--allow-remote` (which then only fails to bind an address this
/// machine does not have: no packet is sent).
fn ui() -> Variant {
    Variant {
        base: args(&["ui", "--store", "{runs_store}", "--listen", "127.0.0.1:0"]),
        probes: vec![
            probe("--store", &["--store", "{out}/empty.db"], At(TEXT)),
            probe(
                "--listen",
                &["--listen", "0.0.0.0:0"],
                Refused("--allow-remote"),
            ),
            probe(
                "--allow-remote",
                &["--allow-remote", "--listen", "192.0.2.1:0"],
                Refused("cannot listen there"),
            ),
        ],
        runs: true,
        how: How {
            stdout: Stdout::Whole,
            client: Some(args(&["GET", "/"])),
        },
    }
}
