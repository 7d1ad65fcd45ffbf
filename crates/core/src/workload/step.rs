//! A step's own requests: each later step of a sweep or a capacity search sends requests drawn
//! further along the workload, so no step re-sends the prompts of the one before and a
//! server's prompt or prefix cache cannot serve a probe from an earlier probe's work.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use super::{Workload, image};
use crate::backend::RequestSpec;

/// How far along the workload each step starts: step `k` sends requests `k · STRIDE`, … (a
/// run never sends anywhere near 2³² requests).
const STRIDE: u64 = 1 << 32;

/// `workload` as step `step` sends it: from request `step · 2³²` on (each spec still numbered
/// from 0 in its step; a batch sweep's batched workload reads its inner one from further along
/// too). Step 0, a trace replay (its rows carry their own send times) and multi-turn sessions
/// (their conversations index themselves) are sent as they are.
pub fn for_step(workload: Arc<dyn Workload>, step: u32) -> Arc<dyn Workload> {
    let as_is = workload.arrival_offsets().is_some() || workload.conversations().is_some();
    if step == 0 || as_is {
        return workload;
    }
    Arc::new(Later {
        inner: workload,
        offset: u64::from(step) * STRIDE,
    })
}

/// A workload read `offset` requests further along.
struct Later {
    inner: Arc<dyn Workload>,
    offset: u64,
}

impl fmt::Debug for Later {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} from request {}", self.inner, self.offset)
    }
}

impl Workload for Later {
    fn request(&self, index: u64) -> RequestSpec {
        RequestSpec {
            index,
            ..self.inner.request(index + self.offset)
        }
    }

    fn describe(&self) -> BTreeMap<String, serde_json::Value> {
        self.inner.describe()
    }

    fn expected_prefix_tokens(&self, index: u64) -> Option<u64> {
        self.inner.expected_prefix_tokens(index + self.offset)
    }

    fn images(&self, index: u64) -> Vec<image::Image> {
        self.inner.images(index + self.offset)
    }

    fn labels(&self, index: u64) -> super::mix::Labels {
        self.inner.labels(index + self.offset)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::backend::RequestInput;
    use crate::workload::synthetic::SyntheticWorkload;

    fn prompt(workload: &dyn Workload, index: u64) -> String {
        match workload.request(index).input {
            RequestInput::Text(text) => text,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn later_steps_send_other_prompts_of_the_same_length() {
        let workload: Arc<dyn Workload> = Arc::new(SyntheticWorkload {
            input_tokens: 64,
            output_tokens: Some(8),
            seed: 5,
        });
        let first = for_step(Arc::clone(&workload), 0);
        let second = for_step(Arc::clone(&workload), 1);
        let third = for_step(workload, 2);
        for index in 0..4 {
            let prompts = [&first, &second, &third].map(|w| prompt(w.as_ref(), index));
            assert_ne!(prompts[0], prompts[1]);
            assert_ne!(prompts[1], prompts[2]);
            assert!(prompts.iter().all(|p| p.split(' ').count() == 64));
            let spec = second.request(index);
            assert_eq!(spec.index, index);
            assert_eq!(spec.max_output_tokens, Some(8));
        }
        assert_eq!(prompt(first.as_ref(), 3), prompt(first.as_ref(), 3));
    }

    #[test]
    fn a_batch_sweeps_levels_share_no_prompt() {
        let inner: Arc<dyn Workload> = Arc::new(SyntheticWorkload {
            input_tokens: 16,
            output_tokens: Some(1),
            seed: 3,
        });
        let level = |batch: u32, step: u32| {
            let batched = crate::decide::sweep::BatchedWorkload {
                inner: Arc::clone(&inner),
                batch,
            };
            let workload = for_step(Arc::new(batched), step);
            (0..8)
                .flat_map(|i| match workload.request(i).input {
                    RequestInput::Batch(prompts) => prompts,
                    other => panic!("{other:?}"),
                })
                .collect::<Vec<String>>()
        };
        // Batch 1 sends inner requests 0–7, batch 4 on the same start 0–31: the first eight
        // again. Read from the second step on, none of them.
        let (one, four) = (level(1, 0), level(4, 1));
        assert_eq!(four.len(), 32);
        assert!(one.iter().all(|p| !four.contains(p)));
        assert!(one.iter().all(|p| level(4, 0).contains(p)));
    }
}
