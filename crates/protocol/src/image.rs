//! Image headers: the size and MIME type of a PNG or JPEG from its first bytes. The client reads
//! them for `--image-dir` files and the resolution buckets, the simulator for the images in the
//! prompts it charges — one reader, so both see the same size.

/// Width, height and MIME type of a PNG (its `IHDR`) or a JPEG (its start-of-frame) from the
/// file's bytes; `None` for anything else or a header cut short.
pub fn header_size(bytes: &[u8]) -> Option<(u32, u32, &'static str)> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.get(12..16) == Some(b"IHDR") {
        let be = |at: usize| Some(u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?));
        return Some((be(16)?, be(20)?, "image/png"));
    }
    if bytes.starts_with(&[0xFF, 0xD8]) {
        return jpeg_size(bytes).map(|(width, height)| (width, height, "image/jpeg"));
    }
    None
}

/// Walks a JPEG's markers to its start-of-frame (SOF0…SOF15 but DHT, JPG and DAC).
fn jpeg_size(bytes: &[u8]) -> Option<(u32, u32)> {
    let be = |i: usize| Some(u16::from_be_bytes([*bytes.get(i)?, *bytes.get(i + 1)?]));
    let mut at = 2;
    loop {
        while *bytes.get(at)? != 0xFF {
            at += 1;
        }
        while *bytes.get(at)? == 0xFF {
            at += 1;
        }
        let marker = *bytes.get(at)?;
        at += 1;
        if matches!(marker, 0xD0..=0xD9 | 0x01) {
            continue;
        }
        if (0xC0..=0xCF).contains(&marker) && !matches!(marker, 0xC4 | 0xC8 | 0xCC) {
            return Some((u32::from(be(at + 5)?), u32::from(be(at + 3)?)));
        }
        at += usize::from(be(at)?);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn png_and_jpeg_heads() {
        // Signature, IHDR length and type, width 640, height 480.
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        png.extend_from_slice(&[0, 0, 2, 0x80, 0, 0, 1, 0xE0]);
        assert_eq!(header_size(&png), Some((640, 480, "image/png")));
        assert_eq!(header_size(&png[..20]), None, "cut short");
        // SOI, APP0 (len 4), SOF0: len 17, precision 8, height 480, width 640.
        let mut jpeg = vec![0xFF, 0xD8, 0xFF, 0xE0, 0, 4, 0, 0, 0xFF, 0xC0, 0, 17, 8];
        jpeg.extend_from_slice(&[0x01, 0xE0, 0x02, 0x80]);
        assert_eq!(header_size(&jpeg), Some((640, 480, "image/jpeg")));
        assert_eq!(header_size(b"GIF89a"), None);
        assert_eq!(header_size(&[0xFF, 0xD8, 0xFF]), None);
    }
}
