//! Image generation by size and steps: `--image-size`, `--image-steps` (every combination in
//! turn within one run) and `--image-steps-key`; refused with any API but images, and beside an
//! `--extra-body` that sets the same key.

use anyhow::{Context, Result, bail};
use goodput_core::backend::openai::IMAGE_STEPS_KEY;
use goodput_core::record::Resolution;
use goodput_core::workload::generation::GenerationGrid;
use serde_json::{Map, Value};

/// The most denoising steps a request may ask for.
const MAX_STEPS: u32 = 10_000;

/// What each image-generation request asks for.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct GenerationArgs {
    /// --api images: the sizes to generate (`size`), request by request in turn with every
    /// --image-steps count; the report splits by size and steps, e.g. `512x512,1024x1024`.
    #[arg(long, value_name = "WxH,…", help_heading = "Workload")]
    pub(crate) image_size: Option<String>,
    /// --api images: the denoising steps to ask for, in turn with every --image-size,
    /// e.g. `20,50`.
    #[arg(long, value_name = "N,…", help_heading = "Workload")]
    pub(crate) image_steps: Option<String>,
    /// --api images: the body key that carries --image-steps [default: num_inference_steps].
    #[arg(long, value_name = "KEY", help_heading = "Workload")]
    pub(crate) image_steps_key: Option<String>,
}

impl GenerationArgs {
    /// The grid and the steps' key, checked: `images` whether the API is images, `extra_body`
    /// the parsed `--extra-body` (which may not set a key the grid sets).
    pub(crate) fn grid(
        &self,
        images: bool,
        extra_body: &Map<String, Value>,
    ) -> Result<(GenerationGrid, String)> {
        let given = self.image_size.is_some() || self.image_steps.is_some();
        if !images && (given || self.image_steps_key.is_some()) {
            bail!("--image-size, --image-steps and --image-steps-key go with --api images");
        }
        if self.image_steps_key.is_some() && self.image_steps.is_none() {
            bail!("--image-steps-key names the key of --image-steps: give --image-steps too");
        }
        let key = self
            .image_steps_key
            .clone()
            .unwrap_or_else(|| IMAGE_STEPS_KEY.to_string());
        if key.trim().is_empty() {
            bail!("--image-steps-key must name a body key");
        }
        let grid = GenerationGrid {
            sizes: list(self.image_size.as_deref(), "--image-size", parse_size)?,
            steps: list(self.image_steps.as_deref(), "--image-steps", parse_steps)?,
        };
        for (set, body_key, flag) in [
            (!grid.sizes.is_empty(), "size", "--image-size"),
            (!grid.steps.is_empty(), key.as_str(), "--image-steps"),
        ] {
            if set && extra_body.contains_key(body_key) {
                bail!("--extra-body sets {body_key:?}, which {flag} sets per request: give one");
            }
        }
        Ok((grid, key))
    }
}

/// The comma-separated values of `flag` (none when not given), each parsed by `parse`.
fn list<T>(text: Option<&str>, flag: &str, parse: fn(&str) -> Result<T>) -> Result<Vec<T>> {
    let Some(text) = text else {
        return Ok(Vec::new());
    };
    text.split(',')
        .map(|value| parse(value.trim()).with_context(|| format!("{flag} {text:?}")))
        .collect()
}

fn parse_size(text: &str) -> Result<Resolution> {
    Resolution::parse(text).map_err(anyhow::Error::from)
}

fn parse_steps(text: &str) -> Result<u32> {
    match text.parse::<u32>() {
        Ok(steps) if (1..=MAX_STEPS).contains(&steps) => Ok(steps),
        _ => bail!("{text:?} is not a step count from 1 to {MAX_STEPS}"),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn args(size: Option<&str>, steps: Option<&str>, key: Option<&str>) -> GenerationArgs {
        GenerationArgs {
            image_size: size.map(String::from),
            image_steps: steps.map(String::from),
            image_steps_key: key.map(String::from),
        }
    }

    #[test]
    fn sizes_and_steps_parse_and_wrong_input_names_the_flag() {
        let body = Map::new();
        let (grid, key) = args(Some("256x256, 512x768"), Some("10,20"), None)
            .grid(true, &body)
            .unwrap();
        assert_eq!(grid.sizes.len(), 2);
        assert_eq!(grid.steps, [10, 20]);
        assert_eq!(key, "num_inference_steps");
        let (_, key) = args(None, Some("4"), Some("step"))
            .grid(true, &body)
            .unwrap();
        assert_eq!(key, "step");
        let error = |a: GenerationArgs, images: bool, body: &Map<String, Value>| {
            format!("{:#}", a.grid(images, body).unwrap_err())
        };
        assert!(error(args(Some("512"), None, None), true, &body).contains("--image-size"));
        assert!(error(args(None, Some("0"), None), true, &body).contains("--image-steps"));
        assert!(error(args(None, Some("x"), None), true, &body).contains("--image-steps"));
        assert!(error(args(Some("64x64"), None, None), false, &body).contains("--api images"));
        assert!(error(args(None, None, Some("step")), true, &body).contains("--image-steps too"));
        let set: Map<String, Value> = serde_json::from_str(r#"{"size":"64x64"}"#).unwrap();
        assert!(error(args(Some("64x64"), None, None), true, &set).contains("\"size\""));
        assert!(args(None, Some("4"), None).grid(true, &set).is_ok());
        let (grid, _) = args(None, None, None).grid(false, &body).unwrap();
        assert!(grid.is_empty());
    }
}
