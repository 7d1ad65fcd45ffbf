//! Vision-language chat prompts: `--image-resolution` and `--images-per-request` against a
//! server written here that decodes every `image_url` part's PNG header; refused elsewhere.

#![allow(clippy::unwrap_used)]

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use support::goodput;

type Seen = Arc<Mutex<Vec<Vec<(u32, u32)>>>>;

/// A chat server answering whole completions; records each request's image sizes, read
/// from the PNG header inside each `data:` URL.
fn server(seen: Seen) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let seen = Arc::clone(&seen);
            std::thread::spawn(move || serve(stream, &seen));
        }
    });
    format!("http://{address}/v1")
}

fn serve(stream: std::net::TcpStream, seen: &Seen) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut length = 0;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = value.trim().parse().unwrap();
            }
            if line == "\r\n" {
                break;
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let request: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let mut sizes = Vec::new();
        for message in request["messages"].as_array().unwrap() {
            for part in message["content"].as_array().into_iter().flatten() {
                if part["type"] == "image_url" {
                    let url = part["image_url"]["url"].as_str().unwrap();
                    let png = decode(url.strip_prefix("data:image/png;base64,").unwrap());
                    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
                    let be = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().unwrap());
                    sizes.push((be(16), be(20)));
                }
            }
        }
        seen.lock().unwrap().push(sizes);
        let answer = r#"{"id":"x","object":"chat.completion","created":0,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"a cat"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":2,"total_tokens":12}}"#;
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
            answer.len()
        );
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}

/// Standard base64, independent of goodput's encoder.
fn decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        _ => 63,
    };
    let mut out = Vec::new();
    for group in text.as_bytes().chunks(4) {
        let data: Vec<u8> = group
            .iter()
            .filter(|&&c| c != b'=')
            .map(|&c| value(c))
            .collect();
        let n = data
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &v)| n | (u32::from(v) << (18 - 6 * i)));
        for i in 0..data.len().saturating_sub(1) {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    out
}

#[test]
fn chat_prompts_carry_generated_pngs_of_each_resolution() {
    let seen: Seen = Arc::default();
    let url = server(Arc::clone(&seen));
    let output = goodput()
        .args([
            "run",
            "--target",
            &url,
            "--model",
            "m",
            "--no-stream",
            "--json",
        ])
        .args([
            "--image-resolution",
            "224x224,64x32",
            "--images-per-request",
            "3",
        ])
        .args(["--concurrency", "1", "--requests", "4", "--warmup", "0"])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        report["run"]["workload"]["image_resolutions"],
        "224x224,64x32"
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 4);
    // Three images per request, the two sizes in turn.
    let mut all: Vec<(u32, u32)> = seen.iter().flatten().copied().collect();
    assert!(seen.iter().all(|sizes| sizes.len() == 3), "{seen:?}");
    assert_eq!(all[..4], [(224, 224), (64, 32), (224, 224), (64, 32)]);
    all.sort_unstable();
    assert_eq!(all.iter().filter(|s| **s == (224, 224)).count(), 6);
}

#[test]
fn images_are_refused_without_chat_or_with_bad_sizes() {
    for (args, message) in [
        (
            vec!["--api", "completions", "--image-resolution", "224x224"],
            "use --api chat",
        ),
        (
            vec!["--image-resolution", "224"],
            "invalid image resolution",
        ),
        (
            vec!["--images-per-request", "2"],
            "needs --image-resolution",
        ),
        (
            vec!["--image-dir", "/nonexistent-goodput-dir"],
            "cannot read",
        ),
    ] {
        let output = goodput()
            .args(["run", "--target", "http://127.0.0.1:9/v1", "--model", "m"])
            .args(args)
            .output()
            .unwrap();
        assert_eq!(output.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(message), "{stderr}");
    }
}

/// Each request's input tokens (the simulator's usage) of a run of the embedded simulator.
fn sim_input_tokens(dir: &std::path::Path, extra: &[&str]) -> Vec<u64> {
    let out = dir.join(format!("run{}", extra.len()));
    let output = goodput()
        .args([
            "run",
            "--quiet",
            "--seed",
            "3",
            "--requests",
            "3",
            "--concurrency",
            "1",
        ])
        .args([
            "--warmup",
            "0",
            "--input-tokens",
            "32",
            "--output-tokens",
            "4",
            "--out",
        ])
        .arg(&out)
        .args(extra)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    std::fs::read_to_string(out.join("requests.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .map(|record| record["input_tokens"].as_u64().unwrap())
        .collect()
}

#[test]
fn the_simulator_charges_each_image_its_patch_tokens_live_and_in_virtual_time() {
    let dir = tempfile::tempdir().unwrap();
    for virtual_time in [&[][..], &["--virtual-time"][..]] {
        let dir = dir.path().join(format!("v{}", virtual_time.len()));
        let plain = sim_input_tokens(&dir, virtual_time);
        let images = [virtual_time, &["--image-resolution", "224x224,512x512"][..]].concat();
        let with = sim_input_tokens(&dir, &images);
        // 224×224: 64 tokens, 512×512: 343 (ceil(w/14)·ceil(h/14) patches, 2×2 merged), in turn.
        let extra: Vec<u64> = with.iter().zip(&plain).map(|(w, p)| w - p).collect();
        assert_eq!(extra, [64, 343, 64], "virtual time: {virtual_time:?}");
    }
}
