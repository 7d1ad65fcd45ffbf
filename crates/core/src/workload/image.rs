//! Images for vision-language chat prompts: PNGs generated at a resolution (a minimal encoder:
//! stored deflate blocks, CRC-32 and Adler-32 written here, no image crate), the width and
//! height read from a PNG or JPEG file's header, and the `data:` URL an OpenAI `image_url`
//! content part carries.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use goodput_protocol::chat::{ChatMessage, ContentPart, ImageUrl, MessageContent};

use super::Workload;
use crate::backend::{RequestInput, RequestSpec};
pub use crate::record::resolution::{MAX_SIDE, Resolution, ResolutionError};

/// A deterministic RGB PNG of `size`: a gradient varied by `seed`, so two seeds give two
/// different images of the same size.
pub fn png(size: Resolution, seed: u64) -> Vec<u8> {
    let (w, h) = (size.width as usize, size.height as usize);
    let mut raw = Vec::with_capacity(h * (1 + 3 * w));
    let shift = seed.to_le_bytes();
    for y in 0..h {
        raw.push(0); // filter: none
        for x in 0..w {
            raw.push((x as u8).wrapping_add(shift[0]));
            raw.push((y as u8).wrapping_add(shift[1]));
            raw.push(((x ^ y) as u8).wrapping_add(shift[2]));
        }
    }
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut header = Vec::with_capacity(13);
    header.extend_from_slice(&size.width.to_be_bytes());
    header.extend_from_slice(&size.height.to_be_bytes());
    header.extend_from_slice(&[8, 2, 0, 0, 0]); // 8-bit RGB, deflate, no interlace
    chunk(&mut out, b"IHDR", &header);
    chunk(&mut out, b"IDAT", &zlib_stored(&raw));
    chunk(&mut out, b"IEND", &[]);
    out
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let start = out.len();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let crc = crc32(&out[start..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

/// A zlib stream of stored (uncompressed) deflate blocks.
fn zlib_stored(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x78, 0x01];
    let blocks: Vec<&[u8]> = if data.is_empty() {
        vec![&[]]
    } else {
        data.chunks(0xFFFF).collect()
    };
    let last = blocks.len() - 1;
    for (i, block) in blocks.iter().enumerate() {
        out.push(u8::from(i == last));
        let len = block.len() as u16;
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(block);
    }
    out.extend_from_slice(&adler32(data).to_be_bytes());
    out
}

/// CRC-32 (ISO-HDLC, as PNG uses).
pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Adler-32 (zlib's checksum).
pub fn adler32(data: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in data.chunks(5552) {
        for &byte in chunk {
            a += u32::from(byte);
            b += a;
        }
        a %= 65_521;
        b %= 65_521;
    }
    (b << 16) | a
}

/// The size and MIME type of a PNG or JPEG file from its header; `None` for anything else.
pub fn dimensions(bytes: &[u8]) -> Option<(Resolution, &'static str)> {
    goodput_protocol::image::header_size(bytes)
        .map(|(width, height, mime)| (Resolution { width, height }, mime))
}

/// `data:{mime};base64,…` of `bytes`.
pub fn data_url(bytes: &[u8], mime: &str) -> String {
    let mut out = format!("data:{mime};base64,");
    crate::units::base64_into(&mut out, bytes, crate::units::BASE64_STANDARD);
    out
}

/// One image to send.
#[derive(Clone)]
pub struct Image {
    /// Its size.
    pub size: Resolution,
    /// `image/png` or `image/jpeg`.
    pub mime: &'static str,
    /// The file's bytes.
    pub bytes: Arc<[u8]>,
}

impl fmt::Debug for Image {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Image({} {}, {} bytes)",
            self.size,
            self.mime,
            self.bytes.len()
        )
    }
}

impl Image {
    /// A generated PNG of `size` (`seed` varies its pixels).
    pub fn generated(size: Resolution, seed: u64) -> Image {
        Image {
            size,
            mime: "image/png",
            bytes: png(size, seed).into(),
        }
    }

    /// A PNG or JPEG file's bytes; `None` when its header is neither.
    pub fn from_file(bytes: Vec<u8>) -> Option<Image> {
        let (size, mime) = dimensions(&bytes)?;
        Some(Image {
            size,
            mime,
            bytes: bytes.into(),
        })
    }
}

/// A user message's content: `text`, then one `image_url` part per image.
pub fn content_with_images(text: &str, images: &[&Image]) -> MessageContent {
    let mut parts = vec![ContentPart {
        kind: "text".into(),
        text: Some(text.to_string()),
        image_url: None,
    }];
    parts.extend(images.iter().map(|image| ContentPart {
        kind: "image_url".into(),
        text: None,
        image_url: Some(ImageUrl {
            url: data_url(&image.bytes, image.mime),
        }),
    }));
    MessageContent::Parts(parts)
}

/// A chat workload whose every request also carries `per_request` images, taken in turn from
/// `images` (request `i` the images `i·n … i·n + n − 1`, wrapping), as `image_url` parts of
/// its last user message. In multi-turn sessions every user turn carries its own request's
/// images (and, as a chat client re-sends the history, the earlier turns' images too).
#[derive(Debug)]
pub struct WithImages {
    inner: Arc<dyn Workload>,
    images: Vec<Image>,
    per_request: u32,
}

impl WithImages {
    /// `inner`'s requests with images; `None` without images or with zero per request.
    pub fn new(inner: Arc<dyn Workload>, images: Vec<Image>, per_request: u32) -> Option<Self> {
        (!images.is_empty() && per_request > 0).then_some(WithImages {
            inner,
            images,
            per_request,
        })
    }

    fn chosen(&self, index: u64) -> Vec<&Image> {
        let n = u64::from(self.per_request);
        let len = self.images.len() as u64;
        (0..n)
            .map(|k| &self.images[((index.wrapping_mul(n) + k) % len) as usize])
            .collect()
    }
}

impl Workload for WithImages {
    fn inner(&self) -> Option<&dyn Workload> {
        Some(self.inner.as_ref())
    }

    fn request(&self, index: u64) -> RequestSpec {
        let mut spec = self.inner.request(index);
        let images = self.chosen(index);
        spec.input = match spec.input {
            RequestInput::Text(text) => {
                let mut message = ChatMessage::new("user", "");
                message.content = content_with_images(&text, &images);
                RequestInput::Messages(vec![message])
            }
            RequestInput::Messages(mut messages) => {
                if let Some(last) = messages.iter_mut().rev().find(|m| m.role == "user") {
                    last.content = content_with_images(&last.content.text(), &images);
                }
                RequestInput::Messages(messages)
            }
            other => other,
        };
        spec
    }

    fn describe(&self) -> BTreeMap<String, serde_json::Value> {
        let mut described = self.inner.describe();
        let mut sizes: Vec<String> = self.images.iter().map(|i| i.size.to_string()).collect();
        sizes.dedup();
        described.insert("image_resolutions".into(), sizes.join(",").into());
        described.insert("images".into(), self.images.len().into());
        described.insert("images_per_request".into(), self.per_request.into());
        described
    }

    fn images(&self, index: u64) -> Vec<Image> {
        self.chosen(index).into_iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn checksums_match_their_reference_values() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(adler32(b"Wikipedia"), 0x11E6_0398);
        assert_eq!(data_url(b"Man", "x"), "data:x;base64,TWFu");
        assert_eq!(data_url(b"Ma", "x"), "data:x;base64,TWE=");
        assert_eq!(data_url(b"M", "x"), "data:x;base64,TQ==");
    }

    #[test]
    fn generated_pngs_read_back_their_size_and_are_well_formed() {
        for text in ["224x224", "512x300", "1x1"] {
            let size = Resolution::parse(text).unwrap();
            assert_eq!(size.to_string(), text);
            let png = png(size, 7);
            assert_eq!(dimensions(&png), Some((size, "image/png")));
            // Every chunk's CRC holds; the IDAT is a zlib stream of the raw rows.
            let mut at = 8;
            let mut idat = Vec::new();
            while at < png.len() {
                let len = u32::from_be_bytes(png[at..at + 4].try_into().unwrap()) as usize;
                let body = &png[at + 4..at + 8 + len];
                let crc = u32::from_be_bytes(png[at + 8 + len..at + 12 + len].try_into().unwrap());
                assert_eq!(crc32(body), crc);
                if &body[..4] == b"IDAT" {
                    idat.extend_from_slice(&body[4..]);
                }
                at += 12 + len;
            }
            let rows = size.height as usize * (1 + 3 * size.width as usize);
            let blocks = rows.div_ceil(0xFFFF);
            assert_eq!(idat.len(), 2 + rows + 5 * blocks + 4);
        }
        assert_ne!(
            png(Resolution::parse("8x8").unwrap(), 1),
            png(Resolution::parse("8x8").unwrap(), 2)
        );
        for bad in ["224", "0x5", "ax5", "9000x1"] {
            assert!(Resolution::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn content_parts_are_openai_image_url_parts() {
        let image = Image::generated(Resolution::parse("2x2").unwrap(), 0);
        let png = image.bytes.to_vec();
        let content = content_with_images("what is this?", &[&image]);
        let json = serde_json::to_value(&content).unwrap();
        assert_eq!(
            json[0],
            serde_json::json!({"type": "text", "text": "what is this?"})
        );
        assert_eq!(json[1]["type"], "image_url");
        assert_eq!(json[1]["image_url"]["url"], data_url(&png, "image/png"));
        assert_eq!(content.text(), "what is this?");
    }

    #[test]
    fn buckets_are_the_distinct_sizes_by_pixels_and_sizes_journal_as_text() {
        let size = |text: &str| Resolution::parse(text).unwrap();
        let (small, big) = (size("64x32"), size("224x224"));
        assert_eq!(Resolution::bucket(&[]), None);
        assert_eq!(Resolution::bucket(&[big, big]).unwrap(), "224x224");
        assert_eq!(
            Resolution::bucket(&[big, small, big]).unwrap(),
            "64x32+224x224"
        );
        let json = serde_json::to_string(&[small, size("8192x1")]).unwrap();
        assert_eq!(json, r#"["64x32","8192x1"]"#);
        // A file's size may exceed what a generated image may have; it still reads back.
        let read: Vec<Resolution> = serde_json::from_str(r#"["64x32","12000x9000"]"#).unwrap();
        assert_eq!(read[1].pixels(), 108_000_000);
        assert!(serde_json::from_str::<Resolution>(r#""64""#).is_err());
    }

    #[test]
    fn jpeg_header_size() {
        // SOI, APP0 (len 4), SOF0: len 17, precision 8, height 480, width 640.
        let mut jpeg = vec![0xFF, 0xD8, 0xFF, 0xE0, 0, 4, 0, 0, 0xFF, 0xC0, 0, 17, 8];
        jpeg.extend_from_slice(&[0x01, 0xE0, 0x02, 0x80]);
        let size = Resolution {
            width: 640,
            height: 480,
        };
        assert_eq!(dimensions(&jpeg), Some((size, "image/jpeg")));
        assert_eq!(dimensions(b"GIF89a"), None);
        assert_eq!(dimensions(&[0xFF, 0xD8, 0xFF]), None);
    }
}
