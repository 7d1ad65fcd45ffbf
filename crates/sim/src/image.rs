//! Images in chat prompts: each `image_url` part with a `data:` URL of a PNG or JPEG is charged
//! as prefill tokens by its patch count, as Qwen2-VL does: `ceil(w/14)·ceil(h/14)` patches of
//! 14×14 pixels, merged 2×2 into one token each (rounded up), capped at [`MAX_IMAGE_TOKENS`].
//! An image whose size cannot be read (a remote URL, another format) costs [`UNKNOWN_IMAGE_TOKENS`].

use goodput_protocol::MessageContent;
use goodput_protocol::image::header_size;

/// Patch side in pixels.
const PATCH: u64 = 14;
/// The most tokens one image costs (Qwen2-VL's default `max_pixels` / 28²).
pub const MAX_IMAGE_TOKENS: u64 = 16_384;
/// The cost of an image whose size is unknown: a 448×448 image.
pub const UNKNOWN_IMAGE_TOKENS: u64 = 256;

/// Prefill tokens of a `width`×`height` image.
pub fn image_tokens(width: u32, height: u32) -> u64 {
    let patches = u64::from(width).div_ceil(PATCH) * u64::from(height).div_ceil(PATCH);
    patches.div_ceil(4).clamp(1, MAX_IMAGE_TOKENS)
}

/// The token cost of every image part of `content`, in order.
pub fn content_image_tokens(content: &MessageContent) -> Vec<u64> {
    let MessageContent::Parts(parts) = content else {
        return Vec::new();
    };
    parts
        .iter()
        .filter(|part| part.kind == "image_url")
        .map(|part| {
            let size = part
                .image_url
                .as_ref()
                .and_then(|image| data_url_size(&image.url));
            size.map_or(UNKNOWN_IMAGE_TOKENS, |(w, h)| image_tokens(w, h))
        })
        .collect()
}

/// The width and height of the PNG or JPEG in a `data:…;base64,` URL.
pub fn data_url_size(url: &str) -> Option<(u32, u32)> {
    let (_, encoded) = url.strip_prefix("data:")?.split_once(";base64,")?;
    let bytes = decode_base64(encoded)?;
    header_size(&bytes).map(|(width, height, _)| (width, height))
}

fn decode_base64(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' | b'-' => Some(62),
        b'/' | b'_' => Some(63),
        _ => None,
    };
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    for group in text.trim_end_matches('=').as_bytes().chunks(4) {
        let data = group
            .iter()
            .map(|&c| value(c))
            .collect::<Option<Vec<u8>>>()?;
        let n = data
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &v)| n | (u32::from(v) << (18 - 6 * i)));
        for i in 0..data.len().saturating_sub(1) {
            out.push((n >> (16 - 8 * i)) as u8);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qwen2_vl_patch_rule() {
        // 224×224: 16×16 patches, 64 tokens; 512×512: 37×37 = 1369 patches, 343 tokens.
        assert_eq!(image_tokens(224, 224), 64);
        assert_eq!(image_tokens(512, 512), 343);
        assert_eq!(image_tokens(1, 1), 1);
        assert_eq!(image_tokens(8192, 8192), MAX_IMAGE_TOKENS);
    }

    #[test]
    fn a_chat_prompt_is_charged_its_image_tokens() {
        use crate::text::Tokenizer;
        use goodput_protocol::ChatMessage;
        use goodput_protocol::chat::{ContentPart, ImageUrl};
        let tokenizer = Tokenizer::new(crate::config::PromptTokenizer::Words);
        let plain = [ChatMessage::new("user", "what is this")];
        let mut with_image = plain.clone();
        let part = |kind: &str, text: Option<&str>, url: Option<&str>| ContentPart {
            kind: kind.into(),
            text: text.map(Into::into),
            image_url: url.map(|url| ImageUrl { url: url.into() }),
        };
        with_image[0].content = MessageContent::Parts(vec![
            part("text", Some("what is this"), None),
            part(
                "image_url",
                None,
                Some("data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAoAAAAHg"),
            ),
            part("image_url", None, Some("https://example.com/cat.jpg")),
        ]);
        let extra = tokenizer.encode_chat(&with_image).len() - tokenizer.encode_chat(&plain).len();
        // 640×480: 46×35 = 1610 patches, 403 tokens; the remote image the unknown cost.
        assert_eq!(extra as u64, 403 + UNKNOWN_IMAGE_TOKENS);
    }

    #[test]
    fn png_size_from_a_data_url() {
        // The 24-byte head of a 640×480 PNG, base64 (independently encoded).
        let url = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAoAAAAHg";
        assert_eq!(data_url_size(url), Some((640, 480)));
        assert_eq!(data_url_size("https://x/y.png"), None);
    }
}
