//! An image's size, `WxH`: parsed from flags, journaled with each request that carried images,
//! and the resolution bucket the report splits requests by.

use std::fmt;

/// An image size, `WxH`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Resolution {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
}

impl fmt::Display for Resolution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.width, self.height)
    }
}

impl Resolution {
    /// Pixels (`width × height`).
    pub fn pixels(self) -> u64 {
        u64::from(self.width) * u64::from(self.height)
    }

    /// The order of sizes in reports: the fewest pixels first, the narrower of two as large.
    pub fn rank(self) -> (u64, u32) {
        (self.pixels(), self.width)
    }

    /// Reads `WxH` as journaled: any size a file had (files may exceed [`MAX_SIDE`], which
    /// bounds generated images).
    pub fn read(text: &str) -> Option<Resolution> {
        let (w, h) = text.split_once('x')?;
        Some(Resolution {
            width: w.parse().ok()?,
            height: h.parse().ok()?,
        })
    }

    /// The resolution bucket of a request that carried images of `sizes`: its distinct sizes
    /// from the fewest pixels to the most, joined by `+` (`224x224`, `64x32+224x224`); `None`
    /// without images.
    pub fn bucket(sizes: &[Resolution]) -> Option<String> {
        let mut distinct = sizes.to_vec();
        distinct.sort_by_key(|size| size.rank());
        distinct.dedup();
        let names: Vec<String> = distinct.iter().map(Resolution::to_string).collect();
        (!names.is_empty()).then(|| names.join("+"))
    }
}

impl serde::Serialize for Resolution {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Resolution {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Resolution::read(&text).ok_or_else(|| serde::de::Error::custom(ResolutionError(text)))
    }
}

/// Largest side accepted for a generated image.
pub const MAX_SIDE: u32 = 8192;

/// A resolution that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid image resolution `{0}`: expected WxH with sides 1..={MAX_SIDE}, e.g. 224x224")]
pub struct ResolutionError(pub String);

impl Resolution {
    /// Parses `224x224`.
    pub fn parse(text: &str) -> Result<Resolution, ResolutionError> {
        let error = || ResolutionError(text.to_string());
        let (w, h) = text.trim().split_once(['x', 'X']).ok_or_else(error)?;
        let side = |s: &str| {
            s.trim()
                .parse::<u32>()
                .ok()
                .filter(|n| (1..=MAX_SIDE).contains(n))
        };
        Ok(Resolution {
            width: side(w).ok_or_else(error)?,
            height: side(h).ok_or_else(error)?,
        })
    }
}
