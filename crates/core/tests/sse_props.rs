//! Property tests of the SSE decoder: splitting a stream anywhere changes nothing, valid
//! streams decode to the events they were built from, and arbitrary bytes never panic.
#![allow(clippy::unwrap_used)]

use goodput_core::backend::sse::{SseDecoder, SseError, SseEvent, SseEventKind};
use proptest::prelude::*;

/// Decodes `bytes` cut at `cuts` (sorted or not, any values), continuing past errors so every
/// code path runs; returns the events and the first error.
fn decode(bytes: &[u8], cuts: &[usize], limit: usize) -> (Vec<SseEvent>, Option<SseError>) {
    let mut cuts: Vec<usize> = cuts.iter().map(|cut| cut % (bytes.len() + 1)).collect();
    cuts.sort_unstable();
    cuts.push(bytes.len());
    let mut decoder = SseDecoder::new(limit);
    let mut out = Vec::new();
    let mut start = 0;
    for cut in cuts {
        if let Err(error) = decoder.feed(&bytes[start..cut], &mut out) {
            return (out, Some(error));
        }
        start = cut;
    }
    let error = decoder.finish(&mut out).err();
    (out, error)
}

#[derive(Debug, Clone)]
struct ModelEvent {
    event: Option<String>,
    id: Option<String>,
    lines: Vec<String>,
    error: bool,
}

fn text() -> impl Strategy<Value = String> {
    "[^\r\n]{0,40}"
}

fn model_event() -> impl Strategy<Value = ModelEvent> {
    (
        proptest::option::of("[a-z]{1,8}"),
        proptest::option::of("[0-9a-z]{0,8}"),
        proptest::collection::vec(text(), 1..4),
        proptest::bool::weighted(0.1),
    )
        .prop_map(|(event, id, lines, error)| ModelEvent {
            event,
            id,
            lines,
            error,
        })
}

/// Serialises events with varied line endings, spacing, comments and an optional BOM; the
/// last event may lack its blank line.
fn serialise(events: &[ModelEvent], style: &[u8], bom: bool, unterminated: bool) -> Vec<u8> {
    let mut lines: Vec<String> = Vec::new();
    for (n, event) in events.iter().enumerate() {
        let pick = |k: usize| style[(n * 7 + k) % style.len()];
        if pick(0) % 3 == 0 {
            lines.push(": keep-alive".into());
        }
        if let Some(name) = &event.event {
            lines.push(format!("event: {name}"));
        }
        let field = if event.error { "error" } else { "data" };
        for (k, line) in event.lines.iter().enumerate() {
            let spaced = pick(k + 1) % 2 == 0 || line.starts_with(' ');
            lines.push(if spaced {
                format!("{field}: {line}")
            } else {
                format!("{field}:{line}")
            });
        }
        if let Some(id) = &event.id {
            lines.push(format!("id:{id}"));
        }
        if pick(5) % 4 == 0 {
            lines.push("retry: 1000".into());
        }
        let last = n + 1 == events.len();
        if !(last && unterminated) {
            lines.push(String::new());
        }
    }
    let mut bytes = if bom {
        b"\xEF\xBB\xBF".to_vec()
    } else {
        Vec::new()
    };
    let mut previous_cr = false;
    for (n, line) in lines.iter().enumerate() {
        bytes.extend_from_slice(line.as_bytes());
        let mut ending: &[u8] = match style[n % style.len()] % 3 {
            0 => b"\n",
            1 => b"\r\n",
            _ => b"\r",
        };
        // `\r` then an empty line ended by `\n` would read as one `\r\n`.
        if previous_cr && line.is_empty() && ending == b"\n" {
            ending = b"\r\n";
        }
        let last = n + 1 == lines.len();
        if !(last && unterminated) {
            bytes.extend_from_slice(ending);
        }
        previous_cr = ending == b"\r";
    }
    bytes
}

fn expected(events: &[ModelEvent]) -> Vec<SseEvent> {
    events
        .iter()
        .map(|event| SseEvent {
            kind: if event.error {
                SseEventKind::Error
            } else {
                SseEventKind::Data
            },
            event: event.event.clone(),
            id: event.id.clone(),
            data: event.lines.join("\n"),
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn valid_stream_decodes_the_same_under_any_split(
        events in proptest::collection::vec(model_event(), 1..8),
        style in proptest::collection::vec(any::<u8>(), 1..16),
        bom in any::<bool>(),
        unterminated in any::<bool>(),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
    ) {
        let bytes = serialise(&events, &style, bom, unterminated);
        let whole = decode(&bytes, &[], 1 << 16);
        prop_assert_eq!(&whole.0, &expected(&events));
        prop_assert!(whole.1.is_none());
        prop_assert_eq!(decode(&bytes, &cuts, 1 << 16), whole);
        // Byte by byte too.
        let every: Vec<usize> = (0..bytes.len()).collect();
        prop_assert_eq!(decode(&bytes, &every, 1 << 16), decode(&bytes, &[], 1 << 16));
    }

    #[test]
    fn arbitrary_bytes_never_panic_and_split_does_not_matter(
        bytes in proptest::collection::vec(
            prop_oneof![
                Just(b'\n'), Just(b'\r'), Just(b':'), Just(b' '), Just(b'd'), Just(b'a'),
                Just(b't'), Just(0xEF), Just(0xBB), Just(0xBF), any::<u8>(),
            ],
            0..300,
        ),
        prefix in prop_oneof![Just(&b""[..]), Just(&b"data:"[..]), Just(&b"error: "[..])],
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
        limit in 1usize..64,
    ) {
        let mut stream = prefix.to_vec();
        stream.extend_from_slice(&bytes);
        let whole = decode(&stream, &[], limit);
        prop_assert_eq!(decode(&stream, &cuts, limit), whole);
        let big_limit = decode(&stream, &cuts, 1 << 16);
        prop_assert_eq!(decode(&stream, &[], 1 << 16), big_limit);
    }
}
