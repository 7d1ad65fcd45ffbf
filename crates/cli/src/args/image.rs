//! Vision-language chat prompts: `--image-resolution` (generated PNGs) or `--image-dir` (PNG
//! and JPEG files), `--images-per-request`; refused with any API but chat.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use goodput_core::workload::image::{Image, Resolution};
use goodput_core::workload::mix_seed;

use crate::options::run::Images;

/// Images beside each chat prompt.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct ImageArgs {
    /// --api chat: generated PNG images of these sizes beside each prompt, taken in turn, as
    /// `image_url` content parts, e.g. `224x224,512x512`.
    #[arg(
        long,
        value_name = "WxH,…",
        help_heading = "Workload",
        conflicts_with = "image_dir"
    )]
    pub(crate) image_resolution: Option<String>,
    /// --api chat: the PNG and JPEG files of DIR (in name order) beside the prompts, in turn.
    #[arg(long, value_name = "DIR", help_heading = "Workload")]
    pub(crate) image_dir: Option<PathBuf>,
    /// Images sent with each prompt (with --image-resolution or --image-dir) [default: 1].
    #[arg(long, value_name = "N", help_heading = "Workload")]
    pub(crate) images_per_request: Option<u32>,
}

impl ImageArgs {
    /// The images and how many go with each request; `None` without images. `chat`: whether
    /// the API takes chat messages; `seed` draws the generated ones.
    pub(crate) fn images(&self, chat: bool, seed: u64) -> Result<Option<Images>> {
        let given = self.image_resolution.is_some() || self.image_dir.is_some();
        if !given {
            if self.images_per_request.is_some() {
                bail!("--images-per-request needs --image-resolution or --image-dir");
            }
            return Ok(None);
        }
        if !chat {
            bail!(
                "--image-resolution and --image-dir send images in chat messages: use --api chat"
            );
        }
        let per_request = self.images_per_request.unwrap_or(1);
        if per_request == 0 {
            bail!("--images-per-request must be at least 1");
        }
        let images = match (&self.image_resolution, &self.image_dir) {
            (Some(list), _) => list
                .split(',')
                .enumerate()
                .map(|(i, text)| {
                    let size = Resolution::parse(text).context("--image-resolution")?;
                    Ok(Image::generated(size, mix_seed(seed, i as u64)))
                })
                .collect::<Result<Vec<_>>>()?,
            (None, Some(dir)) => read_dir(dir)?,
            (None, None) => Vec::new(),
        };
        Ok(Some(Images {
            images,
            per_request,
        }))
    }
}

/// The PNG and JPEG files of `dir`, in name order.
fn read_dir(dir: &PathBuf) -> Result<Vec<Image>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("--image-dir: cannot read {}", dir.display()))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.is_file())
        .collect();
    paths.sort();
    let mut images = Vec::new();
    for path in paths {
        let bytes = std::fs::read(&path)
            .with_context(|| format!("--image-dir: cannot read {}", path.display()))?;
        if let Some(image) = Image::from_file(bytes) {
            images.push(image);
        }
    }
    if images.is_empty() {
        bail!("--image-dir {}: no PNG or JPEG file", dir.display());
    }
    Ok(images)
}
