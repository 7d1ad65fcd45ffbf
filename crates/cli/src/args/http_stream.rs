//! `--api http` streaming arguments: `--stream-format sse|chunked|none` and `--tokens-path`;
//! refused with any other API.

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use goodput_core::backend::template::{ItemsPath, StreamFormat};

/// How an `--api http` reply streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub(crate) enum StreamFormatArg {
    /// One whole body (no TTFT, no inter-chunk times).
    #[default]
    None,
    /// Server-sent events: each event is a chunk (TTFT = the first event).
    Sse,
    /// Each piece of the body as it arrives is a chunk (TTFT = the first piece).
    Chunked,
}

/// The streaming flags of `--api http`.
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct HttpStreamArgs {
    /// --api http: how the reply streams: `sse` (each event is a chunk), `chunked` (each piece
    /// of the body as it arrives) or `none` (one body); the first chunk gives the TTFT.
    #[arg(long, value_enum, value_name = "FORMAT", help_heading = "Target")]
    pub(crate) stream_format: Option<StreamFormatArg>,
    /// --api http --stream-format sse: where each event's tokens are, a JSONPath such as
    /// `$.token_ids` (an array counts its length, any other value one token); without it chunks
    /// carry no token count (TTFT only, no ITL or TPOT).
    #[arg(long, value_name = "JSONPATH", help_heading = "Target")]
    pub(crate) tokens_path: Option<String>,
}

impl HttpStreamArgs {
    /// `--stream-format` and `--tokens-path` in `run.workload`, saying when chunks carry no
    /// tokens.
    pub(crate) fn describe(&self, described: &mut BTreeMap<String, serde_json::Value>) {
        let format = match self.stream_format {
            None | Some(StreamFormatArg::None) => return,
            Some(StreamFormatArg::Sse) => "sse",
            Some(StreamFormatArg::Chunked) => "chunked",
        };
        described.insert("stream_format".into(), format.into());
        let tokens = self.tokens_path.clone().unwrap_or_else(|| {
            "none: chunk times only (TTFT), no token counts, no ITL or TPOT".into()
        });
        described.insert("tokens_path".into(), tokens.into());
    }

    /// The stream format and tokens path, checked: `--api http` only (`http`), `--tokens-path`
    /// with `sse` only, not with `--no-stream`.
    pub(crate) fn checked(
        &self,
        http: bool,
        no_stream: bool,
    ) -> Result<(StreamFormat, Option<ItemsPath>)> {
        let given = self.stream_format.is_some() || self.tokens_path.is_some();
        if !http && given {
            bail!("--stream-format and --tokens-path go with --api http");
        }
        let format = match self.stream_format.unwrap_or_default() {
            StreamFormatArg::None => StreamFormat::None,
            StreamFormatArg::Sse => StreamFormat::Sse,
            StreamFormatArg::Chunked => StreamFormat::Chunked,
        };
        if no_stream && format != StreamFormat::None {
            bail!("--no-stream contradicts --stream-format sse or chunked");
        }
        if self.tokens_path.is_some() && format != StreamFormat::Sse {
            bail!(
                "--tokens-path counts the tokens of each SSE event: it needs --stream-format sse"
            );
        }
        let tokens = self
            .tokens_path
            .as_deref()
            .map(ItemsPath::parse)
            .transpose()
            .context("--tokens-path")?;
        Ok((format, tokens))
    }
}
