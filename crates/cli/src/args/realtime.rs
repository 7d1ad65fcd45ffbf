//! `--api realtime` arguments: how much audio each session speaks, in what chunks, and whose
//! protocol the server speaks; refused with any other API.

use std::time::Duration;

use anyhow::{Result, bail};
use goodput_core::backend::realtime::{DEFAULT_CHUNK, RealtimeDialect};
use goodput_core::units::parse_duration;

use crate::options::run::RealtimeOptions;

/// The sessions of `--api realtime`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct RealtimeArgs {
    /// --api realtime: seconds of audio each session speaks (a PCM16 tone, sent paced at real
    /// time) [default: 2].
    #[arg(long, value_name = "SECONDS", help_heading = "Target")]
    pub(crate) audio_seconds: Option<f64>,
    /// --api realtime: the audio in each `input_audio_buffer.append`, e.g. 100ms
    /// [default: 100ms].
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, help_heading = "Target")]
    pub(crate) audio_chunk: Option<Duration>,
    /// --api realtime: the server's protocol: `openai` (OpenAI Realtime, 24 kHz) or `vllm`
    /// (vLLM's realtime transcription, 16 kHz) [default: openai].
    #[arg(long, value_name = "DIALECT", help_heading = "Target")]
    pub(crate) realtime_dialect: Option<RealtimeDialectArg>,
}

/// `--realtime-dialect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum RealtimeDialectArg {
    /// OpenAI Realtime.
    Openai,
    /// vLLM's realtime transcription.
    Vllm,
}

impl RealtimeArgs {
    /// The sessions of `--api realtime` (`realtime`), checked; the flags are refused with
    /// other APIs.
    pub(crate) fn options(&self, realtime: bool) -> Result<Option<RealtimeOptions>> {
        let given = self.audio_seconds.is_some()
            || self.audio_chunk.is_some()
            || self.realtime_dialect.is_some();
        if !realtime {
            if given {
                bail!(
                    "--audio-seconds, --audio-chunk and --realtime-dialect go with --api realtime"
                );
            }
            return Ok(None);
        }
        let seconds = self.audio_seconds.unwrap_or(2.0);
        if !(seconds.is_finite() && seconds > 0.0 && seconds <= 3600.0) {
            bail!("--audio-seconds must be in (0, 3600], got {seconds}");
        }
        let chunk = self.audio_chunk.unwrap_or(DEFAULT_CHUNK);
        if chunk < Duration::from_millis(1) {
            bail!("--audio-chunk must be at least 1ms");
        }
        let dialect = match self.realtime_dialect.unwrap_or(RealtimeDialectArg::Openai) {
            RealtimeDialectArg::Openai => RealtimeDialect::OpenAi,
            RealtimeDialectArg::Vllm => RealtimeDialect::Vllm,
        };
        Ok(Some(RealtimeOptions {
            audio: Duration::from_secs_f64(seconds),
            chunk,
            dialect,
        }))
    }
}
