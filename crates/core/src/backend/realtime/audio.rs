//! The audio a realtime session speaks: a PCM16 mono tone (440 Hz at a third of full scale)
//! of a given length, cut into chunks of a given duration, each base64-encoded as
//! `input_audio_buffer.append` carries it.

use std::time::Duration;

/// PCM16 little-endian samples of `seconds` of a 440 Hz tone at `rate` samples/s.
pub fn tone(rate: u32, length: Duration) -> Vec<u8> {
    let samples = (f64::from(rate) * length.as_secs_f64()).round() as u64;
    let mut out = Vec::with_capacity(usize::try_from(samples * 2).unwrap_or(0));
    for n in 0..samples {
        let phase = 2.0 * std::f64::consts::PI * 440.0 * n as f64 / f64::from(rate);
        let sample = (phase.sin() * f64::from(i16::MAX) / 3.0) as i16;
        out.extend_from_slice(&sample.to_le_bytes());
    }
    out
}

/// `audio` cut into chunks of `chunk` of audio each (the last may be shorter).
pub fn chunks(audio: &[u8], rate: u32, chunk: Duration) -> Vec<&[u8]> {
    let samples = (f64::from(rate) * chunk.as_secs_f64()).round().max(1.0) as usize;
    audio.chunks(samples * 2).collect()
}

/// Standard base64 (RFC 4648, padded).
pub fn base64(bytes: &[u8]) -> String {
    crate::units::base64(bytes, crate::units::BASE64_STANDARD)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_and_chunks() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foobar"), "Zm9vYmFy");
        let audio = tone(16_000, Duration::from_secs(2));
        assert_eq!(audio.len(), 64_000);
        let pieces = chunks(&audio, 16_000, Duration::from_millis(100));
        assert_eq!(pieces.len(), 20);
        assert!(pieces.iter().all(|p| p.len() == 3_200));
    }
}
