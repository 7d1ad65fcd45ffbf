//! `--api images` (`/v1/images/generations`) end to end through the binary, against a server
//! written here that takes exactly 60 ms per image asked (`n`) and answers `n` `b64_json`
//! entries — or one fewer for a prompt containing "short": images/s is items/s, a request of
//! `n` images takes at least `n` × 60 ms, a short answer is a counted `protocol` failure. The
//! report validates against the schema. Against the embedded simulator in virtual time (each
//! request's latency exactly the diffusion cost model's, computed here from its constants) and
//! against `goodput sim` live; a batch beyond the simulator's limit is a counted failure.
#![allow(clippy::unwrap_used)]

mod support;

use std::io::{BufReader, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use support::{goodput, validate_against_schema};

/// The bodies the server received.
type Seen = Arc<Mutex<Vec<Value>>>;

const MS_PER_IMAGE: u64 = 60;

fn images_server(short: bool) -> (String, Seen) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let seen: Seen = Arc::default();
    let log = Arc::clone(&seen);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut writer = stream;
                while let Some((path, body)) = support::read_request(&mut reader) {
                    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let n = body["n"].as_u64().unwrap_or(1);
                    let (status, answer) = if path == "/v1/images/generations" {
                        log.lock().unwrap().push(body);
                        std::thread::sleep(Duration::from_millis(MS_PER_IMAGE * n));
                        let returned = if short { n - 1 } else { n };
                        let data: Vec<Value> = (0..returned)
                            .map(|_| json!({"b64_json": "iVBORw0KGgo="}))
                            .collect();
                        ("200 OK", json!({"created": 1, "data": data}))
                    } else {
                        ("404 Not Found", json!({}))
                    };
                    let answer = answer.to_string();
                    let response = support::json_response(status, &answer);
                    if writer.write_all(response.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (format!("http://{address}/v1"), seen)
}

fn run(url: &str, extra: &str) -> (std::process::Output, Value) {
    let args = format!(
        "run --json --warmup 0 --concurrency 1 --api images --target {url} --model sd \
         --requests 4 --slo e2e=10s {extra}"
    );
    let output = goodput().args(args.split_whitespace()).output().unwrap();
    let report = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (output, report)
}

#[test]
fn images_per_second_and_latency_per_image_against_a_server() {
    let (url, seen) = images_server(false);
    let (output, report) = run(&url, "--batch-size 3");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    validate_against_schema(&report);
    assert_eq!(report["run"]["api"], "images");
    assert_eq!(report["run"]["item_unit"], "images");
    let step = &report["steps"][0];
    assert_eq!(step["requests"]["completed"], 4, "{step}");
    let t = &step["throughput"];
    let ratio = t["items_per_sec"].as_f64().unwrap() / t["requests_per_sec"].as_f64().unwrap();
    assert!((ratio - 3.0).abs() < 1e-9, "{t}");
    // 3 images at 60 ms each: at least 180 ms per request; generous bound for a loaded host.
    let e2e = step["latency_ms"]["e2e"]["min"].as_f64().unwrap();
    assert!((180.0..5000.0).contains(&e2e), "e2e {e2e}");
    let per_image = step["latency_ms"]["e2e_per_item"]["min"].as_f64().unwrap();
    assert!(
        (e2e / 3.0 - per_image).abs() < 0.01,
        "{per_image} per image of {e2e}"
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 4);
    for body in seen.iter() {
        assert_eq!(body["n"], 3, "{body}");
        assert_eq!(body["model"], "sd");
        assert_eq!(body["response_format"], "b64_json");
        assert!(
            body["prompt"].as_str().is_some_and(|p| !p.is_empty()),
            "{body}"
        );
    }
}

#[test]
fn fewer_images_than_asked_are_protocol_failures() {
    let (url, _) = images_server(true);
    let (_, report) = run(&url, "--batch-size 2");
    let step = &report["steps"][0];
    assert_eq!(step["requests"]["completed"], 0, "{step}");
    assert!(
        report.to_string().contains("1 data entries for 2 inputs"),
        "{report}"
    );
}

/// The simulator's cost of one request of `n` images of `side`² pixels and `steps` steps, in
/// ms, from first principles: SDXL's 8.43 steps/s at 1024² (128² latent pixels) on an A100,
/// scaled by latent pixels (side/8)² and images.
fn sim_cost_ms(n: u32, side: u32, steps: u32) -> f64 {
    let latent = f64::from(side / 8).powi(2);
    1000.0 * f64::from(steps) * f64::from(n) * latent / (128.0 * 128.0 * 8.43)
}

/// `--api images` against the embedded simulator (`virtual_time`: "--virtual-time", or a
/// `goodput sim` URL as `--target`).
fn against_sim(target: &str) -> (std::process::Output, Value) {
    against_sim_with("run --json --warmup 0 --api images --concurrency 1", target)
}

/// `run` (the command and its load) with the image requests of [`against_sim`].
fn against_sim_with(run: &str, target: &str) -> (std::process::Output, Value) {
    let args = format!(
        "{run} --model sd --requests 4 \
         --batch-size 2 --slo e2e=60s {target} \
         --extra-body {{\"size\":\"256x256\",\"num_inference_steps\":40}}"
    );
    let output = goodput().args(args.split_whitespace()).output().unwrap();
    let report = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (output, report)
}

#[test]
fn the_simulator_serves_images_in_virtual_time_at_its_cost_model_exactly() {
    let (output, report) = against_sim("--virtual-time");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    validate_against_schema(&report);
    assert_eq!(report["run"]["item_unit"], "images");
    let step = &report["steps"][0];
    assert_eq!(step["requests"]["completed"], 4, "{step}");
    // One request at a time: each takes exactly 40 steps × 2 images × 32² latent pixels.
    let cost = sim_cost_ms(2, 256, 40);
    let e2e = &step["latency_ms"]["e2e"];
    for key in ["min", "max"] {
        let value = e2e[key].as_f64().unwrap();
        assert!((value - cost).abs() < 1e-3, "{key} {value} vs {cost}");
    }
    let per_image = step["latency_ms"]["e2e_per_item"]["max"].as_f64().unwrap();
    assert!((per_image - cost / 2.0).abs() < 1e-3, "{per_image}");
    let images_per_sec = step["throughput"]["items_per_sec"].as_f64().unwrap();
    let expected = 2.0 * 1000.0 / cost;
    assert!(
        (images_per_sec / expected - 1.0).abs() < 0.01,
        "{images_per_sec} images/s, {expected} expected"
    );
}

#[test]
fn the_simulators_image_pipeline_runs_one_batch_at_a_time() {
    // Two clients: the first request of the pair takes the cost, every other waits for the
    // batch ahead of it — E2E min one cost, max two; images/s as one at a time.
    let run = "run --json --warmup 0 --api images --concurrency 2";
    let (output, report) = against_sim_with(run, "--virtual-time");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let step = &report["steps"][0];
    assert_eq!(step["requests"]["completed"], 4, "{step}");
    let cost = sim_cost_ms(2, 256, 40);
    let e2e = &step["latency_ms"]["e2e"];
    let (min, max) = (e2e["min"].as_f64().unwrap(), e2e["max"].as_f64().unwrap());
    assert!((min - cost).abs() < 1e-3, "min {min} vs {cost}");
    assert!(
        (max - 2.0 * cost).abs() < 1e-3,
        "max {max} vs {}",
        2.0 * cost
    );
}

#[test]
fn goodput_sim_serves_images_live_at_its_cost_model() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("sim.toml");
    std::fs::write(&config, "").unwrap();
    let sim = support::sim_process::Sim::start(&config, &[]);
    let (output, report) = against_sim(&format!("--target {}", sim.url));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    validate_against_schema(&report);
    let step = &report["steps"][0];
    assert_eq!(step["requests"]["completed"], 4, "{step}");
    // The pipeline sleeps its cost; the client adds only its overhead (generous on a loaded
    // host).
    let cost = sim_cost_ms(2, 256, 40);
    let e2e = step["latency_ms"]["e2e"]["min"].as_f64().unwrap();
    assert!(
        (cost..cost + 2000.0).contains(&e2e),
        "e2e {e2e}, cost {cost}"
    );
    let images_per_sec = step["throughput"]["items_per_sec"].as_f64().unwrap();
    assert!(
        images_per_sec <= 2.0 * 1000.0 / cost * 1.001 && images_per_sec > 0.2,
        "{images_per_sec}"
    );
}

#[test]
fn the_simulator_refuses_an_image_batch_beyond_its_limit() {
    let (_, report) = against_sim_batch(11);
    let step = &report["steps"][0];
    assert_eq!(step["requests"]["completed"], 0, "{step}");
    assert!(
        report
            .to_string()
            .contains("`n` must be an integer from 1 to 10"),
        "{report}"
    );
}

fn against_sim_batch(n: u32) -> (std::process::Output, Value) {
    let args = format!(
        "run --json --warmup 0 --concurrency 1 --api images --requests 1 --batch-size {n} \
         --virtual-time"
    );
    let output = goodput().args(args.split_whitespace()).output().unwrap();
    let report = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (output, report)
}
