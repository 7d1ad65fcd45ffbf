//! `--aws-region`/`--aws-service` (AWS SigV4) end to end through the binary: credentials from
//! the environment, every request signed (`authorization` with the credential scope,
//! `x-amz-date`, `x-amz-security-token`), nothing of the secret in the run's outputs; the
//! signature itself is checked against the AWS test suite in `goodput_core::http::sigv4`.
#![allow(clippy::unwrap_used)]

mod support;

use std::io::{BufRead, BufReader, Write};
use std::sync::{Arc, Mutex};

use serde_json::json;
use support::goodput;

/// Request heads the server saw.
type Heads = Arc<Mutex<Vec<String>>>;

fn read_head(reader: &mut impl BufRead) -> Option<String> {
    let (mut head, mut length, mut line) = (String::new(), 0, String::new());
    loop {
        line.clear();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
        }
        if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = value.trim().parse().unwrap();
        }
        if line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    Some(head)
}

/// Answers every POST with one whole chat completion of 3 tokens (anything else: 404).
fn chat_server() -> (String, Heads) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let heads: Heads = Arc::default();
    let log = Arc::clone(&heads);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut writer = stream;
                while let Some(head) = read_head(&mut reader) {
                    let post = head.starts_with("POST ");
                    let answer = json!({"id": "c", "object": "chat.completion", "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": "a b c"},
                         "finish_reason": "stop"}],
                        "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}})
                    .to_string();
                    let status = if post { "200 OK" } else { "404 Not Found" };
                    if post {
                        log.lock().unwrap().push(head);
                    }
                    let response = support::json_response(status, &answer);
                    if writer.write_all(response.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (format!("http://{address}/v1"), heads)
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

#[test]
fn every_request_is_signed_and_the_secret_is_written_nowhere() {
    let (url, heads) = chat_server();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let args = format!(
        "run --warmup 0 --concurrency 1 --requests 3 --no-stream --model m --target {url} \
         --aws-region eu-west-1 --aws-service sagemaker --out {}",
        out.display()
    );
    let output = goodput()
        .args(args.split_whitespace())
        .env("AWS_ACCESS_KEY_ID", "AKIDTESTSIGV4")
        .env("AWS_SECRET_ACCESS_KEY", "SECRETSIGV4DONOTLEAK")
        .env("AWS_SESSION_TOKEN", "TOKENSIGV4DONOTLEAK")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let heads = heads.lock().unwrap();
    assert_eq!(heads.len(), 3);
    for head in heads.iter() {
        let head = head.to_ascii_lowercase();
        let scope = "authorization: aws4-hmac-sha256 credential=akidtestsigv4/";
        assert!(head.contains(scope), "{head}");
        let region = "/eu-west-1/sagemaker/aws4_request, signedheaders=";
        assert!(head.contains(region), "{head}");
        assert!(head.contains("x-amz-date: "), "{head}");
        let token = "x-amz-security-token: tokensigv4donotleak";
        assert!(head.contains(token), "{head}");
    }
    for entry in walk(&out) {
        let text = String::from_utf8_lossy(&std::fs::read(&entry).unwrap()).into_owned();
        for secret in ["SECRETSIGV4DONOTLEAK", "TOKENSIGV4DONOTLEAK"] {
            assert!(!text.contains(secret), "{secret} in {}", entry.display());
        }
    }
    let printed = format!("{}{stderr}", String::from_utf8_lossy(&output.stdout));
    assert!(!printed.contains("SIGV4DONOTLEAK"), "{printed}");
}

#[test]
fn sigv4_flags_are_checked() {
    for (args, needle) in [
        (vec!["--aws-region", "us-east-1"], "go together"),
        (
            vec!["--aws-region", "us-east-1", "--aws-service", "bedrock"],
            "--target",
        ),
    ] {
        let output = goodput()
            .args(["run", "--requests", "1"])
            .args(&args)
            .env("AWS_ACCESS_KEY_ID", "A")
            .env("AWS_SECRET_ACCESS_KEY", "S")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}
