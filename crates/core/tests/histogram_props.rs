//! Property tests of histogram merging: however the samples are split into parts, and in
//! whatever order the parts are merged, the merge equals the histogram of the whole — count,
//! exact mean, minimum, maximum and every percentile. Bounded case counts.
#![allow(clippy::unwrap_used)]

use goodput_core::metrics::{CountHistogram, LatencyHistogram};
use proptest::prelude::*;

/// Sample values from sub-microsecond to hours, with repeats (weights).
fn samples() -> impl Strategy<Value = Vec<(u64, u64)>> {
    proptest::collection::vec(
        (
            prop_oneof![0u64..100, 100u64..100_000, 100_000u64..10_000_000_000],
            1u64..4,
        ),
        0..300,
    )
}

const PERCENTILES: [f64; 9] = [0.0, 1.0, 25.0, 50.0, 90.0, 95.0, 99.0, 99.9, 100.0];

fn assert_same(merged: &LatencyHistogram, whole: &LatencyHistogram) -> Result<(), TestCaseError> {
    prop_assert_eq!(merged.count(), whole.count());
    prop_assert_eq!(merged.mean_us(), whole.mean_us());
    prop_assert_eq!(merged.min_us(), whole.min_us());
    prop_assert_eq!(merged.max_us(), whole.max_us());
    for p in PERCENTILES {
        prop_assert_eq!(merged.percentile_us(p), whole.percentile_us(p), "p{}", p);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn merging_any_split_equals_the_whole(
        values in samples(),
        parts in 1usize..6,
        assignment in proptest::collection::vec(any::<usize>(), 300),
        order in proptest::collection::vec(any::<usize>(), 6),
    ) {
        let mut whole = LatencyHistogram::new();
        let mut pieces = vec![LatencyHistogram::new(); parts];
        for (n, &(value, weight)) in values.iter().enumerate() {
            whole.record_micros_n(value, weight);
            pieces[assignment[n] % parts].record_micros_n(value, weight);
        }
        // Merge in an arbitrary order into an arbitrary starting piece.
        let mut indices: Vec<usize> = (0..parts).collect();
        for (i, key) in order.iter().take(parts).enumerate() {
            indices.swap(i, key % parts);
        }
        let mut merged = pieces[indices[0]].clone();
        for &index in &indices[1..] {
            merged += &pieces[index];
        }
        assert_same(&merged, &whole)?;
        // Merging an empty histogram changes nothing, on either side.
        merged += &LatencyHistogram::new();
        assert_same(&merged, &whole)?;
        let mut empty = LatencyHistogram::new();
        empty += &whole;
        assert_same(&empty, &whole)?;
    }

    #[test]
    fn count_histograms_merge_the_same_way(
        values in proptest::collection::vec(0u64..1_000_000, 0..200),
        split in any::<usize>(),
    ) {
        let cut = split % (values.len() + 1);
        let (mut left, mut right, mut whole) =
            (CountHistogram::default(), CountHistogram::default(), CountHistogram::default());
        for (n, &value) in values.iter().enumerate() {
            whole.record(value);
            if n < cut { left.record(value) } else { right.record(value) }
        }
        left += &right;
        prop_assert_eq!(left.count(), whole.count());
        prop_assert_eq!(left.mean(), whole.mean());
        prop_assert_eq!(left.min(), whole.min());
        prop_assert_eq!(left.max(), whole.max());
        for p in PERCENTILES {
            prop_assert_eq!(left.percentile(p), whole.percentile(p));
        }
    }
}
