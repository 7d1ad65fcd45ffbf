//! WAV (RIFF/WAVE, PCM) files: written for the audio goodput sends, read for the audio a
//! server returns or a user gives. Only what a duration needs is checked: the `fmt ` chunk
//! (PCM or IEEE float, channels, sample rate, bits per sample) and the `data` chunk's length.

use std::time::Duration;

/// What a WAV file holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WavInfo {
    /// Samples per second.
    pub sample_rate: u32,
    /// Channels.
    pub channels: u16,
    /// Bits per sample.
    pub bits: u16,
    /// Bytes of sample data.
    pub data_bytes: u64,
}

impl WavInfo {
    /// The audio's length: data bytes ÷ (rate × channels × bytes per sample).
    pub fn duration(&self) -> Duration {
        let frame = u64::from(self.channels) * u64::from(self.bits / 8);
        let per_sec = frame * u64::from(self.sample_rate);
        if per_sec == 0 {
            return Duration::ZERO;
        }
        Duration::from_secs_f64(self.data_bytes as f64 / per_sec as f64)
    }
}

/// Why bytes are not a WAV file goodput can time.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WavError {
    /// Not RIFF/WAVE.
    #[error("not a WAV file (no RIFF/WAVE header)")]
    NotWav,
    /// No `fmt ` chunk before the data, or one too short.
    #[error("the WAV file has no valid `fmt ` chunk")]
    NoFormat,
    /// A format whose duration cannot be computed.
    #[error("unsupported WAV format: {0}")]
    Unsupported(String),
    /// No `data` chunk.
    #[error("the WAV file has no `data` chunk")]
    NoData,
    /// The data chunk says more bytes than the file holds.
    #[error("truncated WAV: the data chunk declares {declared} bytes, {present} present")]
    Truncated {
        /// Bytes the header declares.
        declared: u64,
        /// Bytes present.
        present: u64,
    },
}

/// Bytes of the canonical 44-byte header of [`pcm16`].
pub const HEADER_BYTES: usize = 44;

/// A WAV file of 16-bit mono PCM `samples` (little-endian bytes) at `rate`.
pub fn pcm16(rate: u32, samples: &[u8]) -> Vec<u8> {
    let data = u32::try_from(samples.len()).unwrap_or(u32::MAX);
    let mut out = Vec::with_capacity(HEADER_BYTES + samples.len());
    out.extend_from_slice(b"RIFF");
    out.extend_from_slice(&data.saturating_add(36).to_le_bytes());
    out.extend_from_slice(b"WAVEfmt ");
    out.extend_from_slice(&16u32.to_le_bytes());
    out.extend_from_slice(&1u16.to_le_bytes()); // PCM
    out.extend_from_slice(&1u16.to_le_bytes()); // mono
    out.extend_from_slice(&rate.to_le_bytes());
    out.extend_from_slice(&(rate * 2).to_le_bytes()); // bytes per second
    out.extend_from_slice(&2u16.to_le_bytes()); // block align
    out.extend_from_slice(&16u16.to_le_bytes()); // bits per sample
    out.extend_from_slice(b"data");
    out.extend_from_slice(&data.to_le_bytes());
    out.extend_from_slice(samples);
    out
}

fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

/// Reads a WAV file's format and data length. `streamed`: a data length of 0 or `u32::MAX`
/// (a streaming server does not know it in advance) means "to the end of the bytes".
pub fn parse(bytes: &[u8], streamed: bool) -> Result<WavInfo, WavError> {
    if bytes.get(0..4) != Some(b"RIFF") || bytes.get(8..12) != Some(b"WAVE") {
        return Err(WavError::NotWav);
    }
    let mut at = 12;
    let mut format: Option<(u16, u16, u32, u16)> = None;
    while let (Some(id), Some(size)) = (bytes.get(at..at + 4), u32_at(bytes, at + 4)) {
        let body = at + 8;
        if id == b"fmt " {
            let field = |offset| u16_at(bytes, body + offset);
            let (Some(tag), Some(channels), Some(rate), Some(bits)) =
                (field(0), field(2), u32_at(bytes, body + 4), field(14))
            else {
                return Err(WavError::NoFormat);
            };
            format = Some((tag, channels, rate, bits));
        } else if id == b"data" {
            let (tag, channels, sample_rate, bits) = format.ok_or(WavError::NoFormat)?;
            check_format(tag, channels, sample_rate, bits)?;
            let present = (bytes.len() - body) as u64;
            let declared = u64::from(size);
            let open = streamed && (size == 0 || size == u32::MAX);
            if !open && declared > present {
                return Err(WavError::Truncated { declared, present });
            }
            let data_bytes = if open { present } else { declared };
            return Ok(WavInfo {
                sample_rate,
                channels,
                bits,
                data_bytes,
            });
        }
        at = body
            + usize::try_from(size)
                .unwrap_or(usize::MAX)
                .saturating_add((size & 1) as usize);
        if at >= bytes.len() {
            break;
        }
    }
    Err(if format.is_some() {
        WavError::NoData
    } else {
        WavError::NoFormat
    })
}

/// PCM (1), IEEE float (3) or extensible (0xFFFE), with channels, a rate and whole bytes.
fn check_format(tag: u16, channels: u16, rate: u32, bits: u16) -> Result<(), WavError> {
    if !matches!(tag, 1 | 3 | 0xFFFE) {
        return Err(WavError::Unsupported(format!(
            "format tag {tag} (only PCM and IEEE float can be timed)"
        )));
    }
    if channels == 0 || rate == 0 || bits == 0 || !bits.is_multiple_of(8) {
        return Err(WavError::Unsupported(format!(
            "{channels} channels, {rate} Hz, {bits} bits per sample"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn written_files_read_back_with_their_duration() {
        let file = pcm16(16_000, &vec![0u8; 48_000]);
        assert_eq!(file.len(), HEADER_BYTES + 48_000);
        let info = parse(&file, false).unwrap();
        assert_eq!(
            (info.sample_rate, info.channels, info.bits),
            (16_000, 1, 16)
        );
        assert_eq!(info.duration(), Duration::from_millis(1500));
    }

    #[test]
    fn malformed_files_are_refused() {
        assert_eq!(
            parse(b"hello world, not audio", false),
            Err(WavError::NotWav)
        );
        let file = pcm16(16_000, &vec![0u8; 3_200]);
        let cut = &file[..HEADER_BYTES + 100];
        assert_eq!(
            parse(cut, false),
            Err(WavError::Truncated {
                declared: 3_200,
                present: 100
            })
        );
        assert_eq!(parse(&file[..30], false), Err(WavError::NoFormat));
        let mut odd = file.clone();
        odd[20] = 2; // ADPCM
        assert!(matches!(parse(&odd, false), Err(WavError::Unsupported(_))));
        // A streaming server's open-ended data chunk runs to the end of the bytes.
        let mut open = pcm16(24_000, &vec![0u8; 4_800]);
        open[40..44].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            parse(&open, true).unwrap().duration(),
            Duration::from_millis(100)
        );
        assert!(parse(&open, false).is_err());
    }
}
