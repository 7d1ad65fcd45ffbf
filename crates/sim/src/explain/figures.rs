//! Numbers in the explanation's formulas: a calibrated configuration's fitted constants (a
//! bandwidth of 0.16033265081649647 TB/s) printed to four significant digits.

/// `value` to four significant digits, without trailing zeros (0.1603, 3.35, 989.5); from
/// 10,000 up, whole (12812).
pub(super) fn sig(value: f64) -> String {
    if value == 0.0 || !value.is_finite() {
        return format!("{value}");
    }
    let magnitude = value.abs().log10().floor() as i32;
    let decimals = usize::try_from(3 - magnitude).unwrap_or(0);
    let text = format!("{value:.decimals$}");
    match text.contains('.') {
        true => text.trim_end_matches('0').trim_end_matches('.').to_string(),
        false => text,
    }
}

#[cfg(test)]
mod tests {
    use super::sig;

    #[test]
    fn four_significant_digits_and_no_trailing_zeros() {
        assert_eq!(sig(0.16033265081649647), "0.1603");
        assert_eq!(sig(0.0020013148176706076), "0.002001");
        assert_eq!(sig(3.35), "3.35");
        assert_eq!(sig(989.5), "989.5");
        assert_eq!(sig(12_812.4), "12812");
        assert_eq!(sig(1.0), "1");
        assert_eq!(sig(0.0), "0");
    }
}
