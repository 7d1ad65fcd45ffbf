//! Base64 (RFC 4648), padded, in the standard or the URL-safe alphabet: images and audio in
//! JSON bodies, on the client's side and the simulator's, without a dependency.

/// The standard base64 alphabet (RFC 4648 §4).
pub const BASE64_STANDARD: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// The URL- and filename-safe base64 alphabet (RFC 4648 §5).
pub const BASE64_URL: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// `bytes` in base64 of `alphabet` ([`BASE64_STANDARD`] or [`BASE64_URL`]), padded with `=`,
/// appended to `out`.
pub fn encode_into(out: &mut String, bytes: &[u8], alphabet: &[u8; 64]) {
    out.reserve(bytes.len().div_ceil(3) * 4);
    for group in bytes.chunks(3) {
        let n = group
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | (u32::from(b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= group.len() {
                out.push(char::from(alphabet[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
}

/// `bytes` in base64 of `alphabet`, padded.
pub fn encode(bytes: &[u8], alphabet: &[u8; 64]) -> String {
    let mut out = String::new();
    encode_into(&mut out, bytes, alphabet);
    out
}

/// The bytes of standard base64 `text` (padding optional, whitespace not allowed); `None`
/// for a character outside the alphabet or a dangling sextet.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    let text = text.trim_end_matches('=');
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut bits, mut count) = (0u32, 0u32);
    for byte in text.bytes() {
        let value = BASE64_STANDARD.iter().position(|&c| c == byte)?;
        bits = (bits << 6) | value as u32;
        count += 6;
        if count >= 8 {
            count -= 8;
            out.push((bits >> count) as u8);
            bits &= (1 << count) - 1;
        }
    }
    (count < 6).then_some(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn base64_decodes_what_it_encodes() {
        for bytes in [
            &b""[..],
            b"f",
            b"fo",
            b"foo",
            b"foobar",
            &[0, 255, 7, 128, 9],
        ] {
            let text = encode(bytes, BASE64_STANDARD);
            assert_eq!(decode(&text).as_deref(), Some(bytes), "{text}");
        }
        assert_eq!(decode("Zm9v YmFy"), None);
        assert_eq!(decode("Z"), None);
        assert_eq!(encode(b"foobar", BASE64_STANDARD), "Zm9vYmFy");
        assert_eq!(encode(&[0, 0], BASE64_STANDARD), "AAA=");
        assert_eq!(encode(&[0xfb, 0xff], BASE64_URL), "-_8=");
    }
}
