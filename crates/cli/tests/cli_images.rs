//! Vision-language chat prompts: `--image-resolution` and `--images-per-request` against a
//! server written in the tests (`support::vision`) that decodes every `image_url` part's PNG
//! header; refused elsewhere.

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::Arc;

use support::goodput;
use support::vision::{Seen, instant, server};

#[test]
fn chat_prompts_carry_generated_pngs_of_each_resolution() {
    let seen: Seen = Arc::default();
    let url = server(Arc::clone(&seen), instant);
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
    let seen: Vec<Vec<(u32, u32)>> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|request| request.iter().flat_map(|m| m.1.clone()).collect())
        .collect();
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
