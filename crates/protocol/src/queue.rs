//! The order in which a batching engine admits the requests waiting for a free sequence slot:
//! first come first served (vLLM's default, llama.cpp, TGI, SGLang's `fcfs`), or by a request's
//! length (SGLang's `lof`, longest output first; shortest-job-first schedulers) or newest first.
//! The simulator's batching engine admits in it; `goodput calibrate` reads it from a server with
//! its queue-order probe.

use serde::{Deserialize, Serialize};

/// Which waiting request takes the next free slot (ties go to the one that came first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueueOrder {
    /// The one that came first.
    #[default]
    Fifo,
    /// The one that came last.
    Lifo,
    /// The one with the fewest prompt tokens.
    ShortestPrompt,
    /// The one with the most prompt tokens.
    LongestPrompt,
    /// The one asking for the fewest answer tokens (`max_tokens`).
    ShortestOutput,
    /// The one asking for the most answer tokens (`max_tokens`; SGLang's `lof`).
    LongestOutput,
}

impl QueueOrder {
    /// Every order, for help texts and reports.
    pub const ALL: [QueueOrder; 6] = [
        QueueOrder::Fifo,
        QueueOrder::Lifo,
        QueueOrder::ShortestPrompt,
        QueueOrder::LongestPrompt,
        QueueOrder::ShortestOutput,
        QueueOrder::LongestOutput,
    ];

    /// Whether this is the default, first come first served.
    pub fn is_fifo(&self) -> bool {
        *self == QueueOrder::Fifo
    }

    /// The order's name, as the configuration spells it.
    pub fn name(self) -> &'static str {
        match self {
            QueueOrder::Fifo => "fifo",
            QueueOrder::Lifo => "lifo",
            QueueOrder::ShortestPrompt => "shortest-prompt",
            QueueOrder::LongestPrompt => "longest-prompt",
            QueueOrder::ShortestOutput => "shortest-output",
            QueueOrder::LongestOutput => "longest-output",
        }
    }

    /// Where a request with `key`'s lengths goes in a queue whose requests have `keys` (in
    /// queue order, the next to be admitted first): behind every request it does not go
    /// before. `keys` are `(prompt tokens, max_tokens)`.
    pub fn position(self, keys: impl Iterator<Item = (u32, u32)>, key: (u32, u32)) -> usize {
        let goes_before = |other: (u32, u32)| match self {
            QueueOrder::Fifo => false,
            QueueOrder::Lifo => true,
            QueueOrder::ShortestPrompt => key.0 < other.0,
            QueueOrder::LongestPrompt => key.0 > other.0,
            QueueOrder::ShortestOutput => key.1 < other.1,
            QueueOrder::LongestOutput => key.1 > other.1,
        };
        let mut position = 0;
        for (index, other) in keys.enumerate() {
            if goes_before(other) {
                return index;
            }
            position = index + 1;
        }
        position
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order_of(order: QueueOrder, arrivals: &[(u32, u32)]) -> Vec<usize> {
        let mut queue: Vec<(usize, (u32, u32))> = Vec::new();
        for (index, key) in arrivals.iter().enumerate() {
            let at = order.position(queue.iter().map(|(_, k)| *k), *key);
            queue.insert(at, (index, *key));
        }
        queue.into_iter().map(|(index, _)| index).collect()
    }

    #[test]
    fn each_order_admits_by_its_key_and_ties_by_arrival() {
        // (prompt, max_tokens) in arrival order.
        let arrivals = [(64, 96), (16, 32), (128, 64), (16, 96)];
        assert_eq!(order_of(QueueOrder::Fifo, &arrivals), [0, 1, 2, 3]);
        assert_eq!(order_of(QueueOrder::Lifo, &arrivals), [3, 2, 1, 0]);
        assert_eq!(
            order_of(QueueOrder::ShortestPrompt, &arrivals),
            [1, 3, 0, 2]
        );
        assert_eq!(order_of(QueueOrder::LongestPrompt, &arrivals), [2, 0, 1, 3]);
        assert_eq!(
            order_of(QueueOrder::ShortestOutput, &arrivals),
            [1, 2, 0, 3]
        );
        assert_eq!(order_of(QueueOrder::LongestOutput, &arrivals), [0, 3, 2, 1]);
    }

    #[test]
    fn names_round_trip_through_the_configuration() {
        for order in QueueOrder::ALL {
            let text = serde_json::to_string(&order).unwrap();
            assert_eq!(text, format!("\"{}\"", order.name()));
            assert_eq!(serde_json::from_str::<QueueOrder>(&text).unwrap(), order);
        }
    }
}
