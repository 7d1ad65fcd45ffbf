//! Image generation by size and steps (`--image-size`, `--image-steps`): every combination of
//! the sizes and step counts given, request by request in turn, so one run measures each, and
//! [`Generating`], the workload that asks each request for its combination (journaled on its
//! record, the key of the report's `image_settings`).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde_json::json;

use super::Workload;
use crate::backend::RequestSpec;
use crate::record::{Generation, Resolution};

/// The sizes and step counts an image-generation run asks for (either may be empty: the
/// server's default).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct GenerationGrid {
    /// Image sizes, in the order given.
    pub sizes: Vec<Resolution>,
    /// Denoising step counts, in the order given.
    pub steps: Vec<u32>,
}

impl GenerationGrid {
    /// Whether it asks for nothing.
    pub fn is_empty(&self) -> bool {
        self.sizes.is_empty() && self.steps.is_empty()
    }

    /// Combinations it takes in turn: sizes × step counts.
    pub fn combinations(&self) -> u64 {
        (self.sizes.len().max(1) * self.steps.len().max(1)) as u64
    }

    /// What request `index` asks for: combination `index mod combinations`, the sizes varying
    /// fastest (with sizes a, b and steps 10, 20: a·10, b·10, a·20, b·20, a·10, …).
    pub fn at(&self, index: u64) -> Generation {
        let combination = index % self.combinations();
        let sizes = self.sizes.len().max(1) as u64;
        let pick = |position: u64, len: usize| (position % len.max(1) as u64) as usize;
        Generation {
            size: self.sizes.get(pick(combination, self.sizes.len())).copied(),
            steps: self
                .steps
                .get(pick(combination / sizes, self.steps.len()))
                .copied(),
        }
    }
}

/// A workload whose requests each ask for their combination of a [`GenerationGrid`].
pub struct Generating {
    inner: Arc<dyn Workload>,
    grid: GenerationGrid,
}

impl Generating {
    /// `inner`'s requests asking for `grid`'s combinations in turn (`inner` itself when the
    /// grid is empty).
    pub fn wrap(inner: Arc<dyn Workload>, grid: GenerationGrid) -> Arc<dyn Workload> {
        if grid.is_empty() {
            return inner;
        }
        Arc::new(Generating { inner, grid })
    }
}

impl fmt::Debug for Generating {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} generating {:?}", self.inner, self.grid)
    }
}

impl Workload for Generating {
    fn inner(&self) -> Option<&dyn Workload> {
        Some(self.inner.as_ref())
    }

    fn request(&self, index: u64) -> RequestSpec {
        let mut spec = self.inner.request(index);
        spec.tags.generation = Some(self.grid.at(index));
        spec
    }

    fn describe(&self) -> BTreeMap<String, serde_json::Value> {
        let mut described = self.inner.describe();
        let sizes: Vec<String> = self.grid.sizes.iter().map(ToString::to_string).collect();
        if !sizes.is_empty() {
            described.insert("image_sizes".into(), json!(sizes));
        }
        if !self.grid.steps.is_empty() {
            described.insert("image_steps".into(), json!(self.grid.steps));
        }
        described
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::workload::SyntheticWorkload;

    fn size(text: &str) -> Option<Resolution> {
        Resolution::read(text)
    }

    #[test]
    fn every_combination_in_turn_sizes_fastest() {
        let grid = GenerationGrid {
            sizes: vec![size("256x256").unwrap(), size("512x512").unwrap()],
            steps: vec![10, 20, 30],
        };
        assert_eq!(grid.combinations(), 6);
        let asked: Vec<(Option<Resolution>, Option<u32>)> = (0..7)
            .map(|i| grid.at(i))
            .map(|g| (g.size, g.steps))
            .collect();
        let expected = [
            (size("256x256"), Some(10)),
            (size("512x512"), Some(10)),
            (size("256x256"), Some(20)),
            (size("512x512"), Some(20)),
            (size("256x256"), Some(30)),
            (size("512x512"), Some(30)),
            (size("256x256"), Some(10)),
        ];
        assert_eq!(asked, expected);
        let steps_only = GenerationGrid {
            sizes: Vec::new(),
            steps: vec![4, 8],
        };
        let at = |i| steps_only.at(i);
        assert_eq!(
            (at(0).steps, at(1).steps, at(2).steps),
            (Some(4), Some(8), Some(4))
        );
        assert_eq!(at(1).size, None);
    }

    #[test]
    fn wrapped_requests_carry_their_combination_and_the_run_describes_the_grid() {
        let inner: Arc<dyn Workload> = Arc::new(SyntheticWorkload {
            input_tokens: 8,
            output_tokens: Some(1),
            seed: 7,
        });
        assert!(Arc::ptr_eq(
            &Generating::wrap(Arc::clone(&inner), GenerationGrid::default()),
            &inner
        ));
        let grid = GenerationGrid {
            sizes: vec![size("64x64").unwrap()],
            steps: vec![2, 3],
        };
        let wrapped = Generating::wrap(Arc::clone(&inner), grid.clone());
        for index in 0..4 {
            let spec = wrapped.request(index);
            assert_eq!(spec.tags.generation, Some(grid.at(index)));
            assert_eq!(spec.input, inner.request(index).input);
        }
        let described = wrapped.describe();
        assert_eq!(described["image_sizes"], json!(["64x64"]));
        assert_eq!(described["image_steps"], json!([2, 3]));
    }

    #[test]
    fn wrappers_answer_what_they_do_not_change_as_the_workload_they_wrap() {
        use crate::workload::image::{Image, WithImages};
        use crate::workload::mix::{Mix, Mixed, Shares};
        let base: Arc<dyn Workload> = Arc::new(SyntheticWorkload {
            input_tokens: 4,
            output_tokens: Some(2),
            seed: 3,
        });
        let mix = Mix {
            models: Some(Shares::parse("a=50%,b=50%", false).unwrap()),
            ..Mix::default()
        };
        let picture = Image::generated(size("64x64").unwrap(), 1);
        let grid = GenerationGrid {
            sizes: vec![size("256x256").unwrap()],
            steps: vec![],
        };
        // The order the CLI wires them (images, settings, mix) and images outermost: each
        // answers the labels of the mix and the images of the image wrapper wherever it sits.
        let images = Arc::new(WithImages::new(base, vec![picture.clone()], 1).unwrap());
        let mixed = Mixed::wrap(Generating::wrap(images.clone(), grid.clone()), mix, 9);
        let outer = Arc::new(WithImages::new(Arc::clone(&mixed), vec![picture], 1).unwrap());
        let around = Generating::wrap(outer.clone(), grid);
        for index in 0..6 {
            let labels = mixed.labels(index);
            assert!(labels.model.is_some());
            assert_eq!(outer.labels(index), labels);
            assert_eq!(around.labels(index), labels);
            assert_eq!(around.images(index).len(), 1);
            assert_eq!(mixed.images(index).len(), images.images(index).len());
        }
        assert!(around.arrival_offsets().is_none() && around.conversations().is_none());
        assert_eq!(around.expected_prefix_tokens(0), None);
    }
}
