//! `POST /v1/images/generations` (OpenAI's shape): a JSON body with `prompt`, `n` (default 1,
//! at most [`MAX_IMAGES`]), `size` (`"WxH"`, default [`DEFAULT_SIZE`]; `"auto"` is the
//! default) and the denoising steps as `num_inference_steps` (diffusers' name) or `steps`
//! (default [`DEFAULT_STEPS`]); `response_format` `b64_json` (default) or `url`. The answer is
//! `{"created", "data": [{"b64_json"} | {"url"}], "usage"}` with one entry per image.
//!
//! Cost model (a diffusion pipeline, not the text engine): one request's `n` images are one
//! batch of the pipeline, which runs one batch at a time in arrival order (a FIFO lock); a
//! batch takes `steps` denoising steps of `n · (W/8)·(H/8) / (`[`REFERENCE_LATENT_PIXELS`]` ·
//! `[`STEPS_PER_SECOND`]`)` seconds each — a step's FLOPs scale with the latent pixels (the VAE
//! downsamples 8×) and the batch, and the UNet/DiT at these sizes is compute-bound, so a batch
//! gains nothing per image. [`STEPS_PER_SECOND`] is SDXL's published end-to-end rate at
//! 1024×1024 on an A100 (fal-ai/stable-diffusion-benchmarks, diffusers with SDPA: 8.43 it/s,
//! 5.93 s for 50 steps). Refusal faults (HTTP 500/429/400) apply.

use std::sync::Arc;
use std::time::Duration;

use hyper::{Response, StatusCode};
use rand::SeedableRng;
use rand::rngs::Xoshiro256PlusPlus;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::ServerState;
use super::body::SimBody;
use super::faults::Fault;
use super::routes::{error_response, injected_refusal, json_response};
use crate::text::derive_seed;

/// Denoising steps a second at [`REFERENCE_LATENT_PIXELS`] for one image: SDXL at 1024×1024 on
/// an A100 80 GB SXM, diffusers (torch 2.1, SDPA), end to end (fal-ai/stable-diffusion-benchmarks).
pub(crate) const STEPS_PER_SECOND: f64 = 8.43;
/// Latent pixels of the reference image: 1024×1024 through the VAE's 8× downsampling.
pub(crate) const REFERENCE_LATENT_PIXELS: f64 = 128.0 * 128.0;
/// Steps when the request names none (diffusers' default `num_inference_steps`).
pub(crate) const DEFAULT_STEPS: u32 = 50;
/// Most steps a request may ask.
pub(crate) const MAX_STEPS: u32 = 1000;
/// Size when the request names none (or `"auto"`).
pub(crate) const DEFAULT_SIZE: (u32, u32) = (1024, 1024);
/// Most images one request (one batch of the pipeline) may ask: OpenAI's limit on `n`.
pub(crate) const MAX_IMAGES: u32 = 10;
/// Smallest and largest side accepted, in pixels (multiples of 8: the latent grid).
const SIDES: std::ops::RangeInclusive<u32> = 64..=4096;
/// Purpose tag of the per-request generator (faults).
const IMAGES_RNG: u64 = 0x1a6e_5e7e;
/// A 1×1 transparent PNG, every image's `b64_json`.
const PNG_1X1: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

/// What an image request asks for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ImageAsk {
    /// Images (`n`).
    pub(crate) images: u32,
    /// Width and height in pixels.
    pub(crate) size: (u32, u32),
    /// Denoising steps.
    pub(crate) steps: u32,
    /// `response_format: url` rather than `b64_json`.
    pub(crate) url: bool,
    /// Words of the prompt (its input tokens in `usage`).
    pub(crate) prompt_words: usize,
}

impl ImageAsk {
    /// The simulated time the pipeline takes for this request's batch.
    pub(crate) fn cost(&self) -> Duration {
        let latent = f64::from(self.size.0 / 8) * f64::from(self.size.1 / 8);
        let per_step =
            f64::from(self.images) * latent / (REFERENCE_LATENT_PIXELS * STEPS_PER_SECOND);
        Duration::from_secs_f64(per_step * f64::from(self.steps))
    }
}

/// The body's ask, or the message of a 400 and the parameter it names.
pub(crate) fn ask(body: &[u8]) -> Result<ImageAsk, (String, &'static str)> {
    let value: Value =
        serde_json::from_slice(body).map_err(|e| (format!("invalid JSON body: {e}"), "body"))?;
    let prompt = value.get("prompt").and_then(Value::as_str).unwrap_or("");
    if prompt.trim().is_empty() {
        return Err(("`prompt` must be a non-empty string".into(), "prompt"));
    }
    let images = match value.get("n") {
        None | Some(Value::Null) => 1,
        Some(n) => n
            .as_u64()
            .filter(|n| (1..=u64::from(MAX_IMAGES)).contains(n))
            .ok_or((
                format!("`n` must be an integer from 1 to {MAX_IMAGES}"),
                "n",
            ))? as u32,
    };
    let steps = match value
        .get("num_inference_steps")
        .or_else(|| value.get("steps"))
    {
        None | Some(Value::Null) => DEFAULT_STEPS,
        Some(steps) => steps
            .as_u64()
            .filter(|s| (1..=u64::from(MAX_STEPS)).contains(s))
            .ok_or((
                format!("`num_inference_steps` must be an integer from 1 to {MAX_STEPS}"),
                "num_inference_steps",
            ))? as u32,
    };
    let size = match value.get("size").and_then(Value::as_str) {
        None | Some("auto") => DEFAULT_SIZE,
        Some(text) => parse_size(text).ok_or((
            format!(
                "`size` {text:?}: expected WIDTHxHEIGHT, each a multiple of 8 from {} to {}",
                SIDES.start(),
                SIDES.end()
            ),
            "size",
        ))?,
    };
    let url = match value.get("response_format").and_then(Value::as_str) {
        None | Some("b64_json") => false,
        Some("url") => true,
        Some(other) => {
            return Err((
                format!("response_format {other:?}: use b64_json or url"),
                "response_format",
            ));
        }
    };
    Ok(ImageAsk {
        images,
        size,
        steps,
        url,
        prompt_words: prompt.split_whitespace().count(),
    })
}

fn parse_size(text: &str) -> Option<(u32, u32)> {
    let (w, h) = text.split_once(['x', 'X'])?;
    let side = |s: &str| {
        s.trim()
            .parse::<u32>()
            .ok()
            .filter(|v| SIDES.contains(v) && v % 8 == 0)
    };
    Some((side(w)?, side(h)?))
}

/// Answers an image generation request: the batch waits its turn on the pipeline, runs for
/// its cost (on a task of its own, so a client that leaves does not free the pipeline early),
/// then the images are sent.
pub(crate) async fn answer(state: Arc<ServerState>, body: &[u8]) -> Response<SimBody> {
    let ask = match ask(body) {
        Ok(ask) => ask,
        Err((message, param)) => {
            state.driver.record_rejection("invalid_request");
            return error_response(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                &message,
                Some(param),
            );
        }
    };
    let number = state.next_request_number();
    let mut rng =
        Xoshiro256PlusPlus::seed_from_u64(derive_seed(state.config.seed, number, IMAGES_RNG));
    if let Some(refusal) = Fault::draw(&state.config.faults, &mut rng)
        .and_then(|fault| injected_refusal(&state, fault))
    {
        return refusal;
    }
    let (done, finished) = oneshot::channel();
    let pipeline = Arc::clone(&state);
    let cost = state.driver.clock().to_real(ask.cost());
    tokio::spawn(async move {
        let _turn = pipeline.image_pipeline.lock().await;
        tokio::time::sleep(cost).await;
        let _ = done.send(());
    });
    if finished.await.is_err() {
        let message = "the image pipeline stopped";
        return error_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            "server_error",
            message,
            None,
        );
    }
    let data: Vec<Value> = (0..ask.images)
        .map(|index| match ask.url {
            true => {
                json!({"url": format!("https://goodput-sim.invalid/images/{number}-{index}.png")})
            }
            false => json!({"b64_json": PNG_1X1}),
        })
        .collect();
    let tokens = ask.prompt_words;
    let body = json!({
        "created": super::unix_now(),
        "data": data,
        "usage": {"input_tokens": tokens, "output_tokens": 0, "total_tokens": tokens},
    });
    json_response(
        StatusCode::OK,
        serde_json::to_vec(&body).unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn asks_and_costs() {
        let a =
            ask(br#"{"prompt":"a cat","n":2,"size":"512x768","num_inference_steps":20}"#).unwrap();
        assert_eq!(
            (a.images, a.size, a.steps, a.url),
            (2, (512, 768), 20, false)
        );
        // 2 images × 64·96 latent pixels × 20 steps at 8.43 steps/s per 128·128.
        let expected = 2.0 * 64.0 * 96.0 * 20.0 / (16_384.0 * 8.43);
        assert!((a.cost().as_secs_f64() - expected).abs() < 1e-9);
        let d = ask(br#"{"prompt":"x","response_format":"url","steps":3}"#).unwrap();
        assert_eq!(
            (d.images, d.size, d.steps, d.url),
            (1, (1024, 1024), 3, true)
        );
        // SDXL's reference: 50 steps at 1024² take 50 / 8.43 s.
        let reference = ask(br#"{"prompt":"x"}"#).unwrap();
        assert!((reference.cost().as_secs_f64() - 50.0 / 8.43).abs() < 1e-9);
        for bad in [
            r#"{"prompt":""}"#,
            r#"{"prompt":"x","n":11}"#,
            r#"{"prompt":"x","n":0}"#,
            r#"{"prompt":"x","size":"100x100"}"#,
            r#"{"prompt":"x","size":"big"}"#,
            r#"{"prompt":"x","steps":0}"#,
            r#"{"prompt":"x","response_format":"png"}"#,
            "not json",
        ] {
            assert!(ask(bad.as_bytes()).is_err(), "{bad}");
        }
    }
}
