//! Incremental server-sent-events decoder: bytes in any split → [`SseEvent`]s, with bounded
//! memory and the quirks real inference servers show (see the module tests).
//!
//! Follows the WHATWG event-stream rules where they matter to goodput: lines end with `\n`,
//! `\r\n` or `\r` (a `\r\n` split between two reads counts once); a leading UTF-8 BOM is
//! skipped; lines starting with `:` are comments (keep-alives); `field:value` drops one space
//! after the colon; several `data` lines join with `\n`; a blank line dispatches the event;
//! `retry` and unknown fields are ignored. Additions for servers in the wild: llama.cpp's
//! non-standard `error:` field yields an event of kind [`SseEventKind::Error`], and
//! [`SseDecoder::finish`] dispatches a last event that lacked its blank line.
//!
//! Memory is bounded: a line (or an event's joined data) longer than `max_line_bytes` is an
//! error, so a server sending one endless line cannot exhaust memory.

use memchr::{memchr, memchr2};
use thiserror::Error;

/// Why a byte stream is not a usable event stream. After an error the decoder should be
/// discarded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SseError {
    /// A single line exceeded the limit.
    #[error("an event-stream line exceeds {limit} bytes")]
    LineTooLong {
        /// The limit in bytes.
        limit: usize,
    },
    /// One event's data (its `data` lines joined) exceeded the limit.
    #[error("an event's data exceeds {limit} bytes")]
    EventTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// A `data`, `error`, `event` or `id` value was not valid UTF-8.
    #[error("invalid UTF-8 in the event stream (field `{field}`)")]
    InvalidUtf8 {
        /// The field whose value was invalid.
        field: &'static str,
    },
}

/// What an event carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SseEventKind {
    /// Ordinary `data` lines.
    Data,
    /// llama.cpp's non-standard `error:` field (the data is the error payload).
    Error,
}

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// Data or error.
    pub kind: SseEventKind,
    /// The `event` field (event type), when the event had one.
    pub event: Option<String>,
    /// The `id` field, when the event had one.
    pub id: Option<String>,
    /// The `data` (or `error`) lines joined with `\n`.
    pub data: String,
}

impl SseEvent {
    /// Whether the server flagged this event as an error: an `error:` field, or an
    /// `event: error` type.
    pub fn is_error(&self) -> bool {
        self.kind == SseEventKind::Error || self.event.as_deref() == Some("error")
    }
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Incremental decoder. Feed it body frames as they arrive; it keeps only the unfinished
/// line and the event being built.
#[derive(Debug)]
pub struct SseDecoder {
    max_line_bytes: usize,
    /// The unfinished line carried over from earlier feeds.
    partial: Vec<u8>,
    /// The last byte fed was `\r`: a `\n` starting the next feed belongs to it.
    after_cr: bool,
    /// No line has been completed yet (a BOM may lead the first one).
    at_start: bool,
    data: String,
    has_data: bool,
    is_error: bool,
    event: Option<String>,
    id: Option<String>,
}

impl SseDecoder {
    /// A decoder refusing lines (and event data) longer than `max_line_bytes`.
    pub fn new(max_line_bytes: usize) -> Self {
        SseDecoder {
            max_line_bytes,
            partial: Vec::new(),
            after_cr: false,
            at_start: true,
            data: String::new(),
            has_data: false,
            is_error: false,
            event: None,
            id: None,
        }
    }

    /// Decodes `bytes`, appending every event they complete to `out`.
    pub fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if self.after_cr && !bytes.is_empty() {
            self.after_cr = false;
            if bytes[0] == b'\n' {
                bytes = &bytes[1..];
            }
        }
        while let Some(end) = memchr2(b'\n', b'\r', bytes) {
            if self.partial.is_empty() {
                self.line(&bytes[..end], out)?;
            } else {
                self.check_len(self.partial.len() + end)?;
                let mut line = std::mem::take(&mut self.partial);
                line.extend_from_slice(&bytes[..end]);
                let result = self.line(&line, out);
                line.clear();
                self.partial = line;
                result?;
            }
            let mut next = end + 1;
            if bytes[end] == b'\r' {
                match bytes.get(next) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            bytes = &bytes[next..];
        }
        if !bytes.is_empty() {
            self.check_len(self.partial.len() + bytes.len())?;
            self.partial.extend_from_slice(bytes);
        }
        Ok(())
    }

    /// Ends the stream: an unfinished last line is decoded and an event still being built is
    /// dispatched (servers sometimes omit the final blank line). The decoder is then reset.
    pub fn finish(&mut self, out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        let partial = std::mem::take(&mut self.partial);
        let result = if partial.is_empty() {
            Ok(())
        } else {
            self.line(&partial, out)
        };
        if result.is_ok() {
            self.dispatch(out);
        }
        self.reset();
        result
    }

    /// Forgets everything, as if newly created.
    pub fn reset(&mut self) {
        self.partial.clear();
        self.after_cr = false;
        self.at_start = true;
        self.clear_event();
    }

    fn check_len(&self, len: usize) -> Result<(), SseError> {
        if len > self.max_line_bytes {
            Err(SseError::LineTooLong {
                limit: self.max_line_bytes,
            })
        } else {
            Ok(())
        }
    }

    /// Handles one complete line (without its terminator).
    fn line(&mut self, mut line: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        self.check_len(line.len())?;
        if self.at_start {
            self.at_start = false;
            line = line.strip_prefix(BOM).unwrap_or(line);
        }
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        let (field, value) = match memchr(b':', line) {
            Some(0) => return Ok(()), // comment / keep-alive
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        match field {
            b"data" => self.append_data(value, "data"),
            b"error" => {
                self.is_error = true;
                self.append_data(value, "error")
            }
            b"event" => {
                self.event = Some(utf8(value, "event")?.to_owned());
                Ok(())
            }
            b"id" => {
                self.id = Some(utf8(value, "id")?.to_owned());
                Ok(())
            }
            _ => Ok(()), // `retry` and unknown fields
        }
    }

    fn append_data(&mut self, value: &[u8], field: &'static str) -> Result<(), SseError> {
        let text = utf8(value, field)?;
        let joined = self.data.len() + usize::from(self.has_data) + text.len();
        if joined > self.max_line_bytes {
            return Err(SseError::EventTooLarge {
                limit: self.max_line_bytes,
            });
        }
        if self.has_data {
            self.data.push('\n');
        }
        self.data.push_str(text);
        self.has_data = true;
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        if self.has_data {
            out.push(SseEvent {
                kind: if self.is_error {
                    SseEventKind::Error
                } else {
                    SseEventKind::Data
                },
                event: self.event.take(),
                id: self.id.take(),
                data: std::mem::take(&mut self.data),
            });
        }
        self.clear_event();
    }

    fn clear_event(&mut self) {
        self.data.clear();
        self.has_data = false;
        self.is_error = false;
        self.event = None;
        self.id = None;
    }
}

fn utf8<'a>(bytes: &'a [u8], field: &'static str) -> Result<&'a str, SseError> {
    std::str::from_utf8(bytes).map_err(|_| SseError::InvalidUtf8 { field })
}

/// The event of one `data: {data}` line, for the readers' tests.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) fn data_event(data: &str) -> SseEvent {
    let mut out = Vec::new();
    SseDecoder::new(1 << 20)
        .feed(format!("data: {data}\n\n").as_bytes(), &mut out)
        .unwrap();
    out.remove(0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn decode(pieces: &[&[u8]]) -> Result<Vec<SseEvent>, SseError> {
        let mut decoder = SseDecoder::new(1024);
        let mut out = Vec::new();
        for piece in pieces {
            decoder.feed(piece, &mut out)?;
        }
        decoder.finish(&mut out)?;
        Ok(out)
    }

    fn datas(pieces: &[&[u8]]) -> Vec<String> {
        decode(pieces)
            .unwrap()
            .into_iter()
            .map(|event| event.data)
            .collect()
    }

    #[test]
    fn line_endings_lf_crlf_cr() {
        assert_eq!(
            datas(&[b"data: a\n\ndata: b\r\n\r\ndata: c\r\rdata: d\n\n"]),
            ["a", "b", "c", "d"]
        );
    }

    #[test]
    fn crlf_split_between_feeds_counts_once() {
        // `\r` ends the line; a `\n` starting the next feed must not add a blank line.
        assert_eq!(
            datas(&[b"data: a\r", b"\ndata: b\r", b"\n\r", b"\n"]),
            ["a\nb"]
        );
        assert_eq!(datas(&[b"data: a\r", b"\r", b"\n"]), ["a"]);
    }

    #[test]
    fn every_split_point_gives_the_same_events() {
        let stream: &[u8] =
            b"\xEF\xBB\xBF: ping\r\ndata:{\"a\":1}\r\n\r\nevent: x\nid: 7\ndata: l1\ndata: l2\n\n\
            error: {\"code\":400}\n\ndata: [DONE]";
        let whole = decode(&[stream]).unwrap();
        assert_eq!(whole.len(), 4);
        for i in 0..=stream.len() {
            for j in i..=stream.len() {
                assert_eq!(
                    decode(&[&stream[..i], &stream[i..j], &stream[j..]]).unwrap(),
                    whole
                );
            }
        }
    }

    #[test]
    fn comments_are_skipped_and_space_is_optional() {
        assert_eq!(
            datas(&[b": keep-alive\n\n:\n\ndata:x\n\ndata:  two\n\n"]),
            ["x", " two"]
        );
    }

    #[test]
    fn multi_line_data_joins_with_newline_and_empty_data_dispatches() {
        assert_eq!(
            datas(&[b"data: a\ndata\ndata: b\n\ndata:\n\n"]),
            ["a\n\nb", ""]
        );
    }

    #[test]
    fn event_id_retry_and_unknown_fields() {
        let events =
            decode(&[b"retry: 10\nfoo: bar\nevent: message\nid: 3\ndata: d\n\nid: 4\n\n"]).unwrap();
        assert_eq!(
            events,
            [SseEvent {
                kind: SseEventKind::Data,
                event: Some("message".into()),
                id: Some("3".into()),
                data: "d".into(),
            }]
        );
    }

    #[test]
    fn llama_cpp_error_field_and_event_error() {
        let events =
            decode(&[b"error: {\"code\":400,\"message\":\"too long\"}\n\ndata: [DONE]\n\n"])
                .unwrap();
        assert_eq!(events[0].kind, SseEventKind::Error);
        assert!(events[0].is_error());
        assert_eq!(events[0].data, r#"{"code":400,"message":"too long"}"#);
        assert_eq!(events[1].kind, SseEventKind::Data);
        let events = decode(&[b"event: error\ndata: boom\n\n"]).unwrap();
        assert!(events[0].is_error());
    }

    #[test]
    fn bom_only_at_start_and_split() {
        assert_eq!(datas(&[b"\xEF", b"\xBB", b"\xBFdata: a\n\n"]), ["a"]);
        // A BOM later is just bytes of an unknown field name.
        assert_eq!(datas(&[b"data: a\n\n\xEF\xBB\xBFdata: b\n\n"]), ["a"]);
    }

    #[test]
    fn final_event_without_blank_line_or_newline() {
        assert_eq!(datas(&[b"data: a\n\ndata: [DONE]"]), ["a", "[DONE]"]);
        assert_eq!(datas(&[b"data: [DONE]\n"]), ["[DONE]"]);
    }

    #[test]
    fn long_line_is_refused_whole_or_split() {
        let mut decoder = SseDecoder::new(16);
        let mut out = Vec::new();
        let long = [b'a'; 17];
        assert_eq!(
            decoder.feed(&long, &mut out),
            Err(SseError::LineTooLong { limit: 16 })
        );
        let mut decoder = SseDecoder::new(16);
        decoder.feed(b"data: 0123456789", &mut out).unwrap();
        assert!(decoder.feed(b"x", &mut out).is_err());
        let mut decoder = SseDecoder::new(16);
        assert!(decoder.feed(b"data: 0123456789x\n", &mut out).is_err());
        // Exactly at the limit is fine, and a long comment counts too.
        let mut decoder = SseDecoder::new(16);
        decoder.feed(b"data: 0123456789\n\n", &mut out).unwrap();
        assert_eq!(out.len(), 1);
        assert!(decoder.feed(b": 0123456789abcdef\n", &mut out).is_err());
    }

    #[test]
    fn many_data_lines_are_bounded() {
        let mut decoder = SseDecoder::new(16);
        let mut out = Vec::new();
        let result = (0..10).try_for_each(|_| decoder.feed(b"data: abcd\n", &mut out));
        assert_eq!(result, Err(SseError::EventTooLarge { limit: 16 }));
    }

    #[test]
    fn invalid_utf8_is_an_error_but_not_in_comments() {
        assert_eq!(
            decode(&[b"data: \xFF\n\n"]),
            Err(SseError::InvalidUtf8 { field: "data" })
        );
        assert_eq!(datas(&[b": \xFF\xFE\n\ndata: ok\n\n"]), ["ok"]);
        // A multi-byte character split across feeds is fine.
        assert_eq!(datas(&[b"data: \xC3", b"\xA9\n\n"]), ["\u{e9}"]);
    }

    #[test]
    fn out_is_appended_not_replaced() {
        let mut decoder = SseDecoder::new(64);
        let mut out = Vec::new();
        decoder.feed(b"data: 1\n\ndata: 2\n\n", &mut out).unwrap();
        decoder.feed(b"data: 3\n\n", &mut out).unwrap();
        assert_eq!(out.len(), 3);
    }
}
