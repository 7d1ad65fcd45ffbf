//! `--api realtime` arguments: how much audio each session speaks, in what chunks, and whose
//! protocol the server speaks; refused with any other API.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use goodput_core::backend::realtime::{DEFAULT_CHUNK, RealtimeDialect};
use goodput_core::units::parse_duration;
use goodput_core::workload::audio_lengths::AudioLengths;

use crate::args::run::ApiArg;
use crate::options::run::RealtimeOptions;

/// The audio of a session or transcription when `--audio-seconds` is not given.
pub(crate) const DEFAULT_AUDIO: Duration = Duration::from_secs(2);

/// The sessions of `--api realtime`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct RealtimeArgs {
    /// --api realtime: seconds of audio each session speaks (a PCM16 tone, sent paced at real
    /// time); --api transcriptions: seconds of the WAV tone each request sends: a number, or a
    /// distribution drawn per request from the seed, e.g. uniform:1..10, normal:mean=5,sd=1
    /// (the syntax of --input-tokens, in seconds) [default: 2].
    #[arg(
        long,
        value_name = "SECONDS|DIST",
        allow_hyphen_values = true,
        help_heading = "Target"
    )]
    pub(crate) audio_seconds: Option<String>,
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
    /// `--audio-seconds`, checked, for a run seeded with `seed`: `None` when not given.
    pub(crate) fn lengths(&self, seed: u64) -> Result<Option<AudioLengths>> {
        self.audio_seconds
            .as_deref()
            .map(|text| AudioLengths::parse(text, seed))
            .transpose()
            .context("--audio-seconds")
    }

    /// The sessions of `--api realtime` (`realtime`), checked; the flags are refused with
    /// other APIs.
    pub(crate) fn options(&self, api: ApiArg, seed: u64) -> Result<Option<RealtimeOptions>> {
        let realtime = api == ApiArg::Realtime;
        let given = self.audio_chunk.is_some() || self.realtime_dialect.is_some();
        if !realtime {
            if given {
                bail!("--audio-chunk and --realtime-dialect go with --api realtime");
            }
            if self.audio_seconds.is_some() && api != ApiArg::Transcriptions {
                bail!("--audio-seconds goes with --api realtime or --api transcriptions");
            }
            return Ok(None);
        }
        let lengths = self.lengths(seed)?;
        let fixed = lengths
            .as_ref()
            .map_or(Some(DEFAULT_AUDIO), AudioLengths::fixed);
        let chunk = self.audio_chunk.unwrap_or(DEFAULT_CHUNK);
        if chunk < Duration::from_millis(1) {
            bail!("--audio-chunk must be at least 1ms");
        }
        let dialect = match self.realtime_dialect.unwrap_or(RealtimeDialectArg::Openai) {
            RealtimeDialectArg::Openai => RealtimeDialect::OpenAi,
            RealtimeDialectArg::Vllm => RealtimeDialect::Vllm,
        };
        Ok(Some(RealtimeOptions {
            audio: fixed.unwrap_or(DEFAULT_AUDIO),
            lengths: lengths.filter(|_| fixed.is_none()),
            chunk,
            dialect,
        }))
    }
}
