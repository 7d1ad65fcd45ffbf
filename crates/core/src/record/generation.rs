//! What one image-generation request asked for (`--image-size`, `--image-steps`): journaled
//! with its record, the key the report splits such requests by.

use serde::{Deserialize, Serialize};

use super::Resolution;

/// The size and denoising steps an image-generation request asked for (each `None` when the
/// run left it to the server).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Generation {
    /// The images' size (`size`, `"WxH"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Resolution>,
    /// Denoising steps per image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<u32>,
}

impl Generation {
    /// The order of the report's rows: the fewest pixels first (no size last), then the
    /// fewest steps (no steps last).
    pub fn order(&self) -> (u64, u32, u32) {
        let (pixels, width) = self.size.map_or((u64::MAX, u32::MAX), Resolution::rank);
        (pixels, width, self.steps.unwrap_or(u32::MAX))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn journals_as_size_and_steps_and_orders_by_pixels_then_steps() {
        let size = Resolution::read("512x256");
        let setting = Generation {
            size,
            steps: Some(20),
        };
        let text = serde_json::to_string(&setting).unwrap();
        assert_eq!(text, r#"{"size":"512x256","steps":20}"#);
        assert_eq!(serde_json::from_str::<Generation>(&text).unwrap(), setting);
        let bare = Generation {
            size: None,
            steps: Some(4),
        };
        assert_eq!(serde_json::to_string(&bare).unwrap(), r#"{"steps":4}"#);
        let small = Generation {
            size: Resolution::read("256x256"),
            steps: Some(50),
        };
        let fewer = Generation {
            size,
            steps: Some(10),
        };
        let mut rows = [bare, setting, small, fewer];
        rows.sort_by_key(Generation::order);
        assert_eq!(rows, [small, fewer, setting, bare]);
    }
}
