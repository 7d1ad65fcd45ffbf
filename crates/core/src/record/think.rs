//! `<think>…</think>` tags inside answer text: models served without a reasoning parser stream
//! their thinking as ordinary `content`. [`ThinkTags`] splits each piece of content into its
//! reasoning and answer parts as it arrives, tags counted as reasoning, including tags split
//! across chunks and the DeepSeek-R1 shape whose `<think>` is in the prompt template (only
//! `</think>` is generated: everything before it was reasoning).

const OPEN: &str = "<think>";
const CLOSE: &str = "</think>";
/// Bytes of earlier content kept to find a tag split across chunks.
const CARRY: usize = CLOSE.len() - 1;

/// The split of one piece of content.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThinkSplit {
    /// Reasoning text (tags included), in order.
    pub reasoning: String,
    /// Answer text, in order.
    pub answer: String,
    /// A `</think>` closed a block that was never seen opening: all earlier content was
    /// reasoning too.
    pub closes_unopened: bool,
}

/// The state of one answer's content stream.
#[derive(Debug, Clone, Default)]
pub struct ThinkTags {
    thinking: bool,
    /// A tag was seen (an unopened `</think>` is believed only before any tag).
    seen_tag: bool,
    /// The last bytes of the content so far (at most [`CARRY`]).
    carry: String,
}

impl ThinkTags {
    /// Whether the stream is inside a `<think>` block.
    pub fn thinking(&self) -> bool {
        self.thinking
    }

    /// Splits `text`, the next piece of content. A tag that began in an earlier piece counts
    /// whole in this one (the earlier piece keeps its classification).
    pub fn split(&mut self, text: &str) -> ThinkSplit {
        let mut split = ThinkSplit::default();
        if text.is_empty() {
            return split;
        }
        // Every tag begins with `<`: without one, neither a tag nor the start of one is here
        // (the common case, one token per chunk, with no search and no copy).
        if !text.contains('<') && !self.carry.contains('<') {
            self.carry.clear();
            self.push(&mut split, text, 0, text.len());
            return split;
        }
        let joined = format!("{}{text}", self.carry);
        let offset = self.carry.len();
        let mut position = 0;
        while let Some((start, tag)) = self.next_tag(&joined, position, offset) {
            self.push(&mut split, &joined, position.max(offset), start.max(offset));
            let end = start + tag.len();
            split.reasoning.push_str(&joined[start.max(offset)..end]);
            if tag == CLOSE && !self.thinking && !self.seen_tag {
                split.closes_unopened = true;
                split
                    .reasoning
                    .insert_str(0, &std::mem::take(&mut split.answer));
            }
            self.thinking = tag == OPEN;
            self.seen_tag = true;
            position = end;
        }
        self.push(&mut split, &joined, position.max(offset), joined.len());
        let mut keep = joined.len().saturating_sub(CARRY);
        while !joined.is_char_boundary(keep) {
            keep += 1;
        }
        self.carry = joined[keep..].to_string();
        split
    }

    /// The next tag at or after `from` that ends after `offset` (so it is not entirely in the
    /// carried bytes, already handled).
    fn next_tag(&self, joined: &str, from: usize, offset: usize) -> Option<(usize, &'static str)> {
        let wanted: &[&'static str] = if self.thinking {
            &[CLOSE]
        } else if self.seen_tag {
            &[OPEN]
        } else {
            &[OPEN, CLOSE]
        };
        wanted
            .iter()
            .filter_map(|tag| {
                let mut at = from;
                loop {
                    let found = at + joined.get(at..)?.find(tag)?;
                    if found + tag.len() > offset {
                        return Some((found, *tag));
                    }
                    at = found + 1;
                }
            })
            .min_by_key(|(start, _)| *start)
    }

    fn push(&self, split: &mut ThinkSplit, joined: &str, from: usize, to: usize) {
        if from >= to {
            return;
        }
        let piece = &joined[from..to];
        if self.thinking {
            split.reasoning.push_str(piece);
        } else {
            split.answer.push_str(piece);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(pieces: &[&str]) -> Vec<(String, String, bool)> {
        let mut tags = ThinkTags::default();
        pieces
            .iter()
            .map(|piece| {
                let split = tags.split(piece);
                (split.reasoning, split.answer, split.closes_unopened)
            })
            .collect()
    }

    fn s(text: &str) -> String {
        text.to_string()
    }

    #[test]
    fn plain_content_is_answer() {
        assert_eq!(run(&["Hello", " world"])[1], (s(""), s(" world"), false));
    }

    #[test]
    fn a_think_block_is_reasoning_with_its_tags() {
        assert_eq!(
            run(&["<think>", "hmm", "</think>", "Yes"]),
            vec![
                (s("<think>"), s(""), false),
                (s("hmm"), s(""), false),
                (s("</think>"), s(""), false),
                (s(""), s("Yes"), false),
            ]
        );
        assert_eq!(
            run(&["<think>a</think>b"]),
            vec![(s("<think>a</think>"), s("b"), false)]
        );
    }

    #[test]
    fn tags_split_across_chunks_are_found() {
        let got = run(&["<th", "ink>x</thi", "nk>y"]);
        assert_eq!(got[0], (s(""), s("<th"), false));
        assert_eq!(got[1], (s("ink>x</thi"), s(""), false));
        assert_eq!(got[2], (s("nk>"), s("y"), false));
    }

    #[test]
    fn an_unopened_close_makes_what_came_before_reasoning() {
        let got = run(&["Let me think", " more</think>", "Answer"]);
        assert_eq!(got[0], (s(""), s("Let me think"), false));
        assert_eq!(got[1], (s(" more</think>"), s(""), true));
        assert_eq!(got[2], (s(""), s("Answer"), false));
        // Only before any tag: a second close inside the answer is answer text.
        let got = run(&["<think>a</think>b", "c</think>d"]);
        assert_eq!(got[1], (s(""), s("c</think>d"), false));
    }

    #[test]
    fn multibyte_text_is_cut_on_char_boundaries() {
        let got = run(&["<think>été", "…</think>ça"]);
        assert_eq!(got[1], (s("…</think>"), s("ça"), false));
    }
}
