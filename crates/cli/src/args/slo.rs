//! `--slo`: the one place its text is parsed, once per command invocation (`run`, `sweep`,
//! `capacity`, `calibrate --check`, `plan --simulate`, `report`, `merge`).

use anyhow::{Context, Result};
use goodput_core::metrics::Slo;

/// The SLO of a `--slo` value (`none` disables).
pub(crate) fn parse_slo(text: &str) -> Result<Option<Slo>> {
    if text.trim().eq_ignore_ascii_case("none") {
        return Ok(None);
    }
    Ok(Some(Slo::parse(text).context("--slo")?))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::args::run::DEFAULT_SLO;

    #[test]
    fn slo_none_disables() {
        assert!(parse_slo("none").unwrap().is_none());
        assert!(parse_slo(DEFAULT_SLO).unwrap().is_some());
    }
}
