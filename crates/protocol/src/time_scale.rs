//! Time on a scaled clock, shared by the client and the simulator: `time_scale` target seconds
//! pass per second of the clock they both run on. Where the scale is the reciprocal of a whole
//! number (virtual time's dilation) the arithmetic is exact to the nanosecond, so the same
//! instant converts to the same nanosecond on either side and back; other scales go through
//! `f64`.

use std::time::Duration;

/// The whole number `n` with `time_scale == 1 / n`, if there is one (within `f64` rounding).
fn divisor(time_scale: f64) -> Option<u32> {
    if !(time_scale.is_finite() && time_scale > 0.0 && time_scale < 1.0) {
        return None;
    }
    let n = (1.0 / time_scale).round();
    let whole = (1.0 / time_scale - n).abs() <= n * 1e-12 && n <= f64::from(u32::MAX);
    // `n` is a whole number within u32's range here.
    whole.then_some(n as u32)
}

/// Target time of `clock` time (`clock × time_scale`; truncated to the nanosecond on an
/// exact scale, saturating on overflow).
pub fn to_target(clock: Duration, time_scale: f64) -> Duration {
    if time_scale == 1.0 {
        return clock;
    }
    match divisor(time_scale) {
        Some(n) => clock / n,
        None => {
            Duration::try_from_secs_f64(clock.as_secs_f64() * time_scale).unwrap_or(Duration::MAX)
        }
    }
}

/// Whole microseconds of target time in `clock` time (truncated, as a journal records every
/// time; saturating).
pub fn to_target_micros(clock: Duration, time_scale: f64) -> u64 {
    u64::try_from(to_target(clock, time_scale).as_micros()).unwrap_or(u64::MAX)
}

/// Clock time of `target` time (`target / time_scale`; exact on an exact scale, saturating
/// on overflow).
pub fn to_clock(target: Duration, time_scale: f64) -> Duration {
    if time_scale == 1.0 {
        return target;
    }
    match divisor(time_scale) {
        Some(n) => target.checked_mul(n).unwrap_or(Duration::MAX),
        None => {
            Duration::try_from_secs_f64(target.as_secs_f64() / time_scale).unwrap_or(Duration::MAX)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exact_scale_maps_every_nanosecond_both_ways() {
        let scale = 1e-6;
        for ns in [0u64, 1, 999, 1_000, 123_456_789, 68_400_000_000_000] {
            let target = Duration::from_nanos(ns);
            let clock = to_clock(target, scale);
            assert_eq!(clock, Duration::from_nanos(ns) * 1_000_000);
            assert_eq!(to_target(clock, scale), target);
            // A clock instant between two target nanoseconds reads as the earlier.
            assert_eq!(
                to_target(clock + Duration::from_nanos(999_999), scale),
                target
            );
        }
    }

    #[test]
    fn other_scales_go_through_floating_point() {
        let second = Duration::from_secs(1);
        assert_eq!(to_target(second, 2.0), Duration::from_secs(2));
        assert_eq!(to_clock(second, 2.0), Duration::from_millis(500));
        assert_eq!(to_target(second, 1.0), second);
        assert_eq!(
            to_clock(Duration::from_secs(3), 0.3),
            Duration::from_secs(10)
        );
        assert_eq!(divisor(0.3), None);
        assert_eq!(divisor(1e-3), Some(1_000));
        assert_eq!(to_clock(Duration::MAX, 1e-6), Duration::MAX);
        assert_eq!(
            to_target_micros(Duration::from_nanos(2_999_999_999), 1e-3),
            2_999
        );
        assert_eq!(to_target_micros(Duration::from_nanos(1_999), 1.0), 1);
    }
}
