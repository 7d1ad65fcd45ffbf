//! `--api transcriptions` and `--api speech` arguments: the audio a transcription sends (a
//! tone of `--audio-seconds`, or the WAV files of `--audio-dir`, each checked before the run),
//! its `--language`; the `--voice`, `--speech-format` and `--speech-stream` of speech. Refused with other APIs.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use goodput_core::backend::audio::{AudioApi, Clip, SpeechFormat, SpeechStream};
use goodput_core::workload::audio_lengths::AudioLengths;

use crate::args::realtime::DEFAULT_AUDIO;
use crate::args::run::ApiArg;
use crate::options::run::AudioOptions;

/// The sample rate of the tone a transcription sends (Whisper's native 16 kHz).
pub(crate) const TONE_RATE: u32 = 16_000;
/// Most WAV files read from `--audio-dir`.
const MAX_FILES: usize = 10_000;

/// The audio APIs' own flags.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct AudioArgs {
    /// --api transcriptions: a directory of WAV files to send (request i sends file i mod n,
    /// in name order; each file's duration is read from its header, and a file that is not a
    /// valid PCM WAV stops the run before it starts) instead of an --audio-seconds tone.
    #[arg(long, value_name = "DIR", help_heading = "Target")]
    pub(crate) audio_dir: Option<PathBuf>,
    /// --api transcriptions: the `language` field (ISO-639-1, e.g. `en`) [default: not sent].
    #[arg(long, value_name = "CODE", help_heading = "Target")]
    pub(crate) language: Option<String>,
    /// --api speech: the `voice` [default: alloy].
    #[arg(long, value_name = "NAME", help_heading = "Target")]
    pub(crate) voice: Option<String>,
    /// --api speech: the `response_format`: `wav` or `pcm` (16-bit mono at 24 kHz) — formats
    /// whose duration goodput can read [default: wav].
    #[arg(long, value_name = "FORMAT", help_heading = "Target")]
    pub(crate) speech_format: Option<String>,
    /// --api speech, streamed: the `stream_format`: `audio` (the audio bytes, each chunk timed
    /// like a token) or `sse` (OpenAI's `speech.audio.delta` events of base64 audio, each
    /// timed like a token, and `speech.audio.done` with the usage) [default: audio].
    #[arg(long, value_name = "FORMAT", help_heading = "Target")]
    pub(crate) speech_stream: Option<SpeechStreamArg>,
}

/// `--speech-stream`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum SpeechStreamArg {
    /// The audio bytes.
    Audio,
    /// Server-sent events of base64 audio.
    Sse,
}

impl AudioArgs {
    /// The audio options of `api` (`seconds`: `--audio-seconds`, checked), `None` for the
    /// other APIs (whose use of these flags is refused).
    pub(crate) fn options(
        &self,
        api: ApiArg,
        lengths: Option<AudioLengths>,
    ) -> Result<Option<AudioOptions>> {
        let transcription_flags = self.audio_dir.is_some() || self.language.is_some();
        let speech_flags =
            self.voice.is_some() || self.speech_format.is_some() || self.speech_stream.is_some();
        if transcription_flags && api != ApiArg::Transcriptions {
            bail!("--audio-dir and --language go with --api transcriptions");
        }
        if speech_flags && api != ApiArg::Speech {
            bail!("--voice, --speech-format and --speech-stream go with --api speech");
        }
        match api {
            ApiArg::Transcriptions => Ok(Some(AudioOptions {
                api: AudioApi::Transcriptions,
                clips: self.clips(lengths.as_ref())?,
                drawn: lengths.filter(|l| l.fixed().is_none()),
                tone_rate: TONE_RATE,
                language: self.language.clone(),
                voice: String::new(),
                format: SpeechFormat::Wav,
                speech_stream: SpeechStream::Audio,
            })),
            ApiArg::Speech => Ok(Some(AudioOptions {
                api: AudioApi::Speech,
                clips: Vec::new(),
                drawn: None,
                tone_rate: TONE_RATE,
                language: None,
                voice: self.voice.clone().unwrap_or_else(|| "alloy".into()),
                format: speech_format(self.speech_format.as_deref())?,
                speech_stream: match self.speech_stream {
                    None | Some(SpeechStreamArg::Audio) => SpeechStream::Audio,
                    Some(SpeechStreamArg::Sse) => SpeechStream::Sse,
                },
            })),
            _ => Ok(None),
        }
    }

    /// What `run.workload.audio` records: the audio sent, or the voice and format asked for.
    pub(crate) fn describe(
        &self,
        api: ApiArg,
        lengths: Option<&AudioLengths>,
    ) -> Option<serde_json::Value> {
        match api {
            ApiArg::Transcriptions => Some(match &self.audio_dir {
                Some(dir) => serde_json::json!({"audio_dir": dir.display().to_string(),
                    "language": self.language}),
                None => serde_json::json!({"audio_seconds": seconds_described(lengths),
                    "sample_rate": TONE_RATE, "language": self.language}),
            }),
            ApiArg::Speech => Some(serde_json::json!({
                "voice": self.voice.as_deref().unwrap_or("alloy"),
                "format": self.speech_format.as_deref().unwrap_or("wav"),
                "stream_format": match self.speech_stream {
                    None | Some(SpeechStreamArg::Audio) => "audio",
                    Some(SpeechStreamArg::Sse) => "sse",
                },
            })),
            _ => None,
        }
    }

    /// The clips a transcription sends: `--audio-dir`'s files, else a tone of the fixed
    /// `--audio-seconds` (none when they are drawn per request).
    fn clips(&self, lengths: Option<&AudioLengths>) -> Result<Vec<Clip>> {
        let Some(dir) = &self.audio_dir else {
            return Ok(
                match lengths.map_or(Some(DEFAULT_AUDIO), AudioLengths::fixed) {
                    Some(length) => vec![Clip::tone(TONE_RATE, length)],
                    None => Vec::new(),
                },
            );
        };
        if lengths.is_some() {
            bail!("--audio-seconds and --audio-dir: the files give the audio's length");
        }
        read_dir(dir)
    }
}

/// What `run.workload` records of `--audio-seconds`: the seconds of a fixed length, the
/// distribution's text otherwise.
pub(crate) fn seconds_described(lengths: Option<&AudioLengths>) -> serde_json::Value {
    match lengths {
        None => DEFAULT_AUDIO.as_secs_f64().into(),
        Some(lengths) => match lengths.fixed() {
            Some(length) => length.as_secs_f64().into(),
            None => lengths.to_string().into(),
        },
    }
}

/// `--speech-format`: `wav` or `pcm`; the other OpenAI formats are refused with the reason.
fn speech_format(given: Option<&str>) -> Result<SpeechFormat> {
    match given.map(str::to_ascii_lowercase).as_deref() {
        None | Some("wav") => Ok(SpeechFormat::Wav),
        Some("pcm") => Ok(SpeechFormat::Pcm),
        Some(other @ ("mp3" | "opus" | "aac" | "flac")) => bail!(
            "--speech-format {other}: goodput cannot read the duration of compressed audio \
             without a decoder; use wav or pcm"
        ),
        Some(other) => bail!("--speech-format {other}: expected wav or pcm"),
    }
}

/// Every `.wav` file of `dir`, in name order, each checked.
fn read_dir(dir: &Path) -> Result<Vec<Clip>> {
    let entries = std::fs::read_dir(dir)
        .with_context(|| format!("--audio-dir: cannot read {}", dir.display()))?;
    let mut paths = Vec::new();
    for entry in entries {
        let path = entry
            .with_context(|| format!("--audio-dir: cannot list {}", dir.display()))?
            .path();
        let wav = path
            .extension()
            .is_some_and(|ext| ext.eq_ignore_ascii_case("wav"));
        if wav && path.is_file() {
            paths.push(path);
        }
    }
    paths.sort();
    if paths.is_empty() {
        bail!("--audio-dir {}: no .wav files", dir.display());
    }
    if paths.len() > MAX_FILES {
        bail!(
            "--audio-dir {}: more than {MAX_FILES} .wav files",
            dir.display()
        );
    }
    paths
        .iter()
        .map(|path| {
            let bytes = std::fs::read(path)
                .with_context(|| format!("--audio-dir: cannot read {}", path.display()))?;
            let name = path
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
            let clip = Clip::from_wav(&name, bytes)
                .with_context(|| format!("--audio-dir: {}", path.display()))?;
            if clip.duration.is_zero() {
                bail!("--audio-dir: {} holds no audio", path.display());
            }
            Ok(clip)
        })
        .collect()
}
